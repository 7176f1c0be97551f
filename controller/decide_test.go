package controller

import (
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func live(mode Mode) *Worker { return &Worker{Mode: mode, Session: "s-" + string(mode)} }

func failedIn(mode Mode) []FailedWorker {
	return []FailedWorker{{Mode: mode, Session: "s-" + string(mode), Unit: `legion-0123abcd-DEMO\x2d1-` + string(mode) + ".service"}}
}

func TestDecideTable(t *testing.T) {
	tests := []struct {
		name  string
		issue Issue
		want  Decision
	}{
		// One case per row of the status × label table (README: How an issue moves).
		{"todo/none", Issue{Status: StatusTodo},
			Decision{Action: ActionDispatchPlanner, Mode: ModePlan}},
		{"todo/worker-done", Issue{Status: StatusTodo, Labels: []string{LabelWorkerDone}},
			Decision{Action: ActionDispatchImplementer, Mode: ModeImplement, MoveTo: StatusInProgress, RemoveLabels: []string{LabelWorkerDone}}},
		// The seeds wait here, but with no worker live nothing would add
		// worker-done: the implementer is resumed.
		{"in-progress/none", Issue{Status: StatusInProgress},
			Decision{Action: ActionResumeImplementer, Mode: ModeImplement}},
		{"in-progress/none/failed-implementer", Issue{Status: StatusInProgress, Failed: failedIn(ModeImplement)},
			Decision{Action: ActionSkip}},
		{"in-progress/worker-done", Issue{Status: StatusInProgress, Labels: []string{LabelWorkerDone}},
			Decision{Action: ActionDispatchReviewer, Mode: ModeReview, MoveTo: StatusNeedsReview, RemoveLabels: []string{LabelWorkerDone}}},
		{"needs-review/none", Issue{Status: StatusNeedsReview},
			Decision{Action: ActionDispatchReviewer, Mode: ModeReview}},
		// The seeds skip until the PR label propagates; with no reviewer
		// live a missing one never comes: review again.
		{"needs-review/worker-done/no-pr-label", Issue{Status: StatusNeedsReview, Labels: []string{LabelWorkerDone}},
			Decision{Action: ActionDispatchReviewer, Mode: ModeReview, RemoveLabels: []string{LabelWorkerDone}}},
		{"needs-review/worker-done/changes-requested", Issue{Status: StatusNeedsReview, Labels: []string{LabelWorkerDone}, Review: ReviewChangesRequested},
			Decision{Action: ActionResumeImplementer, Mode: ModeImplement, RemoveLabels: []string{LabelWorkerDone, LabelChangesRequest}}},
		{"needs-review/worker-done/approved", Issue{Status: StatusNeedsReview, Labels: []string{LabelWorkerDone}, Review: ReviewApproved},
			Decision{Action: ActionTransitionToRetro, Mode: ModeRetro, MoveTo: StatusRetro, RemoveLabels: []string{LabelWorkerDone, LabelApproved}}},
		{"needs-review/none/approved-without-done", Issue{Status: StatusNeedsReview, Review: ReviewApproved},
			Decision{Action: ActionDispatchReviewer, Mode: ModeReview}},
		{"retro/none", Issue{Status: StatusRetro},
			Decision{Action: ActionResumeImplementer, Mode: ModeRetro}},
		// worker-done stays: with worker-finishing it tells a finisher that
		// ended without closing the issue from a retro still to run.
		{"retro/worker-done", Issue{Status: StatusRetro, Labels: []string{LabelWorkerDone}},
			Decision{Action: ActionDispatchFinisher, Mode: ModeFinish, AddLabels: []string{LabelFinishing}}},
		{"retro/worker-finishing", Issue{Status: StatusRetro, Labels: []string{LabelFinishing}},
			Decision{Action: ActionResumeImplementer, Mode: ModeRetro, RemoveLabels: []string{LabelFinishing}}},
		{"done/none", Issue{Status: StatusDone},
			Decision{Action: ActionNone}},
		{"done/worker-done", Issue{Status: StatusDone, Labels: []string{LabelWorkerDone}},
			Decision{Action: ActionNone}},
		{"backlog", Issue{Status: "Backlog"},
			Decision{Action: ActionNone}},

		// A live worker is never disturbed, whatever the labels say.
		{"todo/live", Issue{Status: StatusTodo, Worker: live(ModePlan)},
			Decision{Action: ActionSkip}},
		{"in-progress/worker-done/live", Issue{Status: StatusInProgress, Labels: []string{LabelWorkerDone}, Worker: live(ModeImplement)},
			Decision{Action: ActionSkip}},
		{"retro/worker-done/live", Issue{Status: StatusRetro, Labels: []string{LabelWorkerDone}, Worker: live(ModeRetro)},
			Decision{Action: ActionSkip}},

		// A live worker whose dispatch's tracker changes failed: finish them.
		{"todo/worker-done/live-implementer", Issue{Status: StatusTodo, Labels: []string{LabelWorkerDone}, Worker: live(ModeImplement)},
			Decision{Action: ActionSkip, MoveTo: StatusInProgress, RemoveLabels: []string{LabelWorkerDone}}},
		{"in-progress/worker-done/live-reviewer", Issue{Status: StatusInProgress, Labels: []string{LabelWorkerDone}, Worker: live(ModeReview)},
			Decision{Action: ActionSkip, MoveTo: StatusNeedsReview, RemoveLabels: []string{LabelWorkerDone}}},
		{"retro/worker-done/live-finisher", Issue{Status: StatusRetro, Labels: []string{LabelWorkerDone}, Worker: live(ModeFinish)},
			Decision{Action: ActionSkip, AddLabels: []string{LabelFinishing}}},
		{"retro/worker-done,worker-finishing/live-finisher", Issue{Status: StatusRetro, Labels: []string{LabelWorkerDone, LabelFinishing}, Worker: live(ModeFinish)},
			Decision{Action: ActionSkip}},
		{"todo/worker-done/live-planner", Issue{Status: StatusTodo, Labels: []string{LabelWorkerDone}, Worker: live(ModePlan)},
			Decision{Action: ActionSkip}},

		// Human-input labels.
		{"user-input-needed", Issue{Status: StatusInProgress, Labels: []string{LabelInputNeeded}, Worker: &Worker{Mode: ModeImplement, Blocked: true, Question: "Which DB?"}},
			Decision{Action: ActionSkip}},
		{"user-input-needed/no-worker", Issue{Status: StatusTodo, Labels: []string{LabelInputNeeded}},
			Decision{Action: ActionSkip}},
		{"blocked", Issue{Status: StatusInProgress, Worker: &Worker{Mode: ModeImplement, Blocked: true, Question: "Which DB?"}},
			Decision{Action: ActionEscalateBlocked, AddLabels: []string{LabelInputNeeded},
				Comment: "The implement agent asks: Which DB?\n\nAnswer in a comment (your words reach the agent as written), then add the label user-feedback-given."}},
		{"feedback-given", Issue{Status: StatusInProgress, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}, Feedback: "Postgres", Worker: &Worker{Mode: ModeImplement, Blocked: true}},
			Decision{Action: ActionRelayFeedback, Input: "Postgres", RemoveLabels: []string{LabelFeedbackGiven, LabelInputNeeded}}},
		// An agent in a turn (resumed after a crash, it will ask again)
		// gets the answer only at its prompt or its question: typed into
		// the turn, the Enter picked the question's first option (the
		// chaos run, seed 2).
		{"feedback-given/agent-working", Issue{Status: StatusTodo, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}, Feedback: "SQLite", Worker: &Worker{Mode: ModePlan, Agent: &api.Agent{State: api.AgentWorking}}},
			Decision{Action: ActionSkip}},
		{"feedback-given/agent-starting", Issue{Status: StatusTodo, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}, Feedback: "SQLite", Worker: &Worker{Mode: ModePlan, Agent: &api.Agent{State: api.AgentStarting}}},
			Decision{Action: ActionSkip}},
		{"feedback-given/agent-asks", Issue{Status: StatusTodo, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}, Feedback: "SQLite", Worker: &Worker{Mode: ModePlan, Blocked: true, Agent: &api.Agent{State: api.AgentWaitingAnswer}}},
			Decision{Action: ActionRelayFeedback, Input: "SQLite", RemoveLabels: []string{LabelFeedbackGiven, LabelInputNeeded}}},
		{"feedback-given/agent-idle", Issue{Status: StatusTodo, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}, Feedback: "SQLite", Worker: &Worker{Mode: ModePlan, Agent: &api.Agent{State: api.AgentIdle}}},
			Decision{Action: ActionRelayFeedback, Input: "SQLite", RemoveLabels: []string{LabelFeedbackGiven, LabelInputNeeded}}},
		// The agent that asked is gone: its phase's worker is resumed, the
		// labels stay, and the next tick relays the answer to it.
		{"feedback-given/no-worker", Issue{Status: StatusInProgress, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}, Feedback: "Postgres"},
			Decision{Action: ActionResumeImplementer, Mode: ModeImplement}},
		{"feedback-given/todo/worker-done/no-worker", Issue{Status: StatusTodo, Labels: []string{LabelWorkerDone, LabelFeedbackGiven}, Feedback: "Postgres"},
			Decision{Action: ActionDispatchImplementer, Mode: ModeImplement, MoveTo: StatusInProgress, RemoveLabels: []string{LabelWorkerDone}}},
		{"feedback-given/no-worker/failed-implementer", Issue{Status: StatusInProgress, Labels: []string{LabelFeedbackGiven}, Feedback: "Postgres", Failed: failedIn(ModeImplement)},
			Decision{Action: ActionSkip}},
		{"feedback-given/backlog/no-worker", Issue{Status: "Backlog", Labels: []string{LabelFeedbackGiven}, Feedback: "ok"},
			Decision{Action: ActionSkip}},

		// A mode whose worker systemd gave up on is not started again (that
		// would reset the start limit); other modes are.
		{"todo/failed-planner", Issue{Status: StatusTodo, Failed: failedIn(ModePlan)},
			Decision{Action: ActionSkip}},
		{"todo/worker-done/failed-planner", Issue{Status: StatusTodo, Labels: []string{LabelWorkerDone}, Failed: failedIn(ModePlan)},
			Decision{Action: ActionDispatchImplementer, Mode: ModeImplement, MoveTo: StatusInProgress, RemoveLabels: []string{LabelWorkerDone}}},
		{"needs-review/changes-requested/failed-implementer", Issue{Status: StatusNeedsReview, Labels: []string{LabelWorkerDone}, Review: ReviewChangesRequested, Failed: failedIn(ModeImplement)},
			Decision{Action: ActionSkip}},
		{"retro/failed-planner-and-reviewer", Issue{Status: StatusRetro, Failed: append(failedIn(ModePlan), failedIn(ModeReview)...)},
			Decision{Action: ActionResumeImplementer, Mode: ModeRetro}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.issue.ID = "DEMO-1"
			tt.want.Issue = "DEMO-1"
			got := Decide(State{Issues: []Issue{tt.issue}})
			if len(got) != 1 {
				t.Fatalf("Decide(%+v) returned %d decisions; want 1", tt.issue, len(got))
			}
			if got[0].Reason == "" {
				t.Errorf("Decide(%+v).Reason is empty; every decision explains itself", tt.issue)
			}
			if diff := cmp.Diff(tt.want, got[0], cmpopts.IgnoreFields(Decision{}, "Reason")); diff != "" {
				t.Errorf("Decide(%+v) mismatch (-want +got):\n%s", tt.issue, diff)
			}
		})
	}
}

func TestDecideLabelReviews(t *testing.T) {
	is := Issue{ID: "DEMO-1", Status: StatusNeedsReview, Labels: []string{LabelWorkerDone}}
	got := Decide(State{LabelReviews: true, Issues: []Issue{is}})[0]
	want := Decision{Issue: "DEMO-1", Action: ActionDispatchReviewer, Mode: ModeReview, RemoveLabels: []string{LabelWorkerDone}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Decision{}, "Reason")); diff != "" {
		t.Errorf("Decide(local reviews, %+v) (-want +got):\n%s", is, diff)
	}
	// With pull-request labels too: the reviewer adds the outcome before
	// worker-done, and with no reviewer live a missing one never comes.
	got = Decide(State{Issues: []Issue{is}})[0]
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Decision{}, "Reason")); diff != "" {
		t.Errorf("Decide(PR reviews, %+v) (-want +got):\n%s", is, diff)
	}
}

func TestDecideWIPLimit(t *testing.T) {
	s := State{WIPLimit: 1, Issues: []Issue{
		{ID: "A-1", Status: StatusTodo},
		{ID: "A-2", Status: StatusTodo},
		{ID: "A-3", Status: StatusNeedsReview}, // reviewers do not count
		{ID: "A-4", Status: StatusRetro, Labels: []string{LabelWorkerDone}},
	}}
	got := actions(Decide(s))
	want := []Action{ActionDispatchPlanner, ActionSkip, ActionDispatchReviewer, ActionSkip}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decide with WIP limit 1 (-want +got):\n%s", diff)
	}

	// A live code worker uses the only slot; a live reviewer does not.
	s.Issues[0].Worker = live(ModePlan)
	s.Issues[2].Worker = live(ModeReview)
	got = actions(Decide(s))
	want = []Action{ActionSkip, ActionSkip, ActionSkip, ActionSkip}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decide with a live planner (-want +got):\n%s", diff)
	}

	s.WIPLimit = 0 // unlimited
	s.Issues[0].Worker, s.Issues[2].Worker = nil, nil
	got = actions(Decide(s))
	want = []Action{ActionDispatchPlanner, ActionDispatchPlanner, ActionDispatchReviewer, ActionDispatchFinisher}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decide without WIP limit (-want +got):\n%s", diff)
	}
}

func TestDecideIsIdempotent(t *testing.T) {
	s := State{WIPLimit: 2, Issues: []Issue{
		{ID: "A-1", Status: StatusTodo},
		{ID: "A-2", Status: StatusInProgress, Labels: []string{LabelWorkerDone}},
		{ID: "A-3", Status: StatusNeedsReview, Labels: []string{LabelWorkerDone}, Review: ReviewApproved},
		{ID: "A-4", Status: StatusInProgress, Worker: &Worker{Mode: ModeImplement, Blocked: true, Question: "?"}},
	}}
	first := Decide(s)
	second := Decide(s)
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("Decide twice on the same state differs (-first +second):\n%s", diff)
	}
}

func actions(ds []Decision) []Action {
	out := make([]Action, len(ds))
	for i, d := range ds {
		out[i] = d.Action
	}
	return out
}

// TestDecideFeedbackAfterUnfinished: a human answers the escalation of a
// finisher that ended without closing the issue with user-feedback-given
// instead of removing the labels. No worker is live to relay it to and the
// phase starts none, so the escalation is repeated (saying how to go on)
// and the answer is taken as read, or it would repeat on every tick.
func TestDecideFeedbackAfterUnfinished(t *testing.T) {
	is := Issue{ID: "DEMO-1", Status: StatusRetro, Labels: []string{LabelWorkerDone, LabelFinishing, LabelInputNeeded, LabelFeedbackGiven}, Feedback: "ok",
		Completed: map[Mode]time.Time{ModeFinish: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}}
	got := Decide(State{Issues: []Issue{is}})[0]
	want := escalateUnfinished(Decision{Issue: "DEMO-1"}, is)
	want.RemoveLabels = []string{LabelFeedbackGiven}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Decision{}, "Reason")); diff != "" {
		t.Errorf("Decide(%+v) (-want +got):\n%s", is, diff)
	}
}

// TestDecideAgentStates covers the live agent's states from its hooks:
// a finished phase is ended, a turn that ended unfinished is escalated
// after the grace, and every wait for a human is escalated with what is
// awaited and answered as the human wrote it.
func TestDecideAgentStates(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	agent := func(a api.Agent) *Worker { return &Worker{Mode: ModeImplement, Session: "DEMO-1-implement", Agent: &a} }
	reset := now.Add(90 * time.Minute)
	tests := []struct {
		name  string
		issue Issue
		want  Decision
	}{
		{"done-finisher-idle", Issue{Status: StatusDone, Worker: &Worker{Mode: ModeFinish, Session: "DEMO-1-finish", Agent: &api.Agent{State: api.AgentIdle, Since: now}}},
			Decision{Action: ActionEndWorker}},
		{"done-permission-waits", Issue{Status: StatusDone, Worker: &Worker{Mode: ModeImplement, Session: "DEMO-1-implement", Agent: &api.Agent{State: api.AgentWaitingPermission, Since: now, Tool: "Bash"}}},
			Decision{Action: ActionEndWorker}},
		{"done-finisher-working", Issue{Status: StatusDone, Worker: &Worker{Mode: ModeFinish, Session: "DEMO-1-finish", Agent: &api.Agent{State: api.AgentWorking, Since: now}}},
			Decision{Action: ActionNone}},
		{"working", Issue{Status: StatusInProgress, Worker: agent(api.Agent{State: api.AgentWorking, Since: now.Add(-time.Hour)})},
			Decision{Action: ActionSkip}},
		{"done-and-idle", Issue{Status: StatusInProgress, Labels: []string{LabelWorkerDone}, Worker: agent(api.Agent{State: api.AgentIdle, Since: now})},
			Decision{Action: ActionEndWorker}},
		// The finisher moved the issue to Done itself; its turn ended.
		{"issue-done-and-idle", Issue{Status: StatusDone, Worker: agent(api.Agent{State: api.AgentIdle, Since: now})},
			Decision{Action: ActionEndWorker}},
		{"issue-done-working", Issue{Status: StatusDone, Worker: agent(api.Agent{State: api.AgentWorking, Since: now})},
			Decision{Action: ActionNone}},
		{"issue-done-idle-subagent", Issue{Status: StatusDone, Worker: agent(api.Agent{State: api.AgentIdle, Since: now, BackgroundTasks: 1})},
			Decision{Action: ActionNone}},
		{"done-working", Issue{Status: StatusInProgress, Labels: []string{LabelWorkerDone}, Worker: agent(api.Agent{State: api.AgentWorking, Since: now})},
			Decision{Action: ActionSkip}},
		{"done-idle-subagent", Issue{Status: StatusInProgress, Labels: []string{LabelWorkerDone}, Worker: agent(api.Agent{State: api.AgentIdle, Since: now, BackgroundTasks: 2})},
			Decision{Action: ActionSkip}},
		{"idle-within-grace", Issue{Status: StatusInProgress, Worker: agent(api.Agent{State: api.AgentIdle, Since: now.Add(-10 * time.Second), LastMessage: "Shall I?"})},
			Decision{Action: ActionSkip}},
		{"idle-past-grace", Issue{Status: StatusInProgress, Worker: agent(api.Agent{State: api.AgentIdle, Since: now.Add(-time.Minute), LastMessage: "Shall I go on\nwith the parser?"})},
			Decision{Action: ActionEscalateIdle, AddLabels: []string{LabelInputNeeded},
				Comment: "The implement agent stopped without finishing its phase (no worker-done) and says:\n\n    Shall I go on\n    with the parser?\n\n" +
					"Answer in a comment, then add the label user-feedback-given: your comment becomes its next prompt."}},
		{"permission", Issue{Status: StatusInProgress, Worker: func() *Worker {
			// The helper reports a permission wait as waiting_input too.
			w := agent(api.Agent{State: api.AgentWaitingPermission, Since: now, Tool: "Bash", Command: "rm -rf build"})
			w.Blocked, w.Question = true, "permission to use Bash: rm -rf build"
			return w
		}()},
			Decision{Action: ActionEscalatePermission, AddLabels: []string{LabelInputNeeded},
				Comment: "The implement agent asks permission to use Bash:\n\n    rm -rf build\n\n" +
					"Reply with a comment starting with `approve` to let it, or `deny` and why (anything else is a denial with your comment as the agent's instructions), then add the label user-feedback-given."}},
		{"permission-approved", Issue{Status: StatusInProgress, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}, Feedback: "Approve.", FeedbackBy: "ana",
			Worker: agent(api.Agent{State: api.AgentWaitingPermission, Since: now, Tool: "Bash", Command: "rm -rf build"})},
			Decision{Action: ActionRelayFeedback, Permission: api.DecisionAllow, InputBy: "ana", RemoveLabels: []string{LabelFeedbackGiven, LabelInputNeeded}}},
		{"permission-denied", Issue{Status: StatusInProgress, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}, Feedback: "deny: use make clean", FeedbackBy: "ana",
			Worker: agent(api.Agent{State: api.AgentWaitingPermission, Since: now, Tool: "Bash", Command: "rm -rf build"})},
			Decision{Action: ActionRelayFeedback, Permission: api.DecisionDeny, Input: "use make clean", InputBy: "ana", RemoveLabels: []string{LabelFeedbackGiven, LabelInputNeeded}}},
		{"question", Issue{Status: StatusInProgress, Worker: agent(api.Agent{State: api.AgentWaitingAnswer, Since: now,
			Questions: []api.Question{{Question: "Which DB?", Options: []string{"Postgres", "SQLite"}}}})},
			Decision{Action: ActionEscalateBlocked, AddLabels: []string{LabelInputNeeded},
				Comment: "The implement agent asks: Which DB?\n- Postgres\n- SQLite\n\nAnswer in a comment (your words reach the agent as written), then add the label user-feedback-given."}},
		{"question-answered", Issue{Status: StatusInProgress, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}, Feedback: "MySQL, really", FeedbackBy: "ana",
			Worker: agent(api.Agent{State: api.AgentWaitingAnswer, Since: now})},
			Decision{Action: ActionRelayFeedback, Input: "MySQL, really", InputBy: "ana", RemoveLabels: []string{LabelFeedbackGiven, LabelInputNeeded}}},
		{"rate-limited", Issue{Status: StatusInProgress, Worker: agent(api.Agent{State: api.AgentAPIError, Since: now, Error: "rate limited (429)", ResetAt: &reset})},
			Decision{Action: ActionEscalateAPIError, AddLabels: []string{LabelInputNeeded},
				Comment: "The implement agent's turn failed at the model's API: rate limited (429). The limit lifts at 2026-11-24T13:30:00Z. " +
					"It is not restarted (that would fail the same way).\n\nWhen it can go on, comment what it should do next (for instance `continue`), " +
					"then add the label user-feedback-given: your comment becomes its next prompt."}},
		{"rate-limited-blocked", Issue{Status: StatusInProgress, Worker: func() *Worker {
			// The helper reports an API failure as waiting_input too.
			w := agent(api.Agent{State: api.AgentAPIError, Since: now, Error: "rate_limit: API Error: Request rejected (429)"})
			w.Blocked, w.Question = true, "its turn failed at the API: rate_limit: API Error: Request rejected (429)"
			return w
		}()},
			Decision{Action: ActionEscalateAPIError, AddLabels: []string{LabelInputNeeded},
				Comment: "The implement agent's turn failed at the model's API: rate_limit: API Error: Request rejected (429). " +
					"It is not restarted (that would fail the same way).\n\nWhen it can go on, comment what it should do next (for instance `continue`), " +
					"then add the label user-feedback-given: your comment becomes its next prompt."}},
		{"rate-limited-escalated", Issue{Status: StatusInProgress, Labels: []string{LabelInputNeeded}, Worker: agent(api.Agent{State: api.AgentAPIError, Since: now})},
			Decision{Action: ActionSkip}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.issue.ID = "DEMO-1"
			tt.want.Issue = "DEMO-1"
			got := Decide(State{Issues: []Issue{tt.issue}, Now: now, IdleGrace: 30 * time.Second})[0]
			if got.Reason == "" {
				t.Errorf("Decide(%+v).Reason is empty; every decision explains itself", tt.issue)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Decision{}, "Reason")); diff != "" {
				t.Errorf("Decide(%+v) mismatch (-want +got):\n%s", tt.issue, diff)
			}
		})
	}
}

func TestPermissionDecision(t *testing.T) {
	for _, tt := range []struct{ comment, decision, message string }{
		{"approve", api.DecisionAllow, ""},
		{"Approved. Go ahead", api.DecisionAllow, "Go ahead"},
		{"yes", api.DecisionAllow, ""},
		{"deny", api.DecisionDeny, ""},
		{"Deny: use make clean", api.DecisionDeny, "use make clean"},
		{"no - not on main", api.DecisionDeny, "not on main"},
		{"Use make clean instead", api.DecisionDeny, "Use make clean instead"},
		{"  ", api.DecisionDeny, ""},
	} {
		d, m := PermissionDecision(tt.comment)
		if d != tt.decision || m != tt.message {
			t.Errorf("PermissionDecision(%q) = %q, %q; want %q, %q", tt.comment, d, m, tt.decision, tt.message)
		}
	}
}
