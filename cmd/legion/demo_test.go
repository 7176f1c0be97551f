package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/legion-dev/legion/units/sdtest"
)

// TestDemoFenced: `legion demo` as `make build` builds legion (no demo
// tag, as go test builds this package) fails with status 1 and says to run
// `make demo`, whatever its flags, and neither the demo nor the scripted
// agent is in its help; the binary the tests build (with the tag, as
// `make demo` does) has both.
func TestDemoFenced(t *testing.T) {
	if demoBuilt {
		t.Skip("this test binary was built with -tags demo; the fence is the build without it")
	}
	for _, args := range [][]string{{"demo"}, {"demo", "--web", "--agent", "claude"}} {
		_, _, err := legion(t, args...)
		var stderr bytes.Buffer
		code := exitCode(err, nil, &stderr)
		if code != exitError || !strings.Contains(stderr.String(), "built without the demo") || !strings.Contains(stderr.String(), "make demo") {
			t.Errorf("legion %s: exit status %d, stderr %q; want %d and a message naming make demo",
				strings.Join(args, " "), code, stderr.String(), exitError)
		}
	}
	help, _, err := legion(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"demo", "scripted-agent"} {
		if strings.Contains(help, "\n  "+name+" ") {
			t.Errorf("legion --help lists %s in a build without the demo:\n%s", name, help)
		}
	}
	var ue usageError
	if _, _, err := legion(t, "scripted-agent"); !errors.As(err, &ue) || !strings.Contains(err.Error(), `unknown command "scripted-agent"`) {
		t.Errorf("legion scripted-agent in a build without the demo: err = %v; want an unknown command", err)
	}

	// The tests' binary, built with the tag.
	bin := sdtest.LegionBinary(t)
	out, err := exec.CommandContext(t.Context(), bin, "--help").Output()
	if err != nil {
		t.Fatalf("%s --help: %v", bin, err)
	}
	if !strings.Contains(string(out), "\n  demo ") {
		t.Errorf("legion --help of a build with the demo tag does not list demo:\n%s", out)
	}
	if out, err := exec.CommandContext(t.Context(), bin, "demo", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "--agent") {
		t.Errorf("legion demo --help of a build with the demo tag: %v\n%s", err, out)
	}
}
