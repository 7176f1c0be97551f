// Package bootedtest boots a whole system for a test (units/booted: the
// host's root as PID 1 of systemd-nspawn over a throwaway overlay, with
// logind, journald and user@.service), the project's second test tier.
// Require is the one gate of that tier: a test that needs a booted system
// calls it (Boot does), and skips saying what is missing, or fails with
// CI=true.
//
// Systems are named legion-bt-<pid of the test process>-<random>, so tests
// of many processes can boot at the same time. The package owns the
// cleanups it registers; it never touches the host's own files, mounts or
// processes.
package bootedtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/units/booted"
	"github.com/legion-dev/legion/units/sdtest"
)

// systemName prefixes every system of a test.
const systemName = "legion-bt"

// stopTimeout bounds a test's cleanup: the clean halt, then the kills.
const stopTimeout = 2 * time.Minute

// Require skips the test (fails it with CI=true) unless this machine can
// boot a system: root, systemd-nspawn of the installed systemd's version
// (scripts/check-deps installs it), overlayfs, a usable cgroup layout.
func Require(t testing.TB) {
	t.Helper()
	err := booted.Check(t.Context())
	var missing *booted.MissingError
	if errors.As(err, &missing) {
		sdtest.Require(t, missing.What+" (a booted-system test)", false)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Boot boots a system for the test; t.Cleanup stops it and checks that
// nothing of it is left (no process, mount, cgroup or directory), and logs
// the end of its console if the test failed.
func Boot(t testing.TB) *booted.System {
	t.Helper()
	Require(t)
	start := time.Now()
	s, err := booted.Boot(t.Context(), booted.Options{Name: systemName})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("booted %s in %v", s.Machine, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("console of %s, last lines:\n%s", s.Machine, s.ConsoleTail(30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("clean up: %v", err)
			return
		}
		if left := Leftovers(s); len(left) > 0 {
			t.Errorf("after Stop, left behind by %s:\n%s", s.Machine, strings.Join(left, "\n"))
		}
	})
	return s
}
