package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/internal/journal"
)

// TestBuildTimeline: journal lines as `journalctl --output=json` prints
// them (decoded by journal.ParseEntry) become each issue's phases and its
// agent's states; what runs now reaches the right edge.
func TestBuildTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	line := func(min int, issue, mode, msg string) journal.Entry {
		raw := fmt.Sprintf(`{"__REALTIME_TIMESTAMP":"%d","MESSAGE":%q,"LEGION_TEAM":"demo","LEGION_ISSUE":%q,"LEGION_MODE":%q,"_SYSTEMD_USER_UNIT":"legion-6f1c2b9e-%s-%s.service"}`,
			t0.Add(time.Duration(min)*time.Minute).UnixMicro(), msg, issue, mode, issue, mode)
		e, err := journal.ParseEntry([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	entries := []journal.Entry{
		line(0, "DEMO-1", "controller", "apply action=dispatch_planner reason=\"new issue: plan it\""),
		line(1, "DEMO-1", "plan", "agent started pid=12 argv_kind=new run=1"),
		line(1, "DEMO-1", "plan", "agent state state=working event=UserPromptSubmit"),
		line(5, "DEMO-1", "plan", "agent state state=idle event=Stop background_tasks=0 last_message=done"),
		line(6, "DEMO-1", "plan", "agent ended exit=\"exit code 0\" reason=done"),
		line(10, "DEMO-1", "implement", "agent started pid=13 argv_kind=new run=1"),
		line(10, "DEMO-1", "implement", "agent state state=working event=UserPromptSubmit"),
		line(20, "DEMO-1", "implement", "agent state state=waiting_permission event=PermissionRequest tool=Bash command=\"make x\""),
	}
	now := t0.Add(30 * time.Minute)
	since := t0.Add(20 * time.Minute)
	sessions := []api.Session{{Name: "DEMO-1-implement", Team: "demo", Issue: "DEMO-1", Mode: "implement", State: api.StateWaitingInput,
		Agent: &api.Agent{State: api.AgentWaitingPermission, Since: since}}}
	issues := []controller.TrackedIssue{{ID: "DEMO-1", Title: "One", Status: controller.StatusInProgress}, {ID: "DEMO-2", Title: "Two", Status: controller.StatusTodo}}
	tl := BuildTimeline("demo", entries, issues, sessions, t0.Add(-time.Hour), now)
	if len(tl.Issues) != 2 || tl.Issues[0].Issue != "DEMO-1" || tl.Issues[1].Issue != "DEMO-2" || len(tl.Issues[1].Phases) != 0 {
		t.Fatalf("BuildTimeline issues = %+v; want DEMO-1 with spans, DEMO-2 without", tl.Issues)
	}
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	wantPhases := []Span{{Mode: "plan", From: at(1), To: at(6)}, {Mode: "implement", From: at(10), To: now, Live: true}}
	wantActivity := []Span{
		{Mode: "plan", State: "starting", From: at(1), To: at(1)},
		{Mode: "plan", State: "working", From: at(1), To: at(5)},
		{Mode: "plan", State: "idle", From: at(5), To: at(6)},
		{Mode: "implement", State: "starting", From: at(10), To: at(10)},
		{Mode: "implement", State: "working", From: at(10), To: at(20)},
		{Mode: "implement", State: "waiting_permission", From: at(20), To: now, Live: true},
	}
	got := tl.Issues[0]
	if fmt.Sprint(got.Phases) != fmt.Sprint(wantPhases) {
		t.Errorf("phases = %v\nwant %v", got.Phases, wantPhases)
	}
	if fmt.Sprint(got.Activity) != fmt.Sprint(wantActivity) {
		t.Errorf("activity = %v\nwant %v", got.Activity, wantActivity)
	}
}

// TestHistoryTimeline: without a journal, the states the dashboard saw on
// the session stream make the activity rows; a session first seen in a
// state dates it from the agent's Since, one that ended before it was
// seen draws nothing.
func TestHistoryTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var h history
	s := api.Session{Name: "DEMO-1-plan", Team: "demo", Issue: "DEMO-1", Mode: "plan", State: api.StateRunning,
		Agent: &api.Agent{State: api.AgentWorking, Since: at(-30)}}
	h.record(s, at(0))
	h.record(s, at(5)) // no change: no entry
	s.State, s.Agent = api.StateWaitingInput, &api.Agent{State: api.AgentWaitingAnswer, Since: at(10)}
	h.record(s, at(10))
	h.record(api.Session{Name: "DEMO-2-plan", Team: "demo", Issue: "DEMO-2", Mode: "plan", State: api.StateExited}, at(11))
	s.State, s.Agent = api.StateExited, nil
	h.record(s, at(20))
	entries, since := h.team("demo", t0.Add(-time.Hour))
	if !since.Equal(at(0)) || len(entries) != 3 {
		t.Fatalf("history = %v since %v; want 3 entries since %v", entries, since, at(0))
	}
	tl := BuildTimeline("demo", entries, nil, nil, t0.Add(-time.Hour), at(60))
	want := []Span{{Mode: "plan", State: "working", From: at(-30), To: at(10)}, {Mode: "plan", State: "waiting_answer", From: at(10), To: at(20)}}
	if len(tl.Issues) != 1 || fmt.Sprint(tl.Issues[0].Activity) != fmt.Sprint(want) {
		t.Errorf("timeline from history = %+v\nwant activity %v", tl.Issues, want)
	}
}
