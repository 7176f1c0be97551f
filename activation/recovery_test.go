package activation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/ptyworker/workerunit"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// worker is a pty-worker unit a test started itself (not through the
// helper), under any daemon instance id.
type worker struct {
	spec *proto.Spec
	unit string
	pid  uint32
}

// startWorker starts `sh -c 'sleep 1000'` as a real worker unit whose
// registry lands in stateDir, owned by daemonID.
func startWorker(ctx context.Context, t *testing.T, mgr *units.Manager, name, daemonID, runtimeDir, stateDir string) worker {
	t.Helper()
	team := config.AdhocTeamID
	unit, err := unitname.WorkerUnit(team.String()[:8], name, api.ModeSpawn)
	if err != nil {
		t.Fatal(err)
	}
	token, err := proto.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	s := &proto.Spec{
		Version: proto.SpecVersion, SessionID: uuid.NewSHA1(team, []byte(name)).String(), Name: name,
		Team: config.AdhocTeam, TeamShort: team.String()[:8], Mode: api.ModeSpawn, Cwd: "/",
		ArgvNew: []string{"/bin/sh", "-c", "sleep 1000"}, Token: token, DaemonInstanceID: daemonID, Unit: unit,
		Paths: proto.Paths{RuntimeDir: runtimeDir, StateDir: stateDir},
	}
	dir := filepath.Join(stateDir, "test-specs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, s.SessionID+".json")
	if err := proto.WriteSpec(specPath, s); err != nil {
		t.Fatal(err)
	}
	u, err := workerunit.Transient(s, workerunit.Policy{
		Binary: sdtest.WorkerBinary(t), SpecPath: specPath, Cooldown: time.Second, Watchdog: time.Minute,
		StartLimitBurst: 5, StartLimitInterval: time.Minute, StopTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.StartTransient(ctx, u); err != nil {
		t.Fatalf("start worker %s: %v", name, err)
	}
	st, err := mgr.State(ctx, unit)
	if err != nil || st.MainPID == 0 {
		t.Fatalf("worker %s state: %+v, %v", name, st, err)
	}
	return worker{spec: s, unit: unit, pid: st.MainPID}
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestRecoveryRules: one helper start meets every kind of registry entry
// and treats each by the rules; live workers it does not adopt are left
// running.
func TestRecoveryRules(t *testing.T) {
	sdtest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rt, st, err := defaultDirs()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := loadDaemonID(filepath.Join(st, DaemonIDFile), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	foreign := uuid.NewString()
	mgr, err := units.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	regDir := filepath.Join(st, registryDir)

	live := startWorker(ctx, t, mgr, "ours-live", ours, rt, st)
	foreignLive := startWorker(ctx, t, mgr, "foreign-live", foreign, rt, st)
	badToken := startWorker(ctx, t, mgr, "ours-badtoken", ours, rt, st)
	unreachable := startWorker(ctx, t, mgr, "ours-unreachable", ours, rt, st)
	editRegistry(t, badToken.spec.RegistryPath(), func(r *proto.Registry) { r.Token = "not-the-token-at-all" })
	editRegistry(t, unreachable.spec.RegistryPath(), func(r *proto.Registry) { r.SocketPath = filepath.Join(rt, "w", "nowhere.sock") })

	// Entries whose worker is gone and whose unit does not exist.
	stale := writeStale(t, st, "stale", ours, deadPID(t))
	foreignStale := writeStale(t, st, "foreign-stale", foreign, deadPID(t))
	transcript := filepath.Join(st, "transcripts", stale.SessionID+".log")
	if err := os.MkdirAll(filepath.Dir(transcript), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(transcript, []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(regDir, uuid.NewString()+".json")
	if err := os.WriteFile(corrupt, []byte("{half a registry"), 0o600); err != nil {
		t.Fatal(err)
	}

	ip := startInProcessOn(t, nil, Options{RecoveryAttempts: 2, RecoveryBackoff: 10 * time.Millisecond})
	c := ip.client(t)
	res, err := c.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := (api.RecoveryCounts{Recovered: 1, Pruned: 2, Quarantined: 4}); res.Recovery != want {
		t.Errorf("recovery counts = %+v; want %+v", res.Recovery, want)
	}
	var names []string
	for _, s := range res.Sessions {
		names = append(names, s.Name+":"+string(s.State))
	}
	if diff := cmp.Diff([]string{"ours-live:running"}, names); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}
	var qnames []string
	for _, q := range res.Quarantined {
		qnames = append(qnames, q.Name)
	}
	slices.Sort(qnames)
	if diff := cmp.Diff([]string{filepath.Base(corrupt), "foreign-live", "ours-badtoken", "ours-unreachable"}, qnames); diff != "" {
		t.Errorf("quarantined (-want +got):\n%s\n%+v", diff, res.Quarantined)
	}

	// Files went where the rules say.
	for _, p := range []struct{ path, dir string }{
		{foreignLive.spec.RegistryPath(), quarantineDir},
		{badToken.spec.RegistryPath(), quarantineDir},
		{unreachable.spec.RegistryPath(), quarantineDir},
		{filepath.Join(regDir, stale.SessionID+".json"), prunedDir},
		{filepath.Join(regDir, foreignStale.SessionID+".json"), prunedDir},
	} {
		moved := filepath.Join(st, p.dir, filepath.Base(p.path))
		if _, err := os.Stat(moved); err != nil {
			t.Errorf("%s: not moved to %s: %v", p.path, p.dir, err)
		}
	}
	if m, _ := filepath.Glob(corrupt + ".corrupt-*"); len(m) != 1 {
		t.Errorf("corrupt entry: renamed copies %v; want one", m)
	}
	if b, err := os.ReadFile(transcript); err != nil || string(b) != "kept\n" {
		t.Errorf("transcript of the pruned session = %q, %v; want it kept", b, err)
	}
	if _, err := os.Stat(live.spec.RegistryPath()); err != nil {
		t.Errorf("adopted entry: %v; want it in place", err)
	}

	// Nothing was killed: every worker still runs as the same process.
	for _, w := range []worker{live, foreignLive, badToken, unreachable} {
		st, err := mgr.State(ctx, w.unit)
		if err != nil || st.ActiveState != "active" || st.MainPID != w.pid {
			t.Errorf("%s after recovery: %+v, %v; want active with MainPID %d", w.spec.Name, st, err, w.pid)
		}
	}

	// A pruned session still answers status, as exited.
	s, err := c.Status(ctx, "stale")
	if err != nil || s.State != api.StateExited {
		t.Errorf("status of the pruned session = %+v, %v; want exited", s, err)
	}
}

func editRegistry(t *testing.T, path string, edit func(*proto.Registry)) {
	t.Helper()
	r, err := proto.ReadRegistry(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(r)
	if err := proto.WriteRegistry(path, r); err != nil {
		t.Fatal(err)
	}
}

// writeStale writes a registry entry of a worker that is gone (dead PID)
// and whose unit does not exist.
func writeStale(t *testing.T, stateDir, name, daemonID string, pid int) *proto.Registry {
	t.Helper()
	id := uuid.NewString()
	unit, err := unitname.WorkerUnit(config.AdhocTeamID.String()[:8], name, api.ModeSpawn)
	if err != nil {
		t.Fatal(err)
	}
	r := &proto.Registry{
		Version: proto.RegistryVersion, SessionID: id, Name: name, Team: config.AdhocTeam, Mode: api.ModeSpawn, Unit: unit,
		DaemonInstanceID: daemonID, Token: "stale-token-0123456789", WorkerPID: pid,
		SocketPath:     filepath.Join(stateDir, "nowhere.sock"),
		TranscriptPath: filepath.Join(stateDir, "transcripts", id+".log"),
		Owner:          proto.Lease{PID: pid, StartTime: 1, Nonce: "x"},
		State:          proto.StateExited, Run: 1, UpdatedAt: time.Now(),
		LastExit: &proto.ExitInfo{Code: 0, Reason: "exited", Time: time.Now(), Run: 1},
	}
	if err := proto.WriteRegistry(filepath.Join(stateDir, registryDir, id+".json"), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestListWhileChecking: a helper that starts with sessions running lists
// them before it has heard from their workers, marked checking, with the
// state their units and registry entries give; every other command
// answers "recovering" until the workers were checked; then the list says
// what the workers say, checking no more.
func TestListWhileChecking(t *testing.T) {
	sdtest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	before := startInProcessOn(t, nil, Options{})
	c := before.client(t)
	pids := map[string]int{}
	for _, n := range []string{"chk-a", "chk-b"} {
		if _, err := c.Spawn(ctx, testLaunch(n, "/bin/sleep", "1000")); err != nil {
			t.Fatalf("Spawn %s: %v", n, err)
		}
		poll(t, ctx, n+" to run", func() (bool, string) {
			s, err := c.Status(ctx, n)
			pids[n] = s.PID
			return err == nil && s.State == api.StateRunning && s.PID != 0, fmt.Sprintf("%+v, %v", s, err)
		})
	}
	before.stop(t)

	entered, release := make(chan struct{}), make(chan struct{})
	after := startInProcessOn(t, nil, Options{BeforeRecovery: func(context.Context) error { return nil }, beforeChecks: func(ctx context.Context) error {
		close(entered)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("recovery never reached its checks")
	}
	c = after.client(t)
	c.RecoverWait = -1 // no retries: see each answer itself
	list, err := c.List(ctx)
	if err != nil {
		t.Fatalf("List while the workers are checked: %v; want the sessions", err)
	}
	if list.Checking != 2 || list.Recovery != (api.RecoveryCounts{Recovered: 2}) {
		t.Errorf("counts while checking: %d checking, %+v; want 2 checking, 2 recovered", list.Checking, list.Recovery)
	}
	if len(list.Sessions) != 2 {
		t.Fatalf("listed %+v while checking; want chk-a and chk-b", list.Sessions)
	}
	for _, s := range list.Sessions {
		if !s.Checking || s.State != api.StateRunning || s.PID != pids[s.Name] {
			t.Errorf("listed %+v while checking; want running with agent PID %d (as its unit and registry entry say), checking", s, pids[s.Name])
		}
	}
	for _, cmd := range []string{api.CmdSessionsStatus, api.CmdSessionsKill, api.CmdSpawn, api.CmdSessionsWatch} {
		err := c.Call(ctx, cmd, api.NameArgs{Name: "chk-a"}, nil)
		if e, ok := errors.AsType[*api.Error](err); !ok || e.Code != api.CodeRecovering || !e.Retryable {
			t.Errorf("%s while checking = %v; want a retryable recovering error", cmd, err)
		}
	}
	close(release)

	c.RecoverWait = 0
	poll(t, ctx, "recovery to check both workers", func() (bool, string) {
		list, err := c.List(ctx)
		if err != nil || list.Checking != 0 || list.Recovery != (api.RecoveryCounts{Recovered: 2}) {
			return false, fmt.Sprintf("%+v, %v", list, err)
		}
		for _, s := range list.Sessions {
			if s.Checking || s.State != api.StateRunning || s.PID != pids[s.Name] {
				return false, fmt.Sprintf("%+v", s)
			}
		}
		return len(list.Sessions) == 2, fmt.Sprintf("%+v", list.Sessions)
	})
	if _, err := c.Status(ctx, "chk-a"); err != nil {
		t.Errorf("Status after recovery: %v", err)
	}
}
