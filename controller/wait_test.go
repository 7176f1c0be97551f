package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/activation/api"
)

// TestWaits: a tick's waits are its own escalations (New, with the
// comment it posted), the issues escalated before it (Legion's newest
// comment and its time), and failed workers; an answered issue waits no
// more. An escalation keeps its Key across both views, so the notifier
// sees one wait.
func TestWaits(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	asked := now.Add(-time.Hour)
	st := State{Now: now, Issues: []Issue{
		{ID: "A-1", Title: "asks", Status: StatusInProgress, Worker: &Worker{Mode: ModeImplement, Blocked: true, Question: "which?"}},
		{ID: "A-2", Title: "escalated", Status: StatusInProgress, Labels: []string{LabelInputNeeded},
			Worker: &Worker{Mode: ModeImplement, Agent: &api.Agent{State: api.AgentWaitingPermission, Tool: "Bash"}}},
		{ID: "A-3", Title: "answered", Status: StatusInProgress, Labels: []string{LabelInputNeeded, LabelFeedbackGiven}},
		{ID: "A-4", Title: "failed", Status: StatusTodo, Failed: []FailedWorker{{Mode: ModePlan, Unit: "u-plan.service", Cause: "start limit"}}},
		{ID: "A-5", Title: "done", Status: StatusDone, Labels: []string{LabelInputNeeded}},
	}}
	tracked := []TrackedIssue{{ID: "A-2", Comments: []Comment{
		{Author: AuthorLegion, Text: "old", Time: asked.Add(-time.Hour)},
		{Author: AuthorLegion, Text: "may it run Bash?", Time: asked},
		{Author: "ann", Text: "hm", Time: asked.Add(time.Minute)},
	}}}
	applied := []Decision{
		{Issue: "A-1", Action: ActionEscalateBlocked, Comment: "The implement agent asks: which?", AddLabels: []string{LabelInputNeeded}},
		{Issue: "A-3", Action: ActionRelayFeedback, RemoveLabels: []string{LabelFeedbackGiven, LabelInputNeeded}},
	}
	got := waits(st, tracked, applied)
	for i := range got {
		if len(got[i].AskedHash) != 64 {
			t.Errorf("wait %s: AskedHash %q; want 64 hex digits", got[i].Key, got[i].AskedHash)
		}
		got[i].AskedHash = ""
	}
	want := []Wait{
		{Key: "A-1/input", Issue: "A-1", Title: "asks", Kind: WaitQuestion, Asked: "The implement agent asks: which?", Since: now, New: true},
		{Key: "A-2/input", Issue: "A-2", Title: "escalated", Kind: WaitPermission, Asked: "may it run Bash?", Since: asked},
		{Key: "A-4/failed:u-plan.service", Issue: "A-4", Title: "failed", Kind: WaitFailed,
			Asked: "The plan worker failed for good (start limit). See `journalctl --user -u 'u-plan.service'`, then `systemctl --user reset-failed 'u-plan.service'` lets Legion start it again.",
			Since: now},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits(...) mismatch (-want +got):\n%s", diff)
	}
}
