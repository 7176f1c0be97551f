package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
)

// fakeAgents is a hand-written Dispatcher and SessionSource: it records
// every call and keeps the sessions it "started" live until the test ends
// them, the way real workers stay live until they exit.
type fakeAgents struct {
	calls    []string
	sessions []controller.Session
}

func (f *fakeAgents) Dispatch(_ context.Context, issue string, mode controller.Mode) error {
	f.calls = append(f.calls, "dispatch "+issue+" "+string(mode))
	f.sessions = append(f.sessions, controller.Session{Name: issue + "-" + string(mode), Issue: issue, Mode: mode, State: controller.SessionRunning})
	return nil
}

func (f *fakeAgents) Respond(_ context.Context, session, text, permission, by string) error {
	call := fmt.Sprintf("send %s %q", session, text)
	if permission != "" {
		call = fmt.Sprintf("respond %s %s %q", session, permission, text)
	}
	f.calls = append(f.calls, call)
	return nil
}

func (f *fakeAgents) End(_ context.Context, session, reason string) error {
	f.calls = append(f.calls, "end "+session)
	f.sessions = slices.DeleteFunc(f.sessions, func(s controller.Session) bool { return s.Name == session })
	return nil
}

func (f *fakeAgents) Sessions(context.Context) ([]controller.Session, error) { return f.sessions, nil }

// finish ends the live session of issue, as an exiting worker does: the
// helper lists it exited, completed now.
func (f *fakeAgents) finish(issue string) {
	for i, s := range f.sessions {
		if s.Issue == issue && s.State == controller.SessionRunning {
			f.sessions[i].State, f.sessions[i].Completed = controller.SessionExited, time.Now()
		}
	}
}

// lose removes every session of issue, as a reboot does: the worker's
// transient unit goes with the boot, and the helper prunes its entry.
func (f *fakeAgents) lose(issue string) {
	f.sessions = slices.DeleteFunc(f.sessions, func(s controller.Session) bool { return s.Issue == issue })
}

// tick runs one collect → decide → apply pass and returns the actions taken.
func tick(t *testing.T, tr controller.Tracker, agents *fakeAgents, wip int) []controller.Action {
	t.Helper()
	ctx := t.Context()
	src := controller.Sources{Tracker: tr, Sessions: agents, WIPLimit: wip}
	st, _, err := controller.Collect(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	var acts []controller.Action
	for i, d := range controller.Decide(st) {
		if err := controller.Apply(ctx, src, agents, d, st.Issues[i]); err != nil {
			t.Fatal(err)
		}
		acts = append(acts, d.Action)
	}
	return acts
}

// TestLifecycle drives one issue from Todo to Done through all five phases,
// with a changes-requested review on the way, playing the workers' part.
func TestLifecycle(t *testing.T) {
	ctx := t.Context()
	tr := local.Open(t.TempDir(), "DEMO")
	is, err := tr.Add(ctx, "Add a parser")
	if err != nil {
		t.Fatal(err)
	}
	id := is.ID
	agents := &fakeAgents{}
	label := func(l string) {
		t.Helper()
		if err := tr.AddLabel(ctx, id, l); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name   string
		worker func() // what the live worker does before the tick
		want   controller.Action
		status controller.Status
	}{
		{"plan", nil, controller.ActionDispatchPlanner, controller.StatusTodo},
		{"planner still busy", nil, controller.ActionSkip, controller.StatusTodo},
		{"plan done", func() { label(controller.LabelWorkerDone); agents.finish(id) }, controller.ActionDispatchImplementer, controller.StatusInProgress},
		{"implemented", func() { label(controller.LabelWorkerDone); agents.finish(id) }, controller.ActionDispatchReviewer, controller.StatusNeedsReview},
		{"changes requested", func() { label(controller.LabelChangesRequest); label(controller.LabelWorkerDone); agents.finish(id) }, controller.ActionResumeImplementer, controller.StatusNeedsReview},
		{"fixed, review again", func() { agents.finish(id) }, controller.ActionDispatchReviewer, controller.StatusNeedsReview},
		{"approved", func() { label(controller.LabelApproved); label(controller.LabelWorkerDone); agents.finish(id) }, controller.ActionTransitionToRetro, controller.StatusRetro},
		{"retro done", func() { label(controller.LabelWorkerDone); agents.finish(id) }, controller.ActionDispatchFinisher, controller.StatusRetro},
		{"finished", func() {
			if err := tr.Move(ctx, id, controller.StatusDone); err != nil {
				t.Fatal(err)
			}
			agents.finish(id)
		}, controller.ActionNone, controller.StatusDone},
	}
	for _, s := range steps {
		if s.worker != nil {
			s.worker()
		}
		got := tick(t, tr, agents, 1)
		if len(got) != 1 || got[0] != s.want {
			t.Fatalf("%s: actions = %v; want [%s]", s.name, got, s.want)
		}
		cur, _ := tr.Issue(ctx, id)
		if cur.Status != s.status {
			t.Fatalf("%s: status = %q; want %q", s.name, cur.Status, s.status)
		}
		// The finisher's dispatch keeps worker-done (with worker-finishing).
		if s.want != controller.ActionSkip && s.want != controller.ActionNone && s.want != controller.ActionDispatchFinisher &&
			slices.Contains(cur.Labels, controller.LabelWorkerDone) {
			t.Fatalf("%s: worker-done still set after the transition: %v", s.name, cur.Labels)
		}
	}
	want := []string{
		"dispatch DEMO-1 plan", "dispatch DEMO-1 implement", "dispatch DEMO-1 review",
		"dispatch DEMO-1 implement", "dispatch DEMO-1 review", "dispatch DEMO-1 retro", "dispatch DEMO-1 finish",
	}
	if diff := cmp.Diff(want, agents.calls); diff != "" {
		t.Errorf("dispatches (-want +got):\n%s", diff)
	}
}

// TestEscalateAndRelay covers a blocked worker: escalated once, then the
// human's answer relayed once.
func TestEscalateAndRelay(t *testing.T) {
	ctx := t.Context()
	tr := local.Open(t.TempDir(), "DEMO")
	is, _ := tr.Add(ctx, "Pick a database")
	agents := &fakeAgents{sessions: []controller.Session{
		{Name: "DEMO-1-implement", Issue: is.ID, Mode: "implement", State: "waiting_input", Question: "Postgres or SQLite?"},
	}}
	if err := tr.Move(ctx, is.ID, controller.StatusInProgress); err != nil {
		t.Fatal(err)
	}
	if got := tick(t, tr, agents, 1); got[0] != controller.ActionEscalateBlocked {
		t.Fatalf("first tick = %v; want escalate_blocked", got)
	}
	if got := tick(t, tr, agents, 1); got[0] != controller.ActionSkip {
		t.Fatalf("second tick = %v; want skip (waiting for the user)", got)
	}
	cur, _ := tr.Issue(ctx, is.ID)
	if n := len(cur.Comments); n != 1 || !slices.Contains(cur.Labels, controller.LabelInputNeeded) {
		t.Fatalf("after escalation: %d comments, labels %v; want 1 comment and user-input-needed", n, cur.Labels)
	}
	if err := tr.CommentAs(ctx, is.ID, "ana", "SQLite"); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddLabel(ctx, is.ID, controller.LabelFeedbackGiven); err != nil {
		t.Fatal(err)
	}
	if got := tick(t, tr, agents, 1); got[0] != controller.ActionRelayFeedback {
		t.Fatalf("third tick = %v; want relay_feedback", got)
	}
	agents.sessions[0].State = "running"
	if got := tick(t, tr, agents, 1); got[0] != controller.ActionSkip {
		t.Fatalf("fourth tick = %v; want skip (worker busy again)", got)
	}
	if diff := cmp.Diff([]string{`send DEMO-1-implement "SQLite"`}, agents.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	cur, _ = tr.Issue(ctx, is.ID)
	if len(cur.Labels) != 0 {
		t.Errorf("labels after relay = %v; want none", cur.Labels)
	}
}

// TestEndIdleWorkerOfClosedIssue: an agent idle at its prompt whose issue
// is Done, or no longer listed by the tracker (Linear leaves closed issues
// out), is ended; nothing else would ever end it.
func TestEndIdleWorkerOfClosedIssue(t *testing.T) {
	ctx := t.Context()
	tr := local.Open(t.TempDir(), "DEMO")
	is, err := tr.Add(ctx, "Done already")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Move(ctx, is.ID, controller.StatusDone); err != nil {
		t.Fatal(err)
	}
	idle := &api.Agent{State: api.AgentIdle}
	agents := &fakeAgents{sessions: []controller.Session{
		{Name: is.ID + "-finish", Issue: is.ID, Mode: controller.ModeFinish, State: controller.SessionRunning, Agent: idle},
		{Name: "DEMO-9-finish", Issue: "DEMO-9", Mode: controller.ModeFinish, State: controller.SessionRunning, Agent: idle},
		{Name: "DEMO-8-review", Issue: "DEMO-8", Mode: controller.ModeReview, State: controller.SessionRunning, Agent: &api.Agent{State: api.AgentWorking}},
	}}
	tick(t, tr, agents, 1)
	want := []string{"end " + is.ID + "-finish", "end DEMO-9-finish"}
	if diff := cmp.Diff(want, agents.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
