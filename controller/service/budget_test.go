package service_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/internal/followmodel"
)

// TestFollowClaudeBudget: a quick-start team whose user then set a budget
// per issue (budget.issue_tokens, so low that the planner's first turn
// crosses it). The real Claude Code records what each response of the
// fake API used; Legion reads it from its session file, lets the planner
// finish its turn, then ends it and escalates the issue once, with the
// spend per phase; no implementer starts while it waits. A person adds
// budget-approved (and takes user-input-needed away), and the issue goes
// on to Done with no other escalation.
func TestFollowClaudeBudget(t *testing.T) {
	f := startFollowed(t, config.AgentClaude, followmodel.Traits{})
	f.configure("budget.issue_tokens = 1")
	ctx := followCtx(t)
	id := f.addIssue(ctx, "Greet the user")
	f.startController()

	var esc string
	for esc == "" {
		is := f.issue(ctx, id)
		if slices.Contains(is.Labels, controller.LabelInputNeeded) {
			for _, c := range escalations(is) {
				if strings.Contains(c, "budget") {
					esc = c
				}
			}
		}
		if esc == "" {
			select {
			case <-ctx.Done():
				t.Fatalf("%s was not escalated for its budget: %s %v", id, is.Status, is.Labels)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	t.Logf("escalation:\n%s", esc)
	if !strings.Contains(esc, "of its budget of 1 (budget.issue_tokens)") || !strings.Contains(esc, "- plan: ") || strings.Contains(esc, "- implement: ") {
		t.Errorf("the escalation does not give the spend against the budget, per phase (the planner's only):\n%s", esc)
	}
	// The planner ended cleanly (its conversation kept), and nothing else
	// started while the issue waits.
	planner := f.waitCompleted(ctx, id, controller.ModePlan)
	assertCompletedAnyCode(t, planner)
	time.Sleep(3 * time.Second) // a few controller ticks: nothing may start
	for _, s := range f.sessions(ctx) {
		if s.Issue == id && s.Mode != string(controller.ModePlan) {
			t.Errorf("a %s session started while %s waits over its budget: %+v", s.Mode, id, s)
		}
	}
	if got := escalations(f.issue(ctx, id)); len(got) != 1 {
		t.Errorf("%d escalations; want the budget's once: %q", len(got), got)
	}

	f.legion(ctx, "issue", "label", teamName, id, controller.LabelBudgetApproved)
	f.legion(ctx, "issue", "unlabel", teamName, id, controller.LabelInputNeeded)
	if n := f.waitDone(ctx, "hi", id); n != 0 {
		t.Errorf("answered %d waits after the approval; want none", n)
	}
	f.assertWholeCycle(ctx, id, 1)
	if is := f.issue(ctx, id); !slices.Contains(is.Labels, controller.LabelBudgetApproved) {
		t.Errorf("labels of the done issue %v; want budget-approved kept (a person's)", is.Labels)
	}
}
