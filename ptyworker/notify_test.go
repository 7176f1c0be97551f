package ptyworker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// notifySocket is a real sd_notify datagram socket set as NOTIFY_SOCKET
// (t.Setenv: tests using it must not be parallel). It records every
// message.
type notifySocket struct {
	mu   sync.Mutex
	msgs []string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(shortTempDir(t), "notify")
	pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", path)
	ns := &notifySocket{}
	done := make(chan struct{})
	// Exits when the socket is closed at cleanup.
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, _, err := pc.ReadFromUnix(buf)
			if err != nil {
				return
			}
			ns.mu.Lock()
			ns.msgs = append(ns.msgs, string(buf[:n]))
			ns.mu.Unlock()
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return ns
}

// count returns how many messages hold line.
func (ns *notifySocket) count(line string) int {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	n := 0
	for _, m := range ns.msgs {
		for _, l := range strings.Split(m, "\n") {
			if l == line {
				n++
			}
		}
	}
	return n
}

// last returns the last value of KEY= sent.
func (ns *notifySocket) last(key string) string {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for i := len(ns.msgs) - 1; i >= 0; i-- {
		for _, l := range strings.Split(ns.msgs[i], "\n") {
			if v, ok := strings.CutPrefix(l, key+"="); ok {
				return v
			}
		}
	}
	return ""
}

// touch keeps a file's mtime fresh until stop is closed.
func touch(t *testing.T, path string, stop <-chan struct{}) {
	t.Helper()
	done := make(chan struct{})
	// Exits when stop is closed.
	go func() {
		defer close(done)
		for {
			now := time.Now()
			os.Chtimes(path, now, now)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { <-done })
}

func TestWatchdogFedWhileFreshTriggeredWhenStale(t *testing.T) {
	ns := listenNotify(t)
	spec := testSpec(t, "sh", "-c", "while :; do sleep 1; done")
	spec.SessionFile = filepath.Join(spec.Cwd, "session.jsonl")
	spec.StaleAfter = proto.Duration(400 * time.Millisecond)
	if err := os.WriteFile(spec.SessionFile, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stopTouching := make(chan struct{})
	touch(t, spec.SessionFile, stopTouching)
	tw := startWorker(t, spec, Options{Tick: 50 * time.Millisecond})

	waitFor(t, "READY=1", func() bool { return ns.count("READY=1") == 1 })
	waitFor(t, "several WATCHDOG=1 while the file is fresh", func() bool { return ns.count("WATCHDOG=1") >= 5 })
	if n := ns.count("WATCHDOG=trigger"); n != 0 {
		t.Fatalf("WATCHDOG=trigger sent %d times while the session file was fresh", n)
	}
	if st := ns.last("STATUS"); !strings.Contains(st, "implement ENG-1: running, last activity") {
		t.Errorf("STATUS=%q; want phase, issue and activity age", st)
	}

	close(stopTouching)
	waitFor(t, "WATCHDOG=trigger once stale", func() bool { return ns.count("WATCHDOG=trigger") == 1 })
	fed := ns.count("WATCHDOG=1")
	if st := ns.last("STATUS"); !strings.Contains(st, "stale, no activity since") {
		t.Errorf("STATUS=%q after the trigger; want it to say stale", st)
	}
	c := tw.dial()
	h, err := c.Health(ctxT(t))
	if err != nil || h.Watchdog != proto.WatchStale {
		t.Errorf("Health() = %+v, %v; want watchdog %q", h, err, proto.WatchStale)
	}
	// No more feeding and no second trigger while stale: check over more
	// ticks (health's activity age keeps growing).
	waitFor(t, "more ticks while stale", func() bool {
		h, err := c.Health(ctxT(t))
		return err == nil && h.ActivityAgeMS > 4*400
	})
	if n := ns.count("WATCHDOG=trigger"); n != 1 {
		t.Errorf("WATCHDOG=trigger sent %d times; want once", n)
	}
	if n := ns.count("WATCHDOG=1"); n != fed {
		t.Errorf("WATCHDOG=1 sent %d more times while stale", n-fed)
	}
	tr := readTranscript(t, spec)
	if !strings.Contains(tr, "run 1 watchdog: stale for ") || !strings.Contains(tr, "WATCHDOG=trigger sent") {
		t.Errorf("transcript lacks the trigger marker:\n%s", tr)
	}

	// systemd answers the trigger by stopping the worker: the exit line
	// carries the reason.
	tw.cancel()
	if err := tw.wait(); err != nil {
		t.Errorf("Run() stopped after a trigger = %v; want nil", err)
	}
	tr = readTranscript(t, spec)
	if !strings.Contains(tr, "run 1 exit: signal SIGHUP; reason: watchdog: stale for ") {
		t.Errorf("transcript's exit line lacks the watchdog reason:\n%s", tr)
	}
	r, err := proto.ReadRegistry(spec.RegistryPath())
	if err != nil || r.LastExit == nil || !strings.HasPrefix(r.LastExit.Reason, "watchdog: stale for ") || r.State != proto.StateStopped {
		t.Errorf("registry = %+v, %v; want stopped with the watchdog reason", r, err)
	}
	waitFor(t, "STOPPING=1", func() bool { return ns.count("STOPPING=1") == 1 })
}

// askLines is a session file whose agent waits on an AskUserQuestion.
func askLines(sessionID string) string {
	return fmt.Sprintf(`{"type":"user","uuid":"u1","sessionId":%[1]q,"message":{"role":"user","content":"start"}}
{"type":"assistant","uuid":"a1","sessionId":%[1]q,"message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"AskUserQuestion","input":{"questions":[{"question":"Deploy to production?","header":"Deploy","options":[{"label":"yes"},{"label":"no"}],"multiSelect":false}]}}]}}
`, sessionID)
}

func TestWatchdogFedWhileWaitingOnHuman(t *testing.T) {
	ns := listenNotify(t)
	spec := testSpec(t, "sh", "-c", "while :; do sleep 1; done")
	spec.SessionFile = filepath.Join(spec.Cwd, spec.SessionID+".jsonl")
	spec.StaleAfter = proto.Duration(300 * time.Millisecond)
	if err := os.WriteFile(spec.SessionFile, []byte(askLines(spec.SessionID)), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(spec.SessionFile, old, old)
	tw := startWorker(t, spec, Options{Tick: 50 * time.Millisecond})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Watch(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "waiting past several stale periods", func() bool {
		h, err := c.Health(ctxT(t))
		return err == nil && h.Watchdog == proto.WatchWaiting && h.ActivityAgeMS > 5*300
	})
	if n := ns.count("WATCHDOG=trigger"); n != 0 {
		t.Errorf("WATCHDOG=trigger sent %d times while the agent waits on a human", n)
	}
	info, err := c.Info(ctxT(t))
	if err != nil || !info.Waiting || !strings.Contains(info.Question, "Deploy to production?") {
		t.Errorf("Info() = %+v, %v; want waiting on the question", info, err)
	}
	if st := ns.last("STATUS"); !strings.Contains(st, "waiting on a human: Deploy to production?") {
		t.Errorf("STATUS=%q; want the question", st)
	}
	waitFor(t, "a state event saying waiting", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, st := range s.states {
			if st.Waiting && strings.Contains(st.Question, "Deploy") {
				return true
			}
		}
		return false
	})

	// The answer arrives; the file then goes stale: the trigger follows.
	answer := fmt.Sprintf(`{"type":"user","uuid":"u2","sessionId":%q,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"yes"}]}}`+"\n", spec.SessionID)
	f, _ := os.OpenFile(spec.SessionFile, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(answer)
	f.Close()
	waitFor(t, "WATCHDOG=trigger after the answer", func() bool { return ns.count("WATCHDOG=trigger") == 1 })
}

func TestTickInterval(t *testing.T) {
	s := testSpec(t, "cat")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	t.Setenv("WATCHDOG_USEC", "3000000")
	if got := tickInterval(s, 0); got != 1500*time.Millisecond {
		t.Errorf("tickInterval(WATCHDOG_USEC=3s) = %v; want 1.5s", got)
	}
	s.SessionFile, s.StaleAfter = "/x.jsonl", proto.Duration(2*time.Second)
	if got := tickInterval(s, 0); got != 500*time.Millisecond {
		t.Errorf("tickInterval(stale_after 2s) = %v; want 500ms", got)
	}
	t.Setenv("WATCHDOG_PID", "1") // not ours: no watchdog
	s.SessionFile, s.StaleAfter = "", 0
	if got := tickInterval(s, 0); got != defaultTick {
		t.Errorf("tickInterval(no watchdog) = %v; want %v", got, defaultTick)
	}
	if got := tickInterval(s, 70*time.Millisecond); got != 70*time.Millisecond {
		t.Errorf("tickInterval(override) = %v; want 70ms", got)
	}
}

// Without NOTIFY_SOCKET notifying is a silent no-op.
func TestNotifyWithoutSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	if err := sdNotify("READY=1"); err != nil {
		t.Errorf("sdNotify without NOTIFY_SOCKET = %v; want nil", err)
	}
}

// TestPromptTypedIsASignOfLife: an agent that waited at its prompt (or at
// its API's limit) for longer than stale_after is given its next prompt by
// the worker (a person's reply, or Legion's resume after a usage limit);
// until its turn-start hook comes, which may take a while on a loaded
// machine, the typed prompt is its sign of life: the watchdog is fed, not
// triggered at once for the wait that just ended.
func TestPromptTypedIsASignOfLife(t *testing.T) {
	ns := listenNotify(t)
	spec := hookSpec(t)
	const staleAfter = 2 * time.Second
	spec.StaleAfter = proto.Duration(staleAfter)
	tw := startWorker(t, spec, Options{Tick: 20 * time.Millisecond})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "agent-ready")
	for _, l := range []string{"work\r", "stop\r"} {
		if err := c.Input(ctxT(t), []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	agentIn(t, c, api.AgentIdle)
	time.Sleep(staleAfter + 500*time.Millisecond) // longer than stale_after at its prompt: fed, idle
	if n := ns.count("WATCHDOG=trigger"); n != 0 {
		t.Fatalf("WATCHDOG=trigger %d times while the agent idled at its prompt", n)
	}
	// The fake agent sends no hook for this line: a slow turn start.
	if _, err := c.Respond(ctxT(t), proto.RespondParams{Text: "go on"}); err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if h.Watchdog != proto.WatchFresh || h.ActivityAgeMS >= staleAfter.Milliseconds() {
		t.Errorf("right after the prompt was typed: watchdog %s, activity %d ms old; want fresh: the prompt is its sign of life", h.Watchdog, h.ActivityAgeMS)
	}
	if n := ns.count("WATCHDOG=trigger"); n != 0 {
		t.Errorf("WATCHDOG=trigger %d times right after the prompt was typed", n)
	}
}

// Without systemd's watchdog (a Job's pod on Kubernetes), the worker
// judges staleness the same way and ends the stale agent itself, with the
// reason, exiting with a failure so its Job starts a new pod. A fresh
// agent is left alone.
func TestSelfWatchdogEndsStaleAgent(t *testing.T) {
	spec := testSpec(t, "sh", "-c", "while :; do sleep 1; done")
	spec.SessionFile = filepath.Join(spec.Cwd, "session.jsonl")
	spec.StaleAfter = proto.Duration(400 * time.Millisecond)
	spec.SelfWatchdog = true
	if err := os.WriteFile(spec.SessionFile, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stopTouching := make(chan struct{})
	touch(t, spec.SessionFile, stopTouching)
	tw := startWorker(t, spec, Options{Tick: 50 * time.Millisecond})
	c := tw.dial()
	// Fresh for many ticks (and many stale_after periods of a file that
	// is kept fresh): the worker runs on.
	for i := 0; i < 20; i++ {
		h, err := c.Health(ctxT(t))
		if err != nil || h.Watchdog == proto.WatchStale {
			t.Fatalf("Health() = %+v, %v while the session file is fresh", h, err)
		}
		select {
		case <-tw.done:
			t.Fatalf("the worker ended while its agent was fresh: %v", tw.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	close(stopTouching)
	err := tw.wait()
	var ee *ExitError
	if !errors.As(err, &ee) || !strings.HasPrefix(ee.Exit.Reason, "watchdog: stale for ") {
		t.Fatalf("Run() = %v; want an ExitError with the watchdog reason (a failure, so the Job restarts it)", err)
	}
	r, err := proto.ReadRegistry(spec.RegistryPath())
	if err != nil || r.LastExit == nil || !strings.HasPrefix(r.LastExit.Reason, "watchdog: stale for ") || r.State != proto.StateStopped {
		t.Errorf("registry = %+v, %v; want stopped with the watchdog reason", r, err)
	}
	if tr := readTranscript(t, spec); !strings.Contains(tr, "reason: watchdog: stale for ") {
		t.Errorf("transcript's exit line lacks the watchdog reason:\n%s", tr)
	}
}
