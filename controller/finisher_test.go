package controller_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
)

// TestFinisherEndsWithoutClosing: a finisher that exits with its issue
// still in Retro is escalated to a person once, and the retro is not run
// again. Before, the issue looked like a retro still to run, and the next
// tick resumed the implementer for the retro.
func TestFinisherEndsWithoutClosing(t *testing.T) {
	ctx := t.Context()
	tr := local.Open(t.TempDir(), "DEMO")
	is, err := tr.Add(ctx, "Add a parser")
	if err != nil {
		t.Fatal(err)
	}
	id := is.ID
	for _, step := range []func() error{
		func() error { return tr.Move(ctx, id, controller.StatusRetro) },
		func() error { return tr.AddLabel(ctx, id, controller.LabelWorkerDone) }, // the retro is done
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	agents := &fakeAgents{}
	labels := func() []string {
		t.Helper()
		cur, err := tr.Issue(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return cur.Labels
	}

	if got := tick(t, tr, agents, 0); got[0] != controller.ActionDispatchFinisher {
		t.Fatalf("retro done: %v; want dispatch_finisher", got)
	}
	if got := tick(t, tr, agents, 0); got[0] != controller.ActionSkip {
		t.Fatalf("finisher live: %v; want skip", got)
	}
	agents.finish(id) // it exits, the issue still in Retro
	if got := tick(t, tr, agents, 0); got[0] != controller.ActionEscalateUnfinished {
		t.Fatalf("finisher ended, issue open: %v; want escalate_unfinished", got)
	}
	if got := tick(t, tr, agents, 0); got[0] != controller.ActionSkip {
		t.Fatalf("after the escalation: %v; want skip until a person acts", got)
	}
	cur, _ := tr.Issue(ctx, id)
	if len(cur.Comments) != 1 || !slices.Contains(cur.Labels, controller.LabelInputNeeded) {
		t.Fatalf("after the escalation: comments %v, labels %v; want one comment and user-input-needed", cur.Comments, cur.Labels)
	}
	for _, part := range []string{"ended without closing", "legion worktree finish <team> " + id, "legion sessions logs " + id + "-finish", controller.LabelFinishing} {
		if !strings.Contains(cur.Comments[0].Text, part) {
			t.Errorf("escalation comment %q; want it to say %q", cur.Comments[0].Text, part)
		}
	}

	// The person runs the finisher again, as the comment says; this time
	// it closes the issue.
	for _, l := range []string{controller.LabelFinishing, controller.LabelInputNeeded} {
		if err := tr.RemoveLabel(ctx, id, l); err != nil {
			t.Fatal(err)
		}
	}
	if got := tick(t, tr, agents, 0); got[0] != controller.ActionDispatchFinisher {
		t.Fatalf("labels removed: %v (labels %v); want dispatch_finisher", got, labels())
	}
	if err := tr.Move(ctx, id, controller.StatusDone); err != nil {
		t.Fatal(err)
	}
	agents.finish(id)
	if got := tick(t, tr, agents, 0); got[0] != controller.ActionNone {
		t.Fatalf("done: %v; want none", got)
	}
	if diff := cmp.Diff([]string{"dispatch DEMO-1 finish", "dispatch DEMO-1 finish"}, agents.calls); diff != "" {
		t.Errorf("dispatches (-want +got):\n%s", diff)
	}
}

// TestFinisherCutByReboot: a finisher cut by a reboot (its unit and the
// helper's entry gone with the boot, no end recorded) is run again, as a
// cut worker of any other phase is, not escalated as one that ended
// without closing the issue. Before, the booted tier's chaos run
// (internal/systemtest's TestChaosReboots) found the issue waiting for a
// person after a reboot mid-finish.
func TestFinisherCutByReboot(t *testing.T) {
	ctx := t.Context()
	tr := local.Open(t.TempDir(), "DEMO")
	is, err := tr.Add(ctx, "Add a parser")
	if err != nil {
		t.Fatal(err)
	}
	id := is.ID
	if err := tr.Move(ctx, id, controller.StatusRetro); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddLabel(ctx, id, controller.LabelWorkerDone); err != nil { // the retro is done
		t.Fatal(err)
	}
	agents := &fakeAgents{}
	if got := tick(t, tr, agents, 0); got[0] != controller.ActionDispatchFinisher {
		t.Fatalf("retro done: %v; want dispatch_finisher", got)
	}
	agents.lose(id) // the reboot
	if got := tick(t, tr, agents, 0); got[0] != controller.ActionDispatchFinisher {
		t.Fatalf("finisher cut by a reboot: %v; want dispatch_finisher (run it again)", got)
	}
	agents.finish(id) // this one ends, the issue still in Retro
	if got := tick(t, tr, agents, 0); got[0] != controller.ActionEscalateUnfinished {
		t.Fatalf("finisher ended, issue open: %v; want escalate_unfinished", got)
	}
	if diff := cmp.Diff([]string{"dispatch DEMO-1 finish", "dispatch DEMO-1 finish"}, agents.calls); diff != "" {
		t.Errorf("dispatches (-want +got):\n%s", diff)
	}
}

// TestFinisherFailedForGood: a finisher systemd gave up on is escalated
// the same way, with its cause and the unit to reset.
func TestFinisherFailedForGood(t *testing.T) {
	unit := "legion-0123abcd-DEMO\\x2d1-finish.service"
	is := controller.Issue{ID: "DEMO-1", Status: controller.StatusRetro,
		Labels: []string{controller.LabelWorkerDone, controller.LabelFinishing},
		Failed: []controller.FailedWorker{{Mode: controller.ModeFinish, Session: "DEMO-1-finish", Unit: unit, Cause: "exec claude: not found"}}}
	d := controller.Decide(controller.State{Issues: []controller.Issue{is}})[0]
	if d.Action != controller.ActionEscalateUnfinished || !slices.Equal(d.AddLabels, []string{controller.LabelInputNeeded}) {
		t.Fatalf("Decide = %+v; want escalate_unfinished adding user-input-needed", d)
	}
	for _, part := range []string{"exec claude: not found", "reset-failed '" + unit + "'"} {
		if !strings.Contains(d.Comment, part) {
			t.Errorf("comment %q; want it to say %q", d.Comment, part)
		}
	}
}
