package workerunit

// Integration tests under a real, private systemd user manager
// (units/sdtest): the worker runs as a transient Type=notify unit built by
// Transient, the agent is the scripted agent (`legion scripted-agent`)
// writing Claude-Code-format session files, and systemd does the
// restarting. They skip without root or systemd (and fail with CI=true).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
)

// Short thresholds: the watchdog and staleness in seconds, not minutes.
const (
	sdStaleAfter = 1500 * time.Millisecond
	sdWatchdog   = 2 * time.Second
	sdCooldown   = 500 * time.Millisecond
)

type sdSession struct {
	t    *testing.T
	sd   *sdtest.Manager
	mgr  *units.Manager
	spec *proto.Spec
	ctx  context.Context
}

// startUnit starts a worker unit whose agent runs script, and waits for
// the start job (READY=1).
func startUnit(t *testing.T, script string, burst uint32) *sdSession {
	t.Helper()
	return startUnitWith(t, burst, func(s *proto.Spec) { s.Env = append(s.Env, "LEGION_SCRIPT="+script) })
}

// startUnitWith starts a worker unit of the scripted agent's spec after
// edit, and waits for the start job (READY=1).
func startUnitWith(t *testing.T, burst uint32, edit func(*proto.Spec)) *sdSession {
	t.Helper()
	sd := sdtest.Start(t)
	bin := sdtest.LegionBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	mgr, err := units.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to the private manager: %v", err)
	}
	t.Cleanup(func() { mgr.Close() })

	id := uuid.NewString()
	cwd := filepath.Join(sd.Home, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	tok, _ := proto.NewToken()
	spec := &proto.Spec{
		Version: proto.SpecVersion, SessionID: id, Name: "it-" + id[:8], Team: "itteam", TeamShort: "0123abcd",
		Issue: "ENG-7", Mode: "implement", Role: "worker", Cwd: cwd,
		Env:          []string{"HOME=" + sd.Home},
		ArgvNew:      []string{bin, "scripted-agent", "--session-id", id, "go"},
		ArgvResume:   []string{bin, "scripted-agent", "--resume", id, "go on"},
		SessionFile:  claudecode.SessionFile(sd.Home, cwd, uuid.MustParse(id)),
		StaleAfter:   proto.Duration(sdStaleAfter),
		StartupGrace: 0,
		Token:        tok, DaemonInstanceID: "it-daemon",
		Paths: proto.Paths{
			RuntimeDir: filepath.Join(sd.RuntimeDir, "legion"),
			StateDir:   filepath.Join(sd.Home, ".local", "state", "legion"),
		},
		Unit: "legion-0123abcd-ENG\\x2d7-implement.service",
	}
	edit(spec)
	specPath := filepath.Join(sd.Home, "spec-"+id+".json")
	if err := proto.WriteSpec(specPath, spec); err != nil {
		t.Fatal(err)
	}
	u, err := Transient(spec, Policy{
		Binary: sdtest.WorkerBinary(t), SpecPath: specPath, Cooldown: sdCooldown, Watchdog: sdWatchdog,
		StartLimitBurst: burst, StartLimitInterval: 5 * time.Minute, StopTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.StartTransient(ctx, u); err != nil {
		t.Fatalf("start %s: %v\nmanager log:\n%s", u.Name, err, sd.Log())
	}
	s := &sdSession{t: t, sd: sd, mgr: mgr, spec: spec, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("transcript:\n%s", s.transcript())
		}
		mgr.Stop(context.Background(), spec.Unit)
	})
	return s
}

func (s *sdSession) state() units.State {
	s.t.Helper()
	st, err := s.mgr.State(s.ctx, s.spec.Unit)
	if err != nil {
		s.t.Fatalf("state of %s: %v", s.spec.Unit, err)
	}
	return st
}

func (s *sdSession) registry() *proto.Registry {
	r, err := proto.ReadRegistry(s.spec.RegistryPath())
	if err != nil {
		return &proto.Registry{}
	}
	return r
}

func (s *sdSession) transcript() string {
	b, _ := os.ReadFile(s.spec.TranscriptPath())
	return string(b)
}

// waitFor waits until cond holds, with a deadline long enough for
// restarts; a failure shows the unit, the registry and the manager's log.
func (s *sdSession) waitFor(what string, cond func() bool) {
	s.t.Helper()
	err := waitfor.Until(90*time.Second, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("still false")
	})
	if err != nil {
		s.t.Fatalf("%v\nunit: %v\nregistry: %+v\nmanager log:\n%s", err, s.state(), s.registry(), tail(s.sd.Log(), 40))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dial connects to the current worker and says hello.
func (s *sdSession) dial() *proto.Client {
	s.t.Helper()
	c, err := proto.Dial(s.ctx, s.spec.SocketPath())
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	if _, err := c.Hello(s.ctx, s.spec.Token, s.spec.DaemonInstanceID); err != nil {
		s.t.Fatal(err)
	}
	return c
}

func TestSystemdStaleSessionRestartedWithResume(t *testing.T) {
	s := startUnit(t, `
if-new say first run
if-new work 600ms
if-new hang
if-resumed say resumed
if-resumed work 5m
`, 5)
	if st := s.state(); !strings.Contains(st.StatusText, "implement ENG-7") {
		t.Errorf("StatusText = %q; want phase and issue", st.StatusText)
	}
	// The worker writes its registry before it sends READY=1: the unit
	// may still be activating when the registry says run 2 runs.
	s.waitFor("a restart into run 2 with the resume argv, the unit active", func() bool {
		r := s.registry()
		return r.Run == 2 && r.State == proto.StateRunning && r.ArgvKind == proto.ArgvResume &&
			s.state().ActiveState != "activating"
	})
	if st := s.state(); st.NRestarts != 1 || st.ActiveState != "active" {
		t.Errorf("unit = %v; want active after 1 restart", st)
	}
	r := s.registry()
	if r.LastExit == nil || !strings.HasPrefix(r.LastExit.Reason, "watchdog: stale for ") || r.LastExit.Run != 1 {
		t.Errorf("registry last exit = %+v; want run 1 ended by the watchdog", r.LastExit)
	}
	tr := s.transcript()
	for _, want := range []string{
		"run 1 start (new)", "legion-scripted: step", "run 1 watchdog: stale for ",
		"run 1 exit: ", "; reason: watchdog: stale for ", "run 2 start (resume)",
	} {
		if !strings.Contains(tr, want) {
			t.Errorf("transcript lacks %q", want)
		}
	}
	// The resumed agent keeps its file fresh: no further restart while it
	// works (checked over several stale periods of activity).
	c := s.dial()
	s.waitFor("resumed agent fresh over several periods", func() bool {
		h, err := c.Health(s.ctx)
		in, ierr := c.Info(s.ctx)
		return err == nil && ierr == nil && h.Watchdog == proto.WatchFresh && time.Since(in.StartedAt) > 3*sdStaleAfter
	})
	if st := s.state(); st.NRestarts != 1 {
		t.Errorf("NRestarts = %d; want still 1 while the resumed agent is fresh", st.NRestarts)
	}
}

func TestSystemdFreshSessionNeverRestarted(t *testing.T) {
	s := startUnit(t, `
work 5s
exit 0
`, 5)
	s.waitFor("the agent's normal end", func() bool {
		r := s.registry()
		return r.State == proto.StateExited
	})
	r := s.registry()
	if r.Run != 1 || r.LastExit == nil || !r.LastExit.Success() {
		t.Errorf("registry = run %d, last exit %+v; want run 1 ended with code 0", r.Run, r.LastExit)
	}
	s.waitFor("the unit to end", func() bool {
		st := s.state()
		return st.ActiveState == "inactive" || !st.Exists()
	})
	if strings.Contains(s.transcript(), "watchdog") {
		t.Errorf("transcript mentions the watchdog for a fresh agent:\n%s", s.transcript())
	}
}

func TestSystemdWaitingOnHumanNotRestarted(t *testing.T) {
	s := startUnit(t, `
say about to ask
ask Ship it? | yes | no
say got $ANSWER
exit 0
`, 5)
	c := s.dial()
	ev := followOutput(c)
	if _, err := c.Attach(s.ctx, proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s.waitFor("waiting on the question for several stale periods", func() bool {
		h, err := c.Health(s.ctx)
		return err == nil && h.Watchdog == proto.WatchWaiting && h.ActivityAgeMS > 3*sdStaleAfter.Milliseconds()
	})
	st := s.state()
	if st.NRestarts != 0 || s.registry().Run != 1 {
		t.Errorf("unit %v, registry run %d; want no restart while waiting", st, s.registry().Run)
	}
	if !strings.Contains(st.StatusText, "waiting on a human: Ship it?") {
		t.Errorf("StatusText = %q; want the question", st.StatusText)
	}
	ev.waitOutput(t, "Esc to cancel")
	if err := c.Input(s.ctx, []byte("yes\r")); err != nil {
		t.Fatal(err)
	}
	ev.waitOutput(t, "got yes")
	s.waitFor("the agent's end", func() bool { return s.registry().State == proto.StateExited })
	if r := s.registry(); r.Run != 1 || !r.LastExit.Success() {
		t.Errorf("registry = run %d, %+v; want run 1 ended with code 0", r.Run, r.LastExit)
	}
}

func TestSystemdCrashRestarted(t *testing.T) {
	s := startUnit(t, `
if-new say about to crash
if-new crash 3
if-resumed say back
if-resumed work 5m
`, 5)
	s.waitFor("run 2 after the crash", func() bool {
		r := s.registry()
		return r.Run == 2 && r.State == proto.StateRunning
	})
	r := s.registry()
	if r.ArgvKind != proto.ArgvResume || r.LastExit == nil || r.LastExit.Code != 3 || r.LastExit.Reason != "exited" {
		t.Errorf("registry = %+v (last exit %+v); want resumed after code 3", r, r.LastExit)
	}
	if st := s.state(); st.NRestarts != 1 {
		t.Errorf("NRestarts = %d; want 1", st.NRestarts)
	}
	tr := s.transcript()
	if !strings.Contains(tr, "run 1 exit: code 3; reason: exited") || !strings.Contains(tr, "run 2 start (resume)") {
		t.Errorf("transcript lacks run 1's exit or run 2's start:\n%s", tr)
	}
}

func TestSystemdRepeatedFailureEndsFailed(t *testing.T) {
	s := startUnit(t, `
say failing
crash 3
`, 2)
	s.waitFor("the unit to give up", func() bool { return s.state().ActiveState == "failed" })
	st := s.state()
	if !st.Failed() || st.NRestarts < 1 {
		t.Errorf("unit = %v; want failed after restarts", st)
	}
	r := s.registry()
	if r.Run != 2 || r.LastExit == nil || r.LastExit.Code != 3 {
		t.Errorf("registry = run %d, %+v; want run 2 ended with code 3 (burst 2)", r.Run, r.LastExit)
	}
	if n := strings.Count(s.transcript(), "exit: code 3; reason: exited"); n != 2 {
		t.Errorf("transcript has %d exit lines; want 2 (one per run)", n)
	}
}

// output collects a client's output events.
type output struct {
	mu  sync.Mutex
	buf strings.Builder
}

func followOutput(c *proto.Client) *output {
	o := &output{}
	go func() {
		for ev := range c.Events() {
			if ev.Kind == proto.EventKindOutput {
				o.mu.Lock()
				o.buf.Write(ev.Data)
				o.mu.Unlock()
			}
		}
	}()
	return o
}

// waitOutput waits until the output holds want.
func (o *output) waitOutput(t *testing.T, want string) {
	t.Helper()
	waitfor.Check(t, 20*time.Second, fmt.Sprintf("output holding %q", want), func() error {
		o.mu.Lock()
		got := o.buf.String()
		o.mu.Unlock()
		if !strings.Contains(got, want) {
			return fmt.Errorf("output is:\n%s", got)
		}
		return nil
	})
}

// TestSystemdEndCompletesWithoutRestart: an agent of kind claude reports
// its state through the real `legion hook`; end stops it (here one that
// ignores SIGINT, so it dies of the SIGHUP after it: not a success of its
// own) and the worker exits 0: the unit ends as a success, systemd does
// not restart it, and the registry says completed.
func TestSystemdEndCompletesWithoutRestart(t *testing.T) {
	bin := sdtest.LegionBinary(t)
	s := startUnitWith(t, 5, func(spec *proto.Spec) {
		spec.Agent = proto.AgentClaude
		spec.ArgvNew, spec.ArgvResume, spec.SessionFile = []string{"/bin/sh", "-c", `
trap '' INT
printf '%s' '{"hook_event_name":"SessionStart","source":"startup"}' | "$LEGION_BIN" hook
printf '%s' '{"hook_event_name":"Stop","last_assistant_message":"Labelled.","background_tasks":[]}' | "$LEGION_BIN" hook
echo idle
while :; do sleep 1; done`}, nil, ""
		spec.Env = append(spec.Env, "LEGION_BIN="+bin)
	})
	c := s.dial()
	s.waitFor("the agent idle at its prompt, from its hooks", func() bool {
		in, err := c.Info(s.ctx)
		return err == nil && in.Agent != nil && in.Agent.State == api.AgentIdle && in.Agent.LastMessage == "Labelled."
	})
	s.waitFor("STATUS= to say idle", func() bool {
		return strings.HasSuffix(s.state().StatusText, ": idle at its prompt")
	})
	if err := c.End(s.ctx, "worker-done and its turn ended"); err != nil {
		t.Fatalf("end: %v", err)
	}
	s.waitFor("the unit to end and be unloaded (a failure would leave it loaded, restarting or failed)", func() bool {
		return !s.state().Exists()
	})
	r := s.registry()
	if r.State != proto.StateCompleted || r.Run != 1 || r.LastExit == nil ||
		r.LastExit.Reason != "completed: worker-done and its turn ended" || r.LastExit.Signal != "SIGHUP" {
		t.Errorf("registry = %+v, last exit %+v; want run 1 completed, the agent hung up on", r, r.LastExit)
	}
	if log := s.sd.Log(); strings.Contains(log, "Scheduled restart job") {
		t.Errorf("the manager scheduled a restart:\n%s", tail(log, 40))
	}
}
