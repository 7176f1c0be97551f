package controller_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
)

// failingComments is a local tracker whose next comments fail.
type failingComments struct {
	*local.Store
	fail int
}

func (f *failingComments) Comment(ctx context.Context, id, text string) error {
	if f.fail > 0 {
		f.fail--
		return errors.New("tracker unavailable")
	}
	return f.Store.Comment(ctx, id, text)
}

// TestApplyHoldsLabelsWhenCommentFails: an escalation whose comment
// fails adds no user-input-needed, so the next tick escalates again and
// the person gets the comment; with the label added alone, the issue
// would wait for a person who was never told what is asked (found while
// adding the chaos run's Linear 5xx fault, by reading Apply: a 502 on an
// escalation's comment).
func TestApplyHoldsLabelsWhenCommentFails(t *testing.T) {
	ctx := t.Context()
	st := local.Open(t.TempDir(), "DEMO")
	is, err := st.Add(ctx, "Ask")
	if err != nil {
		t.Fatal(err)
	}
	tr := &failingComments{Store: st, fail: 1}
	d := controller.Decision{Issue: is.ID, Action: controller.ActionEscalateBlocked,
		Comment: "The plan agent asks: which database?", AddLabels: []string{controller.LabelInputNeeded}}
	src := controller.Sources{Tracker: tr}
	if err := controller.Apply(ctx, src, &fakeAgents{}, d, controller.Issue{ID: is.ID, Status: controller.StatusTodo}); err == nil {
		t.Errorf("Apply with a failing comment succeeded; want its error")
	}
	got, _ := st.Issue(ctx, is.ID)
	if slices.Contains(got.Labels, controller.LabelInputNeeded) {
		t.Errorf("after the failed comment the labels are %v; want no %s without its comment", got.Labels, controller.LabelInputNeeded)
	}
	// The next tick applies the same decision.
	if err := controller.Apply(ctx, src, &fakeAgents{}, d, controller.Issue{ID: is.ID, Status: controller.StatusTodo}); err != nil {
		t.Fatalf("Apply again: %v", err)
	}
	got, _ = st.Issue(ctx, is.ID)
	if !slices.Contains(got.Labels, controller.LabelInputNeeded) || len(got.Comments) != 1 {
		t.Errorf("after the second Apply: labels %v, comments %v; want %s and the one comment", got.Labels, got.Comments, controller.LabelInputNeeded)
	}
}
