package github

import (
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github/githubtest"
)

func newProjectTracker(t *testing.T, po ProjectOptions) (*Tracker, *githubtest.Server) {
	t.Helper()
	c, srv := newTest(t, nil)
	tr, err := c.Tracker(TrackerOptions{Prefix: "WEB", Project: &po})
	if err != nil {
		t.Fatal(err)
	}
	return tr, srv
}

// TestProjectStatus: with a project, an issue's phase is its card's
// option in the project's field (not in the project: Todo), moves set the
// option (adding the issue to the project first) and Done closes the
// issue too; the status labels are left alone.
func TestProjectStatus(t *testing.T) {
	tr, srv := newProjectTracker(t, ProjectOptions{Number: 3, Options: map[controller.Status]string{controller.StatusNeedsReview: "In Review"}})
	p := srv.AddProject(3, "Roadmap", "Status", "Todo", "In Progress", "In Review", "Retro", "Done")
	ctx := t.Context()
	a := srv.AddIssue("In review", "legion")
	b := srv.AddIssue("Not on the board", "legion")
	srv.SetProjectStatus(p, a, "In Review")
	got, err := tr.Issues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Status != controller.StatusNeedsReview || got[1].Status != controller.StatusTodo {
		t.Errorf("statuses %s, %s; want Needs Review (the card's \"In Review\") and Todo (no card)", got[0].Status, got[1].Status)
	}
	if err := tr.Move(ctx, tr.ID(b), controller.StatusInProgress); err != nil {
		t.Fatal(err)
	}
	if st := srv.ProjectStatus(p, b); st != "In Progress" {
		t.Errorf("after Move(In Progress) the card says %q; want In Progress", st)
	}
	if err := tr.Move(ctx, tr.ID(b), controller.StatusDone); err != nil {
		t.Fatal(err)
	}
	is, _ := srv.Issue(b)
	if st := srv.ProjectStatus(p, b); st != "Done" || is.State != "CLOSED" {
		t.Errorf("after Move(Done): card %q, issue %s; want Done and closed", st, is.State)
	}
	if labels := srv.IssueLabels(b); len(labels) != 1 {
		t.Errorf("labels %q; want only the opt-in label (no status labels with a project)", labels)
	}
}

// TestProjectErrors: a project, field or option that is not there is an
// error naming it and what there is, at the first board.
func TestProjectErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		po   ProjectOptions
		want []string
	}{
		{"no project", ProjectOptions{Number: 9}, []string{"project 9 of legion-dev", "not found"}},
		{"no field", ProjectOptions{Number: 3, Field: "Phase"}, []string{`"Roadmap"`, `no single-select field "Phase"`}},
		{"no option", ProjectOptions{Number: 3}, []string{`no option "Needs Review" (Needs Review), "Retro" (Retro)`, `"Todo", "In Progress", "Done"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, srv := newProjectTracker(t, c.po)
			srv.AddProject(3, "Roadmap", "Status", "Todo", "In Progress", "Done")
			srv.AddIssue("x", "legion")
			_, err := tr.Issues(t.Context())
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Issues = %v; want an error with %q", err, w)
				}
			}
		})
	}
	c, _ := newTest(t, nil)
	for _, po := range []ProjectOptions{{Number: 0}, {Number: 1, Options: map[controller.Status]string{controller.StatusTodo: "Done"}}} {
		if _, err := c.Tracker(TrackerOptions{Prefix: "WEB", Project: &po}); err == nil {
			t.Errorf("Tracker(project %+v) = nil error; want a refusal", po)
		}
	}
}
