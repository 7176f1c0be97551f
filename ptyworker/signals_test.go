package ptyworker

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestAgentSignalsNotIgnored runs the worker binary as a unit does and
// checks that the agent starts with SIGPIPE at its default: a SIGPIPE ignored by
// the worker and inherited by the agent makes `yes | head -1` in the
// agent's shell fail with EPIPE errors, and loops that count on SIGPIPE to
// end never do.
func TestAgentSignalsNotIgnored(t *testing.T) {
	spec := testSpec(t)
	got := filepath.Join(spec.Cwd, "sigign")
	spec.ArgvNew = []string{"sh", "-c", "grep ^SigIgn: /proc/self/status >" + got + ".tmp && mv " + got + ".tmp " + got + "; exec sleep 1000"}
	specPath := filepath.Join(spec.Cwd, "spec.json")
	if err := proto.WriteSpec(specPath, spec); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sdtest.WorkerBinary(t), "--spec", specPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Errorf("wait for the worker of session %s: %v", spec.SessionID, err)
			}
		}
	})
	var line string
	waitFor(t, "the agent's SigIgn line in "+got, func() bool {
		b, err := os.ReadFile(got)
		line = string(b)
		return err == nil
	})
	hex, ok := strings.CutPrefix(strings.TrimSpace(line), "SigIgn:")
	mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
	if !ok || err != nil {
		t.Fatalf("agent's /proc/self/status line %q; want SigIgn: HEX", line)
	}
	if pipe := uint64(1) << (syscall.SIGPIPE - 1); mask&pipe != 0 {
		t.Errorf("agent's SigIgn = %016x: SIGPIPE ignored; want it at its default (the worker's disposition is inherited across exec)", mask)
	}
}
