package units_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestMain lets the test binary double as the program the test units run:
// with LEGION_TEST_HELPER set it runs that helper instead of the tests.
// (This is the units package's only TestMain.)
func TestMain(m *testing.M) {
	switch mode := os.Getenv("LEGION_TEST_HELPER"); mode {
	case "":
		os.Exit(m.Run())
	case "pinger":
		os.Exit(pinger())
	case "sleep":
		// Ready at once, then wait to be stopped or killed.
		if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
			fmt.Fprintln(os.Stderr, "sleep helper:", err)
			os.Exit(1)
		}
		select {}
	default:
		fmt.Fprintf(os.Stderr, "unknown LEGION_TEST_HELPER %q\n", mode)
		os.Exit(2)
	}
}

// pinger sends READY=1, then WATCHDOG=1 at a quarter of WatchdogSec until
// the file $LEGION_TEST_STOPFILE exists; then it stops pinging and waits
// for the watchdog.
func pinger() int {
	stopFile := os.Getenv("LEGION_TEST_STOPFILE")
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval == 0 || stopFile == "" {
		fmt.Fprintf(os.Stderr, "pinger: needs WatchdogSec= and LEGION_TEST_STOPFILE (watchdog %v, %v)\n", interval, err)
		return 1
	}
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady+"\nSTATUS=pinging"); err != nil {
		fmt.Fprintln(os.Stderr, "pinger:", err)
		return 1
	}
	for {
		if _, err := os.Stat(stopFile); err == nil {
			if _, err := daemon.SdNotify(false, "STATUS=stopped pinging"); err != nil {
				fmt.Fprintln(os.Stderr, "pinger:", err)
			}
			select {} // the watchdog ends this
		}
		if _, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog); err != nil {
			fmt.Fprintln(os.Stderr, "pinger:", err)
			return 1
		}
		time.Sleep(interval / 4)
	}
}

// setup starts a private user manager and connects to it.
func setup(t *testing.T) (*sdtest.Manager, *units.Manager, context.Context) {
	t.Helper()
	sd := sdtest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	m, err := units.Connect(ctx)
	if err != nil {
		t.Fatalf("Connect to private manager: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return sd, m, ctx
}

// helperUnit is a transient service running this test binary as helper mode.
func helperUnit(t *testing.T, name, mode string, env []string, opts ...units.Option) units.Unit {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := []units.Option{
		units.String("Unit", "Description", "legion test helper "+mode),
		units.Exec("ExecStart", []string{exe}),
		units.Environment(append([]string{"LEGION_TEST_HELPER=" + mode}, env...)),
	}
	return units.Unit{Name: name, Options: append(base, opts...)}
}

// waitState polls the unit's state until cond holds, with a generous deadline.
func waitState(t *testing.T, ctx context.Context, m *units.Manager, name, what string, cond func(units.State) bool) units.State {
	t.Helper()
	var st units.State
	waitfor.Check(t, 60*time.Second, what, func() error {
		var err error
		if st, err = m.State(ctx, name); err != nil {
			t.Fatalf("State(%s): %v", name, err)
		}
		if !cond(st) {
			return fmt.Errorf("last state %v", st)
		}
		return nil
	})
	return st
}

// nextState reads the unit's State until cond holds, again after each batch
// of changes (Changes, subscribed before the state could change) that names
// it. Like any reader of changes it sees the newest state, not every step.
func nextState(t *testing.T, ctx context.Context, m *units.Manager, changes <-chan []string, name, what string, cond func(units.State) bool) units.State {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		st, err := m.State(ctx, name)
		if err != nil {
			t.Fatalf("State(%s) while waiting for %s: %v", name, what, err)
		}
		if cond(st) {
			return st
		}
		// Read again once the unit has changed: a batch that names it.
		for named := false; !named; {
			select {
			case batch, ok := <-changes:
				if !ok {
					t.Fatalf("changes channel closed while waiting for %s; last state %v", what, st)
				}
				named = slices.Contains(batch, name)
			case <-timeout:
				t.Fatalf("timed out waiting for %s; last state %v", what, st)
			}
		}
	}
}

// TestWatchdogRestartThenGiveUp: a Type=notify service with a watchdog is
// restarted when its process stops pinging, and after StartLimitBurst
// starts it ends failed with Result=watchdog.
func TestWatchdogRestartThenGiveUp(t *testing.T) {
	_, m, ctx := setup(t)
	const name = "legion-test-1-pinger.service"
	stopFile := filepath.Join(t.TempDir(), "stop-pinging")
	u := helperUnit(t, name, "pinger", []string{"LEGION_TEST_STOPFILE=" + stopFile},
		units.String("Service", "Type", "notify"),
		units.Duration("Service", "WatchdogSec", "WatchdogUSec", 2*time.Second),
		units.String("Service", "Restart", "on-failure"),
		units.Duration("Service", "RestartSec", "RestartUSec", 100*time.Millisecond),
		units.Uint32("Unit", "StartLimitBurst", 3),
		units.Duration("Unit", "StartLimitIntervalSec", "StartLimitIntervalUSec", 10*time.Minute),
	)

	changes, err := m.Changes(ctx, name)
	if err != nil {
		t.Fatalf("Changes(%s): %v", name, err)
	}
	if st, err := m.State(ctx, name); err != nil || st.Exists() {
		t.Fatalf("before start, State(%s) = %v, %v; want a unit that does not exist", name, st, err)
	}
	if err := m.StartTransient(ctx, u); err != nil {
		t.Fatalf("StartTransient(%s): %v", name, err)
	}
	st, err := m.State(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// The start job is done only after READY=1, which the pinger sends
	// together with its status.
	if st.ActiveState != "active" || st.StatusText != "pinging" || st.MainPID == 0 || st.NRestarts != 0 {
		t.Fatalf("after StartTransient, State(%s) = %v; want active, pinging, a main PID, no restarts", name, st)
	}

	if err := os.WriteFile(stopFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	restarted := nextState(t, ctx, m, changes, name, "a restart", func(s units.State) bool { return s.NRestarts > 0 })
	if restarted.Failed() {
		t.Fatalf("first state with restarts is %v; want a unit not yet given up", restarted)
	}
	nextState(t, ctx, m, changes, name, "the unit to give up", units.State.Failed)

	final, err := m.State(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// NRestarts counts restart attempts: two that ran and the third, which
	// the start limit (three starts) refused. Result stays what ended the
	// last run; its main process, a Go program, exited 2 on the watchdog's
	// SIGABRT (the Go runtime's dump-and-exit).
	want := units.State{Name: name, LoadState: "loaded", ActiveState: "failed", SubState: "failed",
		Result: "watchdog", NRestarts: 3, StatusText: "stopped pinging", ExecMainCode: units.CLDExited, ExecMainStatus: 2}
	if diff := cmp.Diff(want, final); diff != "" {
		t.Errorf("final State(%s) mismatch (-want +got):\n%s", name, diff)
	}
}

// TestGarbageCollectedUnitIsNotLive: a unit with
// CollectMode=inactive-or-failed that ended is unloaded, and reading it
// gives a unit that does not exist, not the last live state.
func TestGarbageCollectedUnitIsNotLive(t *testing.T) {
	_, m, ctx := setup(t)
	const name = "legion-test-2-gc.service"
	u := helperUnit(t, name, "sleep", nil,
		units.String("Service", "Type", "notify"),
		units.String("Unit", "CollectMode", "inactive-or-failed"),
	)
	if err := m.StartTransient(ctx, u); err != nil {
		t.Fatalf("StartTransient(%s): %v", name, err)
	}
	live, err := m.State(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !live.Exists() || live.ActiveState != "active" || live.MainPID == 0 {
		t.Fatalf("State(%s) = %v; want a live unit", name, live)
	}
	changes, err := m.Changes(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	nextState(t, ctx, m, changes, name, "the live state", func(s units.State) bool { return s.Exists() })

	if err := m.Kill(ctx, name, syscall.SIGKILL); err != nil {
		t.Fatalf("Kill(%s): %v", name, err)
	}
	gone := nextState(t, ctx, m, changes, name, "the unit to be collected", func(s units.State) bool { return !s.Exists() })
	want := units.State{Name: name, LoadState: "not-found", ActiveState: "inactive", SubState: "dead"}
	if diff := cmp.Diff(want, gone); diff != "" {
		t.Errorf("watched state of collected unit mismatch (-want +got):\n%s", diff)
	}
	got, err := m.State(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("State(%s) of collected unit mismatch (-want +got):\n%s", name, diff)
	}
	if got.Exists() || got.Failed() || got.MainPID != 0 {
		t.Errorf("State(%s) = %v: Exists %v, Failed %v; want neither", name, got, got.Exists(), got.Failed())
	}
	if list, err := m.List(ctx, name); err != nil || len(list) != 0 {
		t.Errorf("List(%s) = %v, %v; want nothing", name, list, err)
	}
}

// TestStartTransientUnitExists: starting a name again after its unit
// failed resets it and works; starting a running name fails with
// ErrUnitExists.
func TestStartTransientUnitExists(t *testing.T) {
	_, m, ctx := setup(t)
	const name = "legion-test-3-false.service"
	u := units.Unit{Name: name, Options: []units.Option{units.Exec("ExecStart", []string{"/bin/false"})}}
	for i := range 2 {
		if err := m.StartTransient(ctx, u); err != nil {
			t.Fatalf("StartTransient(%s) #%d: %v", name, i+1, err)
		}
		st := waitState(t, ctx, m, name, "the unit to fail", units.State.Failed)
		if st.Result != "exit-code" {
			t.Errorf("State(%s) #%d = %v; want result exit-code", name, i+1, st)
		}
	}

	const running = "legion-test-3-sleep.service"
	r := helperUnit(t, running, "sleep", nil, units.String("Service", "Type", "notify"))
	if err := m.StartTransient(ctx, r); err != nil {
		t.Fatalf("StartTransient(%s): %v", running, err)
	}
	err := m.StartTransient(ctx, r)
	if !errors.Is(err, units.ErrUnitExists) || !strings.Contains(fmt.Sprint(err), running) {
		t.Errorf("StartTransient(%s) while running = %v; want ErrUnitExists naming the unit", running, err)
	}
}

func TestStartTransientJobFailed(t *testing.T) {
	_, m, ctx := setup(t)
	const name = "legion-test-4-oneshot.service"
	u := units.Unit{Name: name, Options: []units.Option{
		units.String("Service", "Type", "oneshot"),
		units.Exec("ExecStart", []string{"/bin/false"}),
	}}
	err := m.StartTransient(ctx, u)
	var jerr *units.JobError
	if !errors.As(err, &jerr) {
		t.Fatalf("StartTransient(%s) = %v; want a *JobError", name, err)
	}
	if diff := cmp.Diff(&units.JobError{Op: "start", Unit: name, Result: "failed"}, jerr); diff != "" {
		t.Errorf("job error mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("error %q does not name the unit", err)
	}
}

// TestListStopKill covers listing by pattern, stopping and killing.
func TestListStopKill(t *testing.T) {
	_, m, ctx := setup(t)
	names := []string{"legion-ab12-7-work.service", "legion-ab12-8-review.service", "other.service"}
	for _, n := range names {
		if err := m.StartTransient(ctx, helperUnit(t, n, "sleep", nil, units.String("Service", "Type", "notify"))); err != nil {
			t.Fatalf("StartTransient(%s): %v", n, err)
		}
	}
	list, err := m.List(ctx, "legion-*")
	if err != nil {
		t.Fatal(err)
	}
	want := []units.State{
		{Name: names[0], LoadState: "loaded", ActiveState: "active", SubState: "running"},
		{Name: names[1], LoadState: "loaded", ActiveState: "active", SubState: "running"},
	}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("List(legion-*) mismatch (-want +got):\n%s", diff)
	}

	if err := m.Stop(ctx, names[0]); err != nil {
		t.Fatalf("Stop(%s): %v", names[0], err)
	}
	waitState(t, ctx, m, names[0], "the stopped unit to go", func(s units.State) bool { return !s.Exists() })
	if err := m.Stop(ctx, names[0]); err != nil {
		t.Errorf("Stop(%s) of a unit no longer loaded = %v; want nil", names[0], err)
	}

	if err := m.Kill(ctx, names[1], syscall.SIGTERM); err != nil {
		t.Fatalf("Kill(%s): %v", names[1], err)
	}
	waitState(t, ctx, m, names[1], "the killed unit to end", func(s units.State) bool { return s.ActiveState != "active" })

	for _, tt := range []struct {
		op string
		fn func() error
	}{
		{"Kill", func() error { return m.Kill(ctx, "legion-missing.service", syscall.SIGTERM) }},
		{"ResetFailed", func() error { return m.ResetFailed(ctx, "legion-missing.service") }},
	} {
		if err := tt.fn(); !errors.Is(err, units.ErrNoSuchUnit) {
			t.Errorf("%s(legion-missing.service) = %v; want ErrNoSuchUnit", tt.op, err)
		}
	}
}

func TestEnableDisableReload(t *testing.T) {
	sd, m, ctx := setup(t)
	const name = "legion-test-enable.service"
	dir := filepath.Join(sd.Home, ".config", "systemd", "user")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	text := "[Service]\nExecStart=/bin/true\n\n[Install]\nWantedBy=default.target\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(ctx); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	link := filepath.Join(dir, "default.target.wants", name)

	if err := m.Enable(ctx, name); err != nil {
		t.Fatalf("Enable(%s): %v", name, err)
	}
	if dest, err := os.Readlink(link); err != nil || dest != filepath.Join(dir, name) {
		t.Errorf("after Enable, Readlink(%s) = %q, %v; want %s", link, dest, err, filepath.Join(dir, name))
	}
	if err := m.Reload(ctx); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if st, err := m.State(ctx, name); err != nil || st.LoadState != "loaded" {
		t.Errorf("after Enable and Reload, State(%s) = %v, %v; want loaded (wanted by default.target)", name, st, err)
	}
	// Start works from the unit file; /bin/true ends at once.
	if err := m.Start(ctx, name); err != nil {
		t.Errorf("Start(%s): %v", name, err)
	}
	if err := m.Start(ctx, "legion-no-such-file.service"); !errors.Is(err, units.ErrNoSuchUnit) {
		t.Errorf("Start(legion-no-such-file.service) = %v; want ErrNoSuchUnit", err)
	}

	if err := m.Disable(ctx, name); err != nil {
		t.Fatalf("Disable(%s): %v", name, err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Disable, Lstat(%s) = %v; want not exist", link, err)
	}
}

// TestReconnect: after daemon-reexec drops the connection, the next call
// reconnects and succeeds.
func TestReconnect(t *testing.T) {
	sd, m, ctx := setup(t)
	if _, err := m.State(ctx, "default.target"); err != nil {
		t.Fatal(err)
	}
	if _, err := sd.Systemctl(t, "daemon-reexec"); err != nil {
		t.Fatal(err)
	}
	st, err := m.State(ctx, "default.target")
	if err != nil || st.ActiveState != "active" {
		t.Errorf("State(default.target) after daemon-reexec = %v, %v; want active", st, err)
	}
	const name = "legion-test-after-reexec.service"
	if err := m.StartTransient(ctx, helperUnit(t, name, "sleep", nil, units.String("Service", "Type", "notify"))); err != nil {
		t.Errorf("StartTransient after daemon-reexec: %v", err)
	}
}

// TestChangesEndsWithContext: cancelling the context closes the channel.
func TestChangesEndsWithContext(t *testing.T) {
	_, m, ctx := setup(t)
	wctx, cancel := context.WithCancel(ctx)
	ch, err := m.Changes(wctx, "default.target")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := m.State(ctx, "default.target"); err != nil || st.ActiveState != "active" {
		t.Errorf("State(default.target) = %v, %v; want active", st, err)
	}
	cancel()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("watch channel still open 30s after its context ended")
		}
	}
}

// TestOneConnection: the manager client and its Changes share one
// connection: on the private socket systemd sends every signal to every
// connection, and each one decodes them all.
func TestOneConnection(t *testing.T) {
	sdtest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	before := socketFDs(t)
	m, err := units.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Changes(ctx, "legion-"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.State(ctx, "default.target"); err != nil {
		t.Fatal(err)
	}
	if got := socketFDs(t) - before; got != 1 {
		t.Errorf("Connect and Changes opened %d sockets; want 1", got)
	}
}

// socketFDs counts this process's open sockets.
func socketFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// TestChangesAfterReexec: daemon-reexec drops the connection, which closes
// the channel; Changes again reconnects and follows units as before.
func TestChangesAfterReexec(t *testing.T) {
	sd, m, ctx := setup(t)
	const name = "legion-test-changes-reexec.service"
	ch, err := m.Changes(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sd.Systemctl(t, "daemon-reexec"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(60 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-ch:
		case <-timeout:
			t.Fatal("the Changes channel is still open 60s after daemon-reexec dropped the connection")
		}
	}
	if ch, err = m.Changes(ctx, name); err != nil {
		t.Fatalf("Changes after daemon-reexec: %v", err)
	}
	startStopFollowed(t, ctx, m, ch, name)
}

// TestChangesSessionBus: Changes (and the rest) also work through the
// session bus, where signals need a subscription.
func TestChangesSessionBus(t *testing.T) {
	sd := sdtest.Start(t)
	// Hide the private socket: only the bus is left.
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m, err := units.Connect(ctx)
	if err != nil {
		t.Fatalf("Connect through the bus %s: %v", sd.BusAddress, err)
	}
	defer m.Close()
	const name = "legion-test-bus.service"
	ch, err := m.Changes(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	startStopFollowed(t, ctx, m, ch, name)
}

// startStopFollowed starts name (a notify unit running the sleep helper)
// and stops it, and sees each change through changes, from Changes.
func startStopFollowed(t *testing.T, ctx context.Context, m *units.Manager, changes <-chan []string, name string) {
	t.Helper()
	if err := m.StartTransient(ctx, helperUnit(t, name, "sleep", nil, units.String("Service", "Type", "notify"))); err != nil {
		t.Fatalf("StartTransient(%s): %v", name, err)
	}
	nextState(t, ctx, m, changes, name, "the unit to run", func(s units.State) bool { return s.ActiveState == "active" })
	if err := m.Stop(ctx, name); err != nil {
		t.Fatal(err)
	}
	nextState(t, ctx, m, changes, name, "the unit to go", func(s units.State) bool { return !s.Exists() })
}

func TestConnectNoManager(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(dir, "no-bus"))
	m, err := units.Connect(t.Context())
	if err == nil {
		m.Close()
		t.Fatal("Connect with an empty runtime dir and no bus succeeded; want ErrNoManager")
	}
	if !errors.Is(err, units.ErrNoManager) {
		t.Fatalf("Connect = %v; want ErrNoManager", err)
	}
	var nerr *units.NoManagerError
	if !errors.As(err, &nerr) || len(nerr.Attempts) != 2 {
		t.Fatalf("Connect = %#v; want a *NoManagerError with 2 attempts", err)
	}
	for _, want := range []string{filepath.Join(dir, "systemd", "private"), filepath.Join(dir, "no-bus"), "loginctl enable-linger", "XDG_RUNTIME_DIR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Connect error %q does not mention %q", err, want)
		}
	}
}

func TestStateMethods(t *testing.T) {
	tests := []struct {
		st             units.State
		exists, failed bool
		str            string
	}{
		{units.State{Name: "a.service", LoadState: "not-found", ActiveState: "inactive", SubState: "dead"}, false, false,
			"a.service: not-found inactive/dead"},
		{units.State{Name: "b.service", LoadState: "loaded", ActiveState: "failed", SubState: "failed", Result: "watchdog", NRestarts: 2}, true, true,
			"b.service: loaded failed/failed result=watchdog restarts=2"},
		{units.State{Name: "c.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: 42, StatusText: "ok"}, true, false,
			`c.service: loaded active/running pid=42 status="ok"`},
		{units.State{}, false, false, ":  /"},
	}
	for _, tt := range tests {
		if got := tt.st.Exists(); got != tt.exists {
			t.Errorf("%v.Exists() = %v; want %v", tt.st, got, tt.exists)
		}
		if got := tt.st.Failed(); got != tt.failed {
			t.Errorf("%v.Failed() = %v; want %v", tt.st, got, tt.failed)
		}
		if got := tt.st.String(); got != tt.str {
			t.Errorf("String() = %q; want %q", got, tt.str)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	nm := &units.NoManagerError{Attempts: []units.Attempt{
		{Via: "private socket /r/systemd/private", Err: errors.New("dial: no such file")},
		{Via: "session bus unix:path=/r/bus", Err: errors.New("dial: refused")},
	}}
	tests := []struct {
		err  error
		want string
	}{
		{nm, "no systemd user manager reachable (tried private socket /r/systemd/private: dial: no such file; " +
			"session bus unix:path=/r/bus: dial: refused): log in through a systemd session, or run `loginctl enable-linger $USER`, " +
			"or set XDG_RUNTIME_DIR (and DBUS_SESSION_BUS_ADDRESS) to those of a running user manager"},
		{&units.JobError{Op: "start", Unit: "x.service", Result: "failed"},
			"start unit x.service: job result \"failed\", not \"done\" (see `systemctl --user status x.service`)"},
	}
	for i, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("#%d Error() = %q; want %q", i, got, tt.want)
		}
	}
	if !errors.Is(nm, units.ErrNoManager) {
		t.Errorf("errors.Is(%v, ErrNoManager) = false; want true", nm)
	}
}
