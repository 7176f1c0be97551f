package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
)

func limitedWorker(mode Mode, since time.Time, reset *time.Time) *Worker {
	return &Worker{Mode: mode, Session: "s-" + string(mode) + since.Format("150405"),
		Agent: &api.Agent{State: api.AgentAPIError, Since: since, Error: "rate_limit: API Error: Request rejected (429) · Usage limit reached.", ResetAt: reset}}
}

// tickLimits is one tick: Observe, then Decide.
func tickLimits(t *testing.T, l *Limits, st State) []Decision {
	t.Helper()
	var p string
	st.KindOf = map[Mode]string{ModePlan: "claude", ModeImplement: "claude", ModeReview: "codex", ModeRetro: "claude", ModeFinish: "claude"}
	st.LimitWindows = map[string]time.Duration{"claude": 5 * time.Hour, "codex": 5 * time.Hour}
	if st.Pauses, p = l.Observe(&st, st.LimitWindows); p != "" {
		t.Fatalf("Observe: %s", p)
	}
	return Decide(st)
}

// TestLimitsWaitedOut: agents stopped at their kind's limit (no reset time
// given) are not escalated: the kind pauses once for them all (the first
// backoff, a minute); new dispatches of that kind wait, another kind's do
// not; when the pause ends the paused conversations are prompted to go
// on, oldest first, two a tick; one that stops at the limit again starts
// the next, longer pause (two minutes); a reset time the agent gives is
// waited for instead.
func TestLimitsWaitedOut(t *testing.T) {
	l := &Limits{Path: filepath.Join(t.TempDir(), "limits.json")}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	issues := func(now time.Time) []Issue {
		return []Issue{
			{ID: "A-1", Status: StatusInProgress, Worker: limitedWorker(ModeImplement, t0.Add(2*time.Second), nil)},
			{ID: "A-2", Status: StatusTodo, Worker: limitedWorker(ModePlan, t0, nil)},
			{ID: "A-3", Status: StatusTodo, Worker: limitedWorker(ModePlan, t0.Add(time.Second), nil)},
			{ID: "A-4", Status: StatusTodo},                                           // a new planner (claude)
			{ID: "A-5", Status: StatusNeedsReview, Labels: []string{LabelWorkerDone}}, // a new reviewer (codex)
		}
	}
	ds := tickLimits(t, l, State{Now: t0.Add(5 * time.Second), Issues: issues(t0)})
	want := []Action{ActionSkip, ActionSkip, ActionSkip, ActionSkip, ActionDispatchReviewer}
	for i, d := range ds {
		if d.Action != want[i] {
			t.Errorf("tick 1: %s = %s (%s); want %s", d.Issue, d.Action, d.Reason, want[i])
		}
	}
	if !strings.Contains(ds[0].Reason, "paused until 2026-11-29") || !strings.Contains(ds[0].Reason, "no reset time given: backing off") {
		t.Errorf("reason %q; want when the pause ends and why", ds[0].Reason)
	}
	p, _ := l.Pauses()
	if c := p["claude"]; c == nil || len(c.Hits) != 3 || c.Pauses != 1 || !c.Until.Equal(t0.Add(5*time.Second).Add(time.Minute)) {
		// Three agents stopped at the same limit: one pause, the first backoff.
		t.Errorf("claude's pause = %+v; want three hits, one pause until a minute after the tick", c)
	}
	// Before the pause ends: still waiting. After: the two oldest go on.
	now := t0.Add(5 * time.Second).Add(time.Minute - time.Second)
	if ds = tickLimits(t, l, State{Now: now, Issues: issues(t0)}); ds[1].Action != ActionSkip {
		t.Errorf("a second before the pause ends: %s; want skip", ds[1].Action)
	}
	now = now.Add(2 * time.Second)
	ds = tickLimits(t, l, State{Now: now, Issues: issues(t0)})
	want = []Action{ActionSkip, ActionResumeAfterLimit, ActionResumeAfterLimit, ActionDispatchPlanner, ActionDispatchReviewer}
	for i, d := range ds {
		if d.Action != want[i] {
			t.Errorf("after the pause: %s = %s (%s); want %s", d.Issue, d.Action, d.Reason, want[i])
		}
	}
	if ds[1].Input != ResumePrompt || ds[1].Mode != ModePlan || len(ds[1].AddLabels) != 0 || ds[1].Comment != "" {
		t.Errorf("resume decision %+v; want the resume prompt to the planner, no escalation", ds[1])
	}
	if !strings.Contains(ds[0].Reason, "waiting for its turn") {
		t.Errorf("the third paused conversation: %q; want it to wait its turn", ds[0].Reason)
	}
	// A resumed one stops at the limit again: the second pause, twice as long.
	again := issues(t0)
	again[1].Worker = limitedWorker(ModePlan, now.Add(10*time.Second), nil)
	tickLimits(t, l, State{Now: now.Add(11 * time.Second), Issues: again})
	if p, _ := l.Pauses(); p["claude"].Pauses != 2 || !p["claude"].Until.Equal(now.Add(11*time.Second).Add(2*time.Minute)) {
		t.Errorf("after a second limit: %+v; want the second pause, two minutes", p["claude"])
	}

	// A reset time the agent gives is the pause's end.
	l2 := &Limits{Path: filepath.Join(t.TempDir(), "limits.json")}
	reset := t0.Add(3 * time.Hour)
	ds = tickLimits(t, l2, State{Now: t0.Add(time.Second), Issues: []Issue{{ID: "B-1", Status: StatusTodo, Worker: limitedWorker(ModePlan, t0, &reset)}}})
	if ds[0].Action != ActionSkip || !strings.Contains(ds[0].Reason, "the reset time the agent gave") {
		t.Errorf("with a reset time: %s (%s); want a skip until it", ds[0].Action, ds[0].Reason)
	}
	// At the reset time the kind runs again, but the stopped conversation
	// is given ResumeGrace to go on by itself (a CLI that retries at that
	// time) before Legion prompts it.
	b1 := []Issue{{ID: "B-1", Status: StatusTodo, Worker: limitedWorker(ModePlan, t0, &reset)}, {ID: "B-2", Status: StatusTodo}}
	if ds = tickLimits(t, l2, State{Now: reset.Add(time.Second), Issues: b1}); ds[0].Action != ActionSkip || ds[1].Action != ActionDispatchPlanner {
		t.Errorf("just after the reset: %s, %s; want the stopped one left a moment, a new planner dispatched", ds[0].Action, ds[1].Action)
	}
	if ds = tickLimits(t, l2, State{Now: reset.Add(ResumeGrace), Issues: b1}); ds[0].Action != ActionResumeAfterLimit {
		t.Errorf("ResumeGrace after the reset: %s (%s); want it prompted", ds[0].Action, ds[0].Reason)
	}
}

// TestLimitsEscalateAfterAWindow: a limit that keeps coming back after
// the kind waited a whole window is escalated (with the history), once;
// other API errors (authentication) are escalated at once as before; an
// episode ends after a window without a limit.
func TestLimitsEscalateAfterAWindow(t *testing.T) {
	l := &Limits{Path: filepath.Join(t.TempDir(), "limits.json")}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	now := t0
	var ds []Decision
	for i := 0; ; i++ {
		since := now
		now = now.Add(time.Second)
		ds = tickLimits(t, l, State{Now: now, Issues: []Issue{{ID: "A-1", Status: StatusInProgress, Worker: limitedWorker(ModeImplement, since, nil)}}})
		if ds[0].Action == ActionEscalateAPIError {
			break
		}
		if ds[0].Action != ActionSkip || i > 20 {
			t.Fatalf("limit %d: %s (%s); want a pause until a window was waited", i+1, ds[0].Action, ds[0].Reason)
		}
		p, _ := l.Pauses()
		now = p["claude"].Until
	}
	if p, _ := l.Pauses(); p["claude"].Waited < 5*time.Hour {
		t.Errorf("escalated after %s of waiting; want a whole window (5h)", p["claude"].Waited)
	}
	if !strings.Contains(ds[0].Comment, "came back each time") || !strings.Contains(ds[0].Comment, "2026-11-29T10:00:00Z") || len(ds[0].AddLabels) != 1 {
		t.Errorf("escalation %+v; want the history in the comment and user-input-needed", ds[0])
	}
	// Escalated: the label holds it, no second escalation.
	ds = tickLimits(t, l, State{Now: now.Add(time.Minute), Issues: []Issue{{ID: "A-1", Status: StatusInProgress, Labels: []string{LabelInputNeeded},
		Worker: limitedWorker(ModeImplement, now, nil)}}})
	if ds[0].Action != ActionSkip {
		t.Errorf("after the escalation: %s; want skip (waiting for the person)", ds[0].Action)
	}

	// Another API error is not a limit: escalated at once.
	auth := &Worker{Mode: ModePlan, Session: "s", Agent: &api.Agent{State: api.AgentAPIError, Since: now, Error: "authentication_failed: Not logged in · Please run /login"}}
	if ds = tickLimits(t, l, State{Now: now.Add(time.Minute), Issues: []Issue{{ID: "B-1", Status: StatusTodo, Worker: auth}}}); ds[0].Action != ActionEscalateAPIError {
		t.Errorf("an authentication failure: %s; want escalate_api_error at once", ds[0].Action)
	}
	credit := &Worker{Mode: ModePlan, Session: "s", Agent: &api.Agent{State: api.AgentAPIError, Since: now, Error: "billing_error: Quota exceeded. Check your plan and billing details."}}
	if ds = tickLimits(t, l, State{Now: now.Add(time.Minute), Issues: []Issue{{ID: "B-2", Status: StatusTodo, Worker: credit}}}); ds[0].Action != ActionEscalateAPIError {
		t.Errorf("spent API credit: %s; want escalate_api_error at once (waiting does not fix it)", ds[0].Action)
	}
	// A window with no limit ends the episode.
	tickLimits(t, l, State{Now: now.Add(11 * time.Hour)})
	if p, _ := l.Pauses(); p["claude"] != nil {
		t.Errorf("after a window without a limit: %+v; want the episode gone", p["claude"])
	}
}

// TestLimitsResumeEarly: a person ends a pause (legion limits resume),
// and the next tick prompts the paused conversation; a corrupt file is
// quarantined and the pauses start again.
func TestLimitsResumeEarly(t *testing.T) {
	l := &Limits{Path: filepath.Join(t.TempDir(), "limits.json")}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	is := []Issue{{ID: "A-1", Status: StatusInProgress, Worker: limitedWorker(ModeImplement, t0, nil)}}
	tickLimits(t, l, State{Now: t0.Add(time.Second), Issues: is})
	ended, err := (&Limits{Path: l.Path}).Resume(t0.Add(2*time.Second), "claude")
	if err != nil || len(ended) != 1 || ended[0] != "claude" {
		t.Fatalf("Resume = %q, %v; want claude's pause ended", ended, err)
	}
	if ds := tickLimits(t, l, State{Now: t0.Add(3 * time.Second), Issues: is}); ds[0].Action != ActionResumeAfterLimit {
		t.Errorf("after the early resume: %s (%s); want resume_after_limit", ds[0].Action, ds[0].Reason)
	}
	if err := os.WriteFile(l.Path, []byte("[1, 2"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := State{Now: t0.Add(4 * time.Second), Issues: is, KindOf: map[Mode]string{ModeImplement: "claude"}}
	if _, p := l.Observe(&st, nil); !strings.Contains(p, "not Legion's JSON: moved to") {
		t.Errorf("Observe of a corrupt file: problem %q; want it quarantined and named", p)
	}
}
