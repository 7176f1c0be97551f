// Package waitfor is how Legion's tests wait for a condition: they try it
// until it holds or a generous deadline passes, instead of sleeping and
// then asserting. A condition that holds returns at once, so the deadline
// costs nothing on a fast machine and only decides how long a broken test
// takes to fail on a slow one (2 cores shared by many test binaries, or
// -race). It is tailscale's tstest.WaitFor with a name for the failure.
//
// It is for tests only: it must never be imported by code that ships, and
// it never asserts on time (a test that can fail only by timing is flaky).
package waitfor

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// interval is how often a condition is tried: short enough that a test
// waits little after the condition holds, long enough that trying it
// (a D-Bus call, a file read) does not load the machine.
const interval = 20 * time.Millisecond

// Until calls cond until it returns nil, and then returns nil. If timeout
// passes first, it returns an error that names what was awaited and wraps
// cond's last error (what cond saw, for the failure message). cond is
// called at least once, even with a timeout of zero.
func Until(timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if s, ok := errors.AsType[stopped](err); ok {
			return fmt.Errorf("waiting for %s: %w", what, s.err)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("waiting for %s: gave up after %v: %w", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

// Stop wraps err so that Until returns it at once instead of trying cond
// again: for a condition that can no longer hold (the process that was to
// make it true exited), so that the test fails now, with the cause, rather
// than at the deadline.
func Stop(err error) error { return stopped{err} }

type stopped struct{ err error }

func (s stopped) Error() string { return s.err.Error() }
func (s stopped) Unwrap() error { return s.err }

// Check is Until that fails t (t.Fatal) on the deadline.
func Check(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Until(timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// True is Check for a condition with nothing to say but whether it holds.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Check(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// errNotYet is what True reports of a condition that never held.
var errNotYet = errors.New("still false")
