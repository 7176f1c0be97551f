package github

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github/githubtest"
)

// TestTrackerWritesUnderFaults: every write Legion makes to an issue
// takes effect once, whatever GitHub does to its answer: a comment whose
// answer was lost (or held until the client gave up, having been posted)
// is not posted again, and one that was not posted is; labels and moves
// are retried until they take effect. Before, a comment whose answer was
// lost or that met a 5xx failed with ErrUncertain (its caller sending it
// again would post it twice), and a label Legion created whose answer
// was lost failed AddLabel and Move.
func TestTrackerWritesUnderFaults(t *testing.T) {
	for _, c := range []struct {
		name   string
		inject func(s *githubtest.Server)
	}{
		{"lost answer", func(s *githubtest.Server) { s.LoseAnswers(1) }},
		{"stalled, carried out", func(s *githubtest.Server) { s.Stall(true) }},
		{"stalled, not carried out", func(s *githubtest.Server) { s.Stall(false) }},
		{"502", func(s *githubtest.Server) { s.Inject(githubtest.ServerError(502)) }},
		{"503 twice", func(s *githubtest.Server) { s.Inject(githubtest.ServerError(503), githubtest.ServerError(503)) }},
		{"secondary rate limit", func(s *githubtest.Server) {
			s.Inject(githubtest.RateLimitReply(429, true, time.Second, time.Now()))
		}},
		{"primary rate limit", func(s *githubtest.Server) {
			s.Inject(githubtest.RateLimitReply(403, false, time.Second, time.Now()))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c0, srv := newTest(t, func(o *Options) { o.HTTPClient = &http.Client{Timeout: 500 * time.Millisecond} })
			tr, err := c0.Tracker(TrackerOptions{Prefix: "WEB"})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			n := srv.AddIssue("Greet", "legion")
			id := tr.ID(n)
			if _, err := tr.Issues(ctx); err != nil {
				t.Fatal(err)
			}
			// The fault meets each kind of write in turn.
			c.inject(srv)
			if err := tr.Comment(ctx, id, "The plan agent asks: hello or hi?"); err != nil {
				t.Errorf("Comment: %v; want it posted, once", err)
			}
			c.inject(srv)
			if err := tr.AddLabel(ctx, id, controller.LabelWorkerDone); err != nil {
				t.Errorf("AddLabel: %v", err)
			}
			c.inject(srv)
			if err := tr.Move(ctx, id, controller.StatusInProgress); err != nil {
				t.Errorf("Move: %v", err)
			}
			c.inject(srv)
			if err := tr.RemoveLabel(ctx, id, controller.LabelWorkerDone); err != nil {
				t.Errorf("RemoveLabel: %v", err)
			}
			is, _ := srv.Issue(n)
			posted := 0
			for _, cm := range is.Comments {
				if strings.HasPrefix(cm.Body, "The plan agent asks") {
					posted++
				}
			}
			if posted != 1 {
				t.Errorf("the comment was posted %d times; want once", posted)
			}
			if got := srv.IssueLabels(n); strings.Join(got, ",") != "legion,legion:in-progress" {
				t.Errorf("labels = %q; want legion and the status In Progress's", got)
			}
			t.Logf("writes: %+v", srv.Writes())
		})
	}
}
