package booted_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/legion-dev/legion/internal/cgroups"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/booted"
	"github.com/legion-dev/legion/units/booted/bootedtest"
)

// ownerName names the systems of TestOwnerDies.
const ownerName = "legion-bt-owner"

// TestMain lets the test binary double as a process that boots a system
// (BOOTED_TEST_OWNER set, the parent dir as its value): TestOwnerDies kills
// it to see what is left.
func TestMain(m *testing.M) {
	dir := os.Getenv("BOOTED_TEST_OWNER")
	if dir == "" {
		os.Exit(m.Run())
	}
	ctx := context.Background()
	s, err := booted.Boot(ctx, booted.Options{Dir: dir, Name: ownerName})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer s.Stop(ctx)
	b, err := json.Marshal(ownerReport{s.Dir, s.Machine, s.Cgroups()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s\n", b)
	io.Copy(io.Discard, os.Stdin) // until the test kills us or goes away
}

// ownerReport is what the owner process prints once its system runs.
type ownerReport struct {
	Dir, Machine string
	Cgroups      []string
}

// TestOwnerDies: when the process that booted a system is killed, the
// container powers off and every process of it ends by itself (parent
// death signals), and the next Boot of the same name in the same place
// removes the dead system's directory and cgroups.
func TestOwnerDies(t *testing.T) {
	t.Parallel()
	bootedtest.Require(t)
	base := t.TempDir()
	owner := exec.Command(os.Args[0], "-test.run=^$")
	owner.Env = append(os.Environ(), "BOOTED_TEST_OWNER="+base)
	stdin, err := owner.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := owner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	owner.Stderr = &stderr
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		owner.Process.Kill()
		owner.Wait()
		t.Fatalf("read the owner's report: %v\nstderr:\n%s", err, stderr.String())
	}
	var r ownerReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("owner's report %q: %v", line, err)
	}
	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	owner.Wait() // killed: the error says so

	waitfor.True(t, waitFor, "the dead owner's system to end by itself", func() bool {
		found, err := cgroups.Dirs(r.Cgroups).Members()
		return err == nil && len(found) == 0
	})
	if _, err := os.Stat(r.Dir); err != nil {
		t.Fatalf("the dead system's dir before the sweep: %v; want it still there", err)
	}

	ctx := testCtx(t)
	s, err := booted.Boot(ctx, booted.Options{Dir: base, Name: ownerName})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if _, err := os.Stat(r.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after the next Boot, stat %s: %v; want it swept", r.Dir, err)
	}
	for _, cg := range r.Cgroups {
		if _, err := os.Stat(cg); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after the next Boot, stat cgroup %s: %v; want it swept", cg, err)
		}
	}
}
