// Package sdtest starts a private, real systemd user manager for a test, on
// machines where PID 1 is not systemd (containers, CI) as well as on
// ordinary ones. It is a thin test wrapper over units/sandbox, which does
// the work (its package doc says how): each manager has its own runtime
// dir, home, D-Bus session bus, and mount and cgroup namespaces, so several
// test processes can run managers at the same time without seeing each
// other's units.
//
// The package owns the environment changes and cleanups it registers on a
// test, and the directories LegionBinary builds into. It must never touch
// the real user's manager, home or runtime dir, and never signal a process
// it did not start.
//
// Sandboxes are named legion-sd-<pid of the test process>-<random>. If the
// test process dies before its cleanup, the manager gets SIGTERM (a parent
// death signal) and exits, and the next test process to call Start removes
// the directories and empty cgroups of test processes that are gone.
package sdtest

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/units/sandbox"
)

// sandboxName prefixes every sandbox directory and cgroup of a test.
const sandboxName = "legion-sd"

// Timeouts are generous: a loaded CI machine is slow, and a test never
// waits for them unless something is broken.
const (
	commandTimeout = 60 * time.Second // one systemctl run
	stopTimeout    = 60 * time.Second // for cleanup: the manager's exit, then kills
)

// Manager is a running private systemd user manager. Its fields describe
// the sandbox; Start has already put them into the test's environment.
type Manager struct {
	Dir        string   // the sandbox directory; removed at cleanup
	RuntimeDir string   // XDG_RUNTIME_DIR: Dir/run, mode 0700
	BusAddress string   // DBUS_SESSION_BUS_ADDRESS: unix:path=RuntimeDir/bus
	Home       string   // HOME: Dir/home; XDG_CONFIG_HOME etc. are below it
	Env        []string // the test's environment with the sandbox variables set, ready for exec.Cmd.Env

	sb        *sandbox.Sandbox
	closeOnce sync.Once
}

// Start starts a private systemd user manager and sets XDG_RUNTIME_DIR,
// DBUS_SESSION_BUS_ADDRESS, HOME, XDG_CONFIG_HOME, XDG_STATE_HOME,
// XDG_DATA_HOME and XDG_CACHE_HOME to the sandbox with t.Setenv, so a test
// that calls it must not use t.Parallel. t.Cleanup stops the manager and
// removes everything Start made. Start skips the test (fails it with
// CI=true) when not root or when a prerequisite is missing, and fails it,
// quoting the manager's log, when the manager does not come up.
func Start(t testing.TB) *Manager {
	t.Helper()
	return StartWith(t, Options{})
}

// Options change the private manager of StartWith.
type Options struct {
	// DenyUserNamespaces runs the manager, and so every unit it starts,
	// under a seccomp filter that refuses to create user namespaces
	// (units/sdtest/denyuserns): the host of Ubuntu 24.04's
	// kernel.apparmor_restrict_unprivileged_userns=1, where a user
	// manager cannot apply PrivateUsers=.
	DenyUserNamespaces bool
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Manager {
	t.Helper()
	so := sandbox.Options{Name: sandboxName}
	if o.DenyUserNamespaces {
		so.Wrap = []string{filepath.Join(filepath.Dir(LegionBinary(t)), denyName)}
	}
	sb, err := sandbox.Start(t.Context(), so)
	var missing *sandbox.MissingError
	if errors.As(err, &missing) {
		Require(t, missing.What, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{
		Dir:        sb.Dir,
		RuntimeDir: sb.RuntimeDir,
		BusAddress: sb.BusAddress,
		Home:       sb.Home,
		Env:        sb.Env,
		sb:         sb,
	}
	t.Cleanup(func() { m.close(t) })
	for _, kv := range sb.Vars() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return m
}

// Systemctl runs `systemctl --user --no-pager ARGS...` against this manager
// and returns its stdout. The error quotes systemctl's stderr.
func (m *Manager) Systemctl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	return m.sb.Systemctl(ctx, args...)
}

// Log returns what the manager has logged so far at level info (unit
// starts, exits, failures) and what its units printed, after anything the
// launcher printed. There is no journal in the sandbox.
func (m *Manager) Log() string { return m.sb.Log() }

// PID is the manager's process ID: see sandbox.Sandbox.PID for its mount
// namespace.
func (m *Manager) PID() int { return m.sb.PID() }

// close stops the manager and removes everything Start made. It runs from
// t.Cleanup (t.Context is already cancelled then, so it has its own
// timeout), or earlier from this package's tests.
func (m *Manager) close(t testing.TB) {
	m.closeOnce.Do(func() {
		if t.Failed() {
			t.Logf("private systemd user manager in %s, log (last lines):\n%s", m.Dir, logTail(m.sb.Log(), 100))
		}
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := m.sb.Stop(ctx); err != nil {
			t.Errorf("clean up: %v", err) // the error quotes the log
		}
	})
}

func logTail(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
