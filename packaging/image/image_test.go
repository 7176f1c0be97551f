package image

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/units/sdtest"
)

// A missing input is an error naming the file and what makes it; no
// output file is left behind.
func TestWriteMissing(t *testing.T) {
	bins := t.TempDir()
	for _, b := range Binaries[:2] {
		if err := os.WriteFile(filepath.Join(bins, b), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		o    Options
		want []string
	}{
		{"binary", Options{BinDir: bins}, []string{filepath.Join(bins, "legion-kube"), "make build"}},
		{"CLI", Options{BinDir: bins, CLIs: []CLI{{CLI: cliversion.Codex, Dir: filepath.Join(bins, "codex", "0.169.0")}}},
			[]string{filepath.Join(bins, "codex", "0.169.0"), "Codex"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "image.tar")
			_, err := Write(context.Background(), tc.o, "legion-worker:t", out)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Write = %v; want an error naming %s", err, w)
				}
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Errorf("stat %s = %v; want no file after a failed build", out, serr)
			}
		})
	}
}

// A script run through env has the interpreter, the program env runs and
// their libraries packed; a static program needs nothing.
func TestNeeds(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "cli")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := needs(context.Background(), script)
	if err != nil {
		t.Fatalf("needs(%s): %v", script, err)
	}
	joined := strings.Join(got, " ")
	if len(got) < 3 || got[0] != "/usr/bin/env" || filepath.Base(got[1]) != "sh" || !strings.Contains(joined, "libc.so") {
		t.Errorf("needs(#!/usr/bin/env sh) = %q; want /usr/bin/env, sh and libc", got)
	}
	static := filepath.Join(dir, "static")
	// glibc's ldconfig is a static program (ldd prints "statically linked").
	_, err = os.Stat("/sbin/ldconfig")
	sdtest.Require(t, "/sbin/ldconfig (glibc's, static)", err == nil)
	if err := os.Symlink("/sbin/ldconfig", static); err != nil {
		t.Fatal(err)
	}
	if got, err := needs(context.Background(), static); err != nil || len(got) != 0 {
		t.Errorf("needs(static ldconfig) = %q, %v; want nothing", got, err)
	}
}
