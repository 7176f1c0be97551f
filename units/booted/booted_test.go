package booted_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/booted"
	"github.com/legion-dev/legion/units/booted/bootedtest"
)

// waitFor is the generous deadline of every condition the tests poll.
const waitFor = 90 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestLoginLingerReboot: one system, booted once and rebooted once: a
// user's command runs in a real login session; the user manager stops at
// logout without linger and runs without a session with it; a reboot keeps
// /home, starts the lingering user's manager and forgets /run.
func TestLoginLingerReboot(t *testing.T) {
	t.Parallel()
	s := bootedtest.Boot(t)
	ctx := testCtx(t)
	if err := s.AddUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	uid := strings.TrimSpace(run(t, s, "id", "-u", "alice"))

	out, err := s.Login(ctx, "alice", "sh", "-c", `echo "$(id -un) $XDG_RUNTIME_DIR $PWD"; for p in Class Type Service Remote; do loginctl show-session "$XDG_SESSION_ID" -p $p --value; done; systemctl --user is-system-running --wait`)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("alice /run/user/%s /home/alice\nuser\ntty\nlogin\nno\nrunning\n", uid)
	if out != want {
		t.Errorf("in a login session:\n%s\nwant:\n%s", out, want)
	}
	if _, err := s.Login(ctx, "alice", "sh", "-c", "echo to stderr >&2; exit 3"); err == nil || !strings.Contains(err.Error(), "to stderr") {
		t.Errorf("Login of a command that fails: err = %v; want an error quoting its stderr", err)
	}

	// Without linger the user's manager stops after the logout (logind's
	// UserStopDelaySec, 10 s by default).
	userUnit := "user@" + uid + ".service"
	waitfor.True(t, waitFor, userUnit+" to stop after the logout", func() bool {
		out, _ := s.Run(ctx, "systemctl", "is-active", userUnit)
		return strings.TrimSpace(out) == "inactive"
	})

	if err := s.SetLinger(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, waitFor, userUnit+" to run with linger and no session", func() bool {
		out, _ := s.Run(ctx, "systemctl", "is-active", userUnit)
		return strings.TrimSpace(out) == "active"
	})
	if _, err := s.Login(ctx, "alice", "sh", "-c", "echo kept > ~/marker"); err != nil {
		t.Fatal(err)
	}
	run(t, s, "touch", "/run/volatile-marker")
	host := s.Path("/home/alice/marker")
	if b, err := os.ReadFile(host); err != nil || string(b) != "kept\n" {
		t.Errorf("the container's file through Path: %q, %v; want %q", b, err, "kept\n")
	}

	firstInit := s.InitPID()
	start := time.Now()
	if err := s.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("rebooted in %v", time.Since(start).Round(time.Millisecond))
	if s.InitPID() == firstInit || s.Boots() != 2 {
		t.Errorf("after Reboot: init PID %d (was %d), boots %d; want a new PID 1 and 2 boots", s.InitPID(), firstInit, s.Boots())
	}
	if out := run(t, s, "cat", "/home/alice/marker"); out != "kept\n" {
		t.Errorf("after the reboot, /home/alice/marker = %q; want %q", out, "kept\n")
	}
	if _, err := s.Run(ctx, "test", "-e", "/run/volatile-marker"); err == nil {
		t.Errorf("after the reboot, /run/volatile-marker still exists; want /run fresh")
	}
	waitfor.True(t, waitFor, userUnit+" to start at boot (linger)", func() bool {
		out, _ := s.Run(ctx, "systemctl", "is-active", userUnit)
		return strings.TrimSpace(out) == "active"
	})
}

// TestNothingLeftBehind: Stop leaves no process, mount, cgroup or
// directory, a user's lingering manager and a running login session
// included, and no tmpfs or overlay mount reaches the host's namespace.
func TestNothingLeftBehind(t *testing.T) {
	t.Parallel()
	bootedtest.Require(t)
	before := mounts(t)
	ctx := testCtx(t)
	s, err := booted.Boot(ctx, booted.Options{Name: "legion-bt-left"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLinger(ctx, "bob", true); err != nil {
		t.Fatal(err)
	}
	// A session that is still logged in when the system stops.
	sessionCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	loggedIn := make(chan error, 1)
	go func() { _, err := s.Login(sessionCtx, "bob", "sleep", "infinity"); loggedIn <- err }()
	waitfor.True(t, waitFor, "bob's login session", func() bool {
		out, _ := s.Run(ctx, "loginctl", "list-sessions", "--no-legend")
		return strings.Contains(out, "bob")
	})
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	<-loggedIn // ended with the system
	if left := bootedtest.Leftovers(s); len(left) > 0 {
		t.Errorf("after Stop, left behind:\n%s", strings.Join(left, "\n"))
	}
	// Leftovers looks for mounts naming the system; this finds the
	// others it made (the tmpfs on /run) had they reached the host.
	for _, m := range mounts(t) {
		if !slices.Contains(before, m) && (strings.Contains(m, " - tmpfs ") || strings.Contains(m, " - overlay ")) {
			t.Errorf("a mount in the host's namespace after Stop that was not there before Boot: %s", m)
		}
	}
	if err := s.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v; want nil", err)
	}
}

func mounts(t *testing.T) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func run(t *testing.T, s *booted.System, argv ...string) string {
	t.Helper()
	out, err := s.Run(t.Context(), argv...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
