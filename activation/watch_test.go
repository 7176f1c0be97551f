package activation

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units"
)

// eventStream collects the events of one sessions.watch subscription.
type eventStream struct {
	ch   chan api.SessionEvent
	done chan error
	seen []string // what was skipped, for failure messages
}

// watchEvents subscribes with a client of its own and collects events
// until the test ends.
func watchEvents(t *testing.T, socket string, args api.WatchArgs) *eventStream {
	t.Helper()
	c, err := api.DialPath(t.Context(), socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	es := &eventStream{ch: make(chan api.SessionEvent, 1024), done: make(chan error, 1)}
	go func() {
		es.done <- c.Watch(ctx, args, func(ev api.SessionEvent) error {
			es.ch <- ev
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-es.done
		c.Close()
	})
	return es
}

// next waits for the first event that matches, skipping others.
func (es *eventStream) next(t *testing.T, what string, match func(api.SessionEvent) bool) api.SessionEvent {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		select {
		case ev := <-es.ch:
			if match(ev) {
				return ev
			}
			es.seen = append(es.seen, describe(ev))
		case err := <-es.done:
			t.Fatalf("waiting for %s: the stream ended: %v; saw %s", what, err, strings.Join(es.seen, ", "))
		case <-deadline.C:
			t.Fatalf("waiting for %s: no such event within %v; saw %s", what, waitFor, strings.Join(es.seen, ", "))
		}
	}
}

func describe(ev api.SessionEvent) string {
	if ev.Session == nil {
		return fmt.Sprintf("%s(%d sessions)", ev.Type, len(ev.Sessions))
	}
	return fmt.Sprintf("%s(%s %s)", ev.Type, ev.Session.Name, ev.Session.State)
}

// is matches an event of type typ about the session called name.
func is(typ api.EventType, name string) func(api.SessionEvent) bool {
	return func(ev api.SessionEvent) bool {
		return ev.Type == typ && ev.Session != nil && ev.Session.Name == name
	}
}

// TestWatchEvents: a subscriber of sessions.watch gets a snapshot, then,
// pushed as they happen, a spawn (started, then running), an agent that
// waits on a human and then runs again (agent_state_changed), an agent that
// exits (exited, with its exit code), a kill (exited), a session that
// fails at its start limit and one whose agent cannot start (failed, with
// the cause), while another
// subscriber that never reads does not hold anything up.
func TestWatchEvents(t *testing.T) {
	ip := startInProcess(t, true, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := ip.client(t)

	// A subscriber that never reads a byte.
	stalled := dialRaw(t, ip.socket)
	if _, err := stalled.c.Write([]byte(`{"v":1,"id":"1","cmd":"sessions.watch"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	es := watchEvents(t, ip.socket, api.WatchArgs{})
	snap := es.next(t, "the snapshot", func(ev api.SessionEvent) bool { return true })
	if snap.Type != api.EventSnapshot || len(snap.Sessions) != 0 {
		t.Fatalf("first event = %s; want a snapshot of no sessions", describe(snap))
	}

	if _, err := c.Spawn(ctx, testLaunch("sleeper", "/bin/sleep", "600")); err != nil {
		t.Fatal(err)
	}
	if ev := es.next(t, "sleeper started", is(api.EventStarted, "sleeper")); ev.Session.State != api.StateRunning {
		es.next(t, "sleeper running", func(ev api.SessionEvent) bool {
			return ev.Session != nil && ev.Session.Name == "sleeper" && ev.Session.State == api.StateRunning
		})
	}

	// An agent whose session file holds a question it asked and no
	// answer: once the file is older than stale_after, the agent waits on a
	// human; a fresh write to the file makes it run again.
	sessionFile := filepath.Join(t.TempDir(), "session.jsonl")
	question := `{"type":"assistant","isSidechain":false,"message":{"id":"msg_q","content":[{"type":"tool_use","id":"toolu_q","name":"AskUserQuestion","input":{"questions":[{"question":"Which one?","header":"H","options":[{"label":"a"},{"label":"b"}],"multiSelect":false}]}}]}}` + "\n"
	if err := os.WriteFile(sessionFile, []byte(question), 0o600); err != nil {
		t.Fatal(err)
	}
	asker := testLaunch("asker", "/bin/sleep", "600")
	asker.Watch, asker.StaleAfter, asker.StartupGrace = sessionFile, api.Duration(time.Second), new(api.Duration(0))
	if _, err := c.Spawn(ctx, asker); err != nil {
		t.Fatal(err)
	}
	ev := es.next(t, "asker waiting on a human", func(ev api.SessionEvent) bool {
		return is(api.EventAgentStateChanged, "asker")(ev) && ev.Session.State == api.StateWaitingInput
	})
	if !strings.Contains(ev.Session.Question, "Which one?") {
		t.Errorf("waiting event of asker has question %q; want it to hold %q", ev.Session.Question, "Which one?")
	}
	now := time.Now()
	if err := os.Chtimes(sessionFile, now, now); err != nil {
		t.Fatal(err)
	}
	es.next(t, "asker running again", func(ev api.SessionEvent) bool {
		return is(api.EventAgentStateChanged, "asker")(ev) && ev.Session.State == api.StateRunning
	})

	if _, err := c.Spawn(ctx, testLaunch("quick", "/bin/sh", "-c", "exit 0")); err != nil {
		t.Fatal(err)
	}
	ev = es.next(t, "quick exited", is(api.EventExited, "quick"))
	if x := ev.Session.Exit; x == nil || x.Code == nil || *x.Code != 0 {
		t.Errorf("exited event of quick has exit %v; want exit code 0", x)
	}

	if _, err := c.Kill(ctx, "sleeper"); err != nil {
		t.Fatal(err)
	}
	es.next(t, "sleeper exited after the kill", is(api.EventExited, "sleeper"))

	failing := testLaunch("failing", "/bin/sh", "-c", "exit 3")
	failing.Cooldown, failing.StartLimitBurst, failing.StartLimitInterval = new(api.Duration(50*time.Millisecond)), 2, api.Duration(time.Minute)
	if _, err := c.Spawn(ctx, failing); err != nil {
		t.Fatal(err)
	}
	ev = es.next(t, "failing failed", is(api.EventFailed, "failing"))
	if !strings.Contains(ev.Session.Cause, "after 2 restarts") || !strings.Contains(ev.Session.Cause, "exit code 3") {
		t.Errorf("failed event cause = %q; want the restarts and the exit code 3 named", ev.Session.Cause)
	}

	// An agent that cannot start fails its unit at once (exit 78, no
	// restart) while the spawn waits for the start job, so the unit's
	// signals come before the helper lists the session: the failed event
	// must come all the same, with the cause.
	if _, err := c.Spawn(ctx, testLaunch("missing", "legion-test-no-such-program")); err == nil {
		t.Fatal("spawn of a program that is not installed succeeded; want its start to fail")
	}
	ev = es.next(t, "missing failed", is(api.EventFailed, "missing"))
	if !strings.Contains(ev.Session.Cause, "executable file not found") {
		t.Errorf("failed event cause = %q; want the start failure named", ev.Session.Cause)
	}

	// A new subscriber's snapshot has all of it.
	late := watchEvents(t, ip.socket, api.WatchArgs{Team: config.AdhocTeam})
	snap = late.next(t, "the late snapshot", func(ev api.SessionEvent) bool { return true })
	got := map[string]api.State{}
	for _, s := range snap.Sessions {
		got[s.Name] = s.State
	}
	delete(got, "asker") // waiting or running, by now
	want := map[string]api.State{"sleeper": api.StateExited, "quick": api.StateExited, "failing": api.StateFailed, "missing": api.StateFailed}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("late snapshot = %v; want %v", got, want)
	}
}

// TestWatchDropsLaggingSubscriber: a subscriber whose queue is full is
// dropped (and told so through its dropped channel); publishing never
// waits for it, and another subscriber gets every event.
func TestWatchDropsLaggingSubscriber(t *testing.T) {
	e := newSessionEvents()
	e.queue = 2
	slow, _ := e.subscribe("")
	fast, snap := e.subscribe("")
	if snap.Type != api.EventSnapshot {
		t.Fatalf("subscribe returned %s; want a snapshot", describe(snap))
	}
	s := &session{name: "s", team: config.AdhocTeam, unit: "legion-x.service", log: slog.New(slog.DiscardHandler)}
	got := 0
	for i, st := range []string{"activating", "active", "failed", "activating", "active"} {
		s.us = units.State{Name: s.unit, LoadState: "loaded", ActiveState: st}
		e.publish(s)
		select {
		case raw := <-fast.ch:
			got++
			if !strings.Contains(string(raw), `"name":"s"`) {
				t.Errorf("event %d = %s; want it about session s", i, raw)
			}
		default:
			t.Fatalf("publish %d (%s) did not reach the subscriber that reads", i, st)
		}
	}
	if got != 5 {
		t.Errorf("the reading subscriber got %d events; want 5", got)
	}
	select {
	case <-slow.dropped:
	default:
		t.Fatal("the subscriber that never read was not dropped")
	}
	if e.subs[slow] {
		t.Error("the dropped subscriber is still subscribed")
	}
}

// TestEventType: which change is which event.
func TestEventType(t *testing.T) {
	code := 0
	exit := &api.Exit{Code: &code, Reason: "exited"}
	run := api.Session{Name: "s", State: api.StateRunning, PID: 7}
	tests := []struct {
		name   string
		old    api.Session
		had    bool
		v      api.Session
		want   api.EventType
		wantOK bool
	}{
		{"new", api.Session{}, false, api.Session{State: api.StateStarting}, api.EventStarted, true},
		{"new and over", api.Session{}, false, api.Session{State: api.StateExited}, api.EventExited, true},
		{"running", api.Session{State: api.StateStarting}, true, run, api.EventStateChanged, true},
		{"waiting", run, true, api.Session{Name: "s", State: api.StateWaitingInput, PID: 7, Question: "ok?"}, api.EventAgentStateChanged, true},
		{"running again", api.Session{Name: "s", State: api.StateWaitingInput, PID: 7, Question: "ok?"}, true, run, api.EventAgentStateChanged, true},
		{"activity only", run, true, api.Session{Name: "s", State: api.StateRunning, PID: 7, LastActivity: &time.Time{}}, "", false},
		{"exited", run, true, api.Session{State: api.StateExited, Exit: exit}, api.EventExited, true},
		{"failed", api.Session{State: api.StateStarting}, true, api.Session{State: api.StateFailed}, api.EventFailed, true},
		{"spawned again", api.Session{State: api.StateExited}, true, api.Session{State: api.StateStarting}, api.EventStarted, true},
		{"agent state from its hooks", api.Session{Name: "s", State: api.StateRunning, PID: 7, Agent: &api.Agent{State: api.AgentWorking}}, true,
			api.Session{Name: "s", State: api.StateRunning, PID: 7, Agent: &api.Agent{State: api.AgentIdle}}, api.EventAgentStateChanged, true},
		{"agent's first hook event", run, true,
			api.Session{Name: "s", State: api.StateRunning, PID: 7, Agent: &api.Agent{State: api.AgentStarting}}, api.EventAgentStateChanged, true},
		{"agent's event time only", api.Session{Name: "s", State: api.StateRunning, PID: 7, Agent: &api.Agent{State: api.AgentWorking, Tool: "Bash"}}, true,
			api.Session{Name: "s", State: api.StateRunning, PID: 7, Agent: &api.Agent{State: api.AgentWorking, Tool: "Bash", LastEvent: time.Now(), Event: "PostToolUse"}}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := eventType(tt.old, tt.had, tt.v)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("eventType(%+v, %v, %+v) = %q, %v; want %q, %v", tt.old, tt.had, tt.v, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
