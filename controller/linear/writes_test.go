package linear

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/linear/lineartest"
)

// TestMoveResolvesStatesOnce: the team's states are queried once per
// client, however many moves follow.
func TestMoveResolvesStatesOnce(t *testing.T) {
	c, srv := newTest(t, func(o *Options) {
		o.Statuses = map[controller.Status]string{controller.StatusNeedsReview: "In Review"}
	})
	srv.Lock()
	srv.States = append(srv.States, lineartest.State{ID: "st-inreview", Name: "In Review", Type: "started"})
	srv.Unlock()
	srv.AddIssue("a", "Todo")
	b := srv.AddIssue("b", "Todo")
	if _, err := c.Issues(t.Context()); err != nil {
		t.Fatalf("Issues: %v", err)
	}
	for _, mv := range []struct {
		id        string
		to        controller.Status
		wantState string
	}{
		{"ENG-1", controller.StatusInProgress, "In Progress"},
		{"ENG-2", controller.StatusNeedsReview, "In Review"},
		{"ENG-1", controller.StatusInProgress, "In Progress"}, // idempotent
		{"eng-1", controller.StatusRetro, "Retro"},
		{"ENG-2", "Backlog", "Backlog"}, // statuses Legion does not act on pass through
	} {
		if err := c.Move(t.Context(), mv.id, mv.to); err != nil {
			t.Fatalf("Move(%s, %s): %v", mv.id, mv.to, err)
		}
		is := srv.Issue(mv.id)
		if got := srv.StateName(is.StateID); got != mv.wantState {
			t.Errorf("after Move(%s, %s) the state is %q; want %q", mv.id, mv.to, got, mv.wantState)
		}
	}
	if n := srv.Calls("LegionTeam"); n != 1 {
		t.Errorf("team queries = %d; want 1", n)
	}
	if n := srv.Calls("LegionMove"); n != 5 {
		t.Errorf("moves sent = %d; want 5", n)
	}
	// Moves address issues by the UUID the last Issues saw.
	if got := srv.LastVariables("LegionMove")["id"]; got != b.ID {
		t.Errorf("LegionMove id = %v; want the UUID %s", got, b.ID)
	}
}

func TestMoveUnknownState(t *testing.T) {
	c, srv := newTest(t, func(o *Options) {
		o.Statuses = map[controller.Status]string{controller.StatusRetro: "Retrospective"}
	})
	srv.AddIssue("a", "Todo")
	err := c.Move(t.Context(), "ENG-1", controller.StatusRetro)
	if err == nil {
		t.Fatal("Move to an unmapped state succeeded")
	}
	for _, want := range []string{`no workflow state "Retrospective"`, "Backlog, Todo, In Progress", "status names"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Move() error = %q; want it to mention %q", err, want)
		}
	}
	if n := srv.Calls("LegionMove"); n != 0 {
		t.Errorf("moves sent = %d; want 0", n)
	}
}

func TestMoveUnknownIssue(t *testing.T) {
	c, _ := newTest(t, nil)
	err := c.Move(t.Context(), "ENG-99", controller.StatusDone)
	if !errors.Is(err, controller.ErrIssueNotFound) {
		t.Errorf("Move(ENG-99) error = %v; want ErrIssueNotFound", err)
	}
	err = c.Comment(t.Context(), "ENG-99", "hello")
	if !errors.Is(err, controller.ErrIssueNotFound) {
		t.Errorf("Comment(ENG-99) error = %v; want ErrIssueNotFound", err)
	}
}

func TestUnknownTeam(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.Team = "NOPE" })
	srv.AddIssue("a", "Todo")
	err := c.Move(t.Context(), "ENG-1", controller.StatusDone)
	if err == nil || !strings.Contains(err.Error(), `no team with key "NOPE"`) {
		t.Errorf("Move() error = %v; want it to name the missing team", err)
	}
}

func TestLabels(t *testing.T) {
	c, srv := newTest(t, nil)
	srv.AddLabel("bug", "")                        // a workspace label
	other := srv.AddLabel("worker-done", "team-x") // another team's: unusable here
	is := srv.AddIssue("a", "Todo")
	srv.AddIssue("b", "Todo")

	// A missing protocol label is created in the team, once.
	if err := c.AddLabel(t.Context(), "ENG-1", controller.LabelWorkerDone); err != nil {
		t.Fatalf("AddLabel: %v", err)
	}
	if err := c.AddLabel(t.Context(), "ENG-2", controller.LabelWorkerDone); err != nil {
		t.Fatalf("AddLabel: %v", err)
	}
	if err := c.AddLabel(t.Context(), "ENG-1", controller.LabelWorkerDone); err != nil { // idempotent
		t.Fatalf("AddLabel again: %v", err)
	}
	if n := srv.Calls("LegionCreateLabel"); n != 1 {
		t.Errorf("labels created = %d; want 1", n)
	}
	if n := srv.Calls("LegionLabel"); n != 1 {
		t.Errorf("label lookups = %d; want 1 (cached)", n)
	}
	if id := srv.LastVariables("LegionAddLabel")["labelId"]; id == other.ID {
		t.Errorf("AddLabel used another team's label %s", other.ID)
	}
	if diff := cmp.Diff([]string{"worker-done"}, srv.LabelNames(is)); diff != "" {
		t.Errorf("labels of ENG-1 (-want +got):\n%s", diff)
	}

	// An existing workspace label is used, not created.
	if err := c.AddLabel(t.Context(), "ENG-1", "bug"); err != nil {
		t.Fatalf("AddLabel(bug): %v", err)
	}
	if n := srv.Calls("LegionCreateLabel"); n != 1 {
		t.Errorf("labels created = %d; want still 1", n)
	}
	// Any other missing label is an error, and nothing is created.
	err := c.AddLabel(t.Context(), "ENG-1", "urgent")
	if err == nil || !strings.Contains(err.Error(), `no label "urgent"`) {
		t.Errorf("AddLabel(urgent) error = %v; want one naming the missing label", err)
	}
	if err := c.AddLabel(t.Context(), "ENG-1", " spaced"); err == nil {
		t.Errorf("AddLabel with a bad name succeeded")
	}

	// Removal.
	if err := c.RemoveLabel(t.Context(), "ENG-1", controller.LabelWorkerDone); err != nil {
		t.Fatalf("RemoveLabel: %v", err)
	}
	if diff := cmp.Diff([]string{"bug"}, srv.LabelNames(is)); diff != "" {
		t.Errorf("labels of ENG-1 after removal (-want +got):\n%s", diff)
	}
	if err := c.RemoveLabel(t.Context(), "ENG-1", "no-such-label"); err != nil {
		t.Fatalf("RemoveLabel of a label that does not exist: %v", err)
	}
	if n := srv.Calls("LegionRemoveLabel"); n != 1 {
		t.Errorf("removals sent = %d; want 1 (none for a label that does not exist)", n)
	}
	if n := srv.Calls("LegionCreateLabel"); n != 1 {
		t.Errorf("RemoveLabel created a label")
	}
}

// TestRemoveLabelSkipsKnownAbsent: after a tick's Issues, removing a label
// the issue did not have sends nothing.
func TestRemoveLabelSkipsKnownAbsent(t *testing.T) {
	c, srv := newTest(t, nil)
	srv.AddIssue("a", "Todo", controller.LabelFeedbackGiven)
	if _, err := c.Issues(t.Context()); err != nil {
		t.Fatalf("Issues: %v", err)
	}
	before := srv.Calls("")
	// As relay_feedback does: remove both; only one is there.
	for _, l := range []string{controller.LabelFeedbackGiven, controller.LabelInputNeeded} {
		if err := c.RemoveLabel(t.Context(), "ENG-1", l); err != nil {
			t.Fatalf("RemoveLabel(%s): %v", l, err)
		}
	}
	if n := srv.Calls("") - before; n != 1 {
		t.Errorf("requests = %d; want 1 (the label id came with Issues; the absent label costs nothing)", n)
	}
	if got := srv.LabelNames(srv.Issue("ENG-1")); len(got) != 0 {
		t.Errorf("labels = %v; want none", got)
	}
}

func TestComment(t *testing.T) {
	c, srv := newTest(t, nil)
	is := srv.AddIssue("a", "Todo")
	if err := c.Comment(t.Context(), "ENG-1", "The plan agent asks: which database?\n"); err != nil {
		t.Fatalf("Comment: %v", err)
	}
	srv.Comment(is, "Grace Hopper", "Postgres.")
	if err := c.Comment(t.Context(), "ENG-1", "  "); err == nil {
		t.Error("Comment with empty text succeeded")
	}
	got, err := c.Issues(t.Context())
	if err != nil {
		t.Fatalf("Issues: %v", err)
	}
	want := []controller.Comment{
		{Author: controller.AuthorLegion, Text: "The plan agent asks: which database?"},
		{Author: "Grace Hopper", Text: "Postgres."},
	}
	if diff := cmp.Diff(want, got[0].Comments, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Time" }, cmp.Ignore())); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
}

// TestCommentAfterServerError: a comment is not sent again blindly after
// a server error (it may have been posted): the issue's newest comment is
// looked at, and only when it is not this one is the comment sent again.
// A rate limit is retried as before (Linear rejects before executing).
func TestCommentAfterServerError(t *testing.T) {
	c, srv := newTest(t, nil)
	srv.AddIssue("a", "Todo")
	srv.Inject(lineartest.Reply{Status: 502, Body: "bad gateway"})
	if err := c.Comment(t.Context(), "ENG-1", "hi"); err != nil {
		t.Errorf("Comment after a 502: %v; want it found not posted, sent again and posted", err)
	}
	if n, m := srv.Calls("LegionComment"), srv.Calls("LegionIssueComments"); n != 2 || m != 1 {
		t.Errorf("comment requests = %d, lookups = %d; want 2 and 1", n, m)
	}
	srv.Inject(lineartest.Reply{Status: 429, Body: `{"errors":[{"message":"slow down","extensions":{"code":"RATELIMITED"}}]}`})
	if err := c.Comment(t.Context(), "ENG-1", "ho"); err != nil {
		t.Errorf("Comment after a rate limit: %v", err)
	}
	if n := srv.Calls("LegionIssueComments"); n != 1 {
		t.Errorf("lookups = %d; want still 1 (a rate limit is retried without one)", n)
	}
	if got := len(srv.Issue("ENG-1").Comments); got != 2 {
		t.Errorf("comments posted = %d; want 2", got)
	}
	// Linear keeps failing: the comment is sent commentAttempts times,
	// never posted twice, and the error says what happened.
	for range 2 * commentAttempts {
		srv.Inject(lineartest.Reply{Status: 503, Body: "unavailable"})
	}
	err := c.Comment(t.Context(), "ENG-1", "hey")
	if err == nil || !strings.Contains(err.Error(), "may have taken effect") {
		t.Errorf("Comment while Linear fails = %v; want the error", err)
	}
}

func TestLoadAPIKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# my Linear key\n\nlin_api_FROMFILE\n", 0o600)
	loose := write("loose", "lin_api_LOOSE\n", 0o644)
	empty := write("empty", "", 0o600)
	comments := write("comments", "# nothing\n", 0o600)
	missing := filepath.Join(dir, "missing")

	for _, tc := range []struct {
		name, env, file, want, wantErr string
	}{
		{"env wins", "lin_api_ENV", good, "lin_api_ENV", ""},
		{"file", "", good, "lin_api_FROMFILE", ""},
		{"neither", "", missing, "", "no API key: set $" + testEnv + " or write the key to " + missing},
		{"neither, no file", "", "", "", "no API key: set $" + testEnv + " or configure a credentials file"},
		{"loose file", "", loose, "", "mode 0644"},
		{"empty file", "", empty, "", "is empty"},
		{"only comments", "", comments, "", "has no key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(testEnv, tc.env)
			got, err := LoadAPIKey(testEnv, tc.file)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadAPIKey() error = %v; want it to mention %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "LOOSE") {
					t.Errorf("LoadAPIKey() error %q contains the key", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("LoadAPIKey() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNewOptions(t *testing.T) {
	t.Setenv(testEnv, testKey)
	for _, tc := range []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no team", Options{APIKeyEnv: testEnv}, "no team"},
		{"page too big", Options{Team: "ENG", APIKeyEnv: testEnv, PageSize: 251}, "page size 251"},
		{"duplicate state", Options{Team: "ENG", APIKeyEnv: testEnv, Statuses: map[controller.Status]string{
			controller.StatusRetro: "Doing", controller.StatusInProgress: "Doing"}}, `"Doing" is mapped from both`},
		{"empty state", Options{Team: "ENG", APIKeyEnv: testEnv, Statuses: map[controller.Status]string{controller.StatusRetro: ""}}, "empty workflow state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New() error = %v; want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

var _ controller.Tracker = (*Client)(nil)

// TestLostAnswers: writes whose effect reached Linear but whose answer was
// lost (the connection dropped). The idempotent ones (move, label,
// unlabel) are sent again and succeed, leaving one effect; a label create
// whose answer was lost is found by looking the label up again; a comment
// is not sent again (a second one would be a duplicate): it is found
// posted, once.
func TestLostAnswers(t *testing.T) {
	c, srv := newTest(t, nil)
	srv.AddIssue("a", "Todo")
	ctx := t.Context()
	for _, w := range []struct {
		op   string
		lose int // answers lost: the label's create and the add itself
		do   func() error
	}{
		{"LegionMove", 1, func() error { return c.Move(ctx, "ENG-1", controller.StatusInProgress) }},
		{"LegionAddLabel", 2, func() error { return c.AddLabel(ctx, "ENG-1", controller.LabelWorkerDone) }},
		{"LegionRemoveLabel", 1, func() error { return c.RemoveLabel(ctx, "ENG-1", controller.LabelWorkerDone) }},
	} {
		before := srv.Calls(w.op)
		srv.LoseAnswers(w.lose)
		if err := w.do(); err != nil {
			t.Errorf("%s with its first answer lost: %v; want it sent again and done", w.op, err)
		}
		if n := srv.Calls(w.op) - before; n != 2 {
			t.Errorf("%s requests = %d; want 2 (the lost one, the retry)", w.op, n)
		}
	}
	is := srv.Issue("ENG-1")
	if got := srv.StateName(is.StateID); got != "In Progress" {
		t.Errorf("state = %q; want In Progress", got)
	}
	if got := srv.LabelNames(is); len(got) != 0 {
		t.Errorf("labels = %v; want none (added, then removed)", got)
	}
	srv.Lock()
	nLabels := len(srv.Labels)
	srv.Unlock()
	if nLabels != 1 {
		t.Errorf("labels in the team = %d; want 1 (worker-done, created once)", nLabels)
	}

	srv.LoseAnswers(1)
	if err := c.Comment(ctx, "ENG-1", "hi"); err != nil {
		t.Errorf("Comment with its answer lost = %v; want it found posted", err)
	}
	if n := srv.Calls("LegionComment"); n != 1 {
		t.Errorf("comment requests = %d; want 1", n)
	}
	if got := len(srv.Issue("ENG-1").Comments); got != 1 {
		t.Errorf("comments posted = %d; want 1", got)
	}
	var lost []string
	for _, w := range srv.Writes() {
		if w.Lost {
			lost = append(lost, w.Op)
		}
	}
	want := []string{"LegionMove", "LegionCreateLabel", "LegionAddLabel", "LegionRemoveLabel", "LegionComment"}
	if diff := cmp.Diff(want, lost); diff != "" {
		t.Errorf("writes with a lost answer (-want +got):\n%s", diff)
	}
}

// TestStalledRequests: a request the server holds past the client's
// timeout (lineartest's Stall) is sent again; a write the server carried
// out before it stalled is found done, not done twice (the comment is
// looked for first), and one it never carried out is done by the retry.
func TestStalledRequests(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.HTTPClient = &http.Client{Timeout: 200 * time.Millisecond} })
	srv.AddIssue("a", "Todo")
	ctx := t.Context()
	srv.Stall(false)
	if _, err := c.Issues(ctx); err != nil {
		t.Errorf("Issues after a stalled first request: %v; want it asked again", err)
	}
	srv.Stall(true)
	if err := c.Comment(ctx, "ENG-1", "plan of ENG-1"); err != nil {
		t.Errorf("Comment carried out but stalled: %v; want it found posted", err)
	}
	srv.Stall(false)
	if err := c.Move(ctx, "ENG-1", controller.StatusInProgress); err != nil {
		t.Errorf("Move stalled, never carried out: %v; want it sent again", err)
	}
	srv.Stall(true)
	if err := c.AddLabel(ctx, "ENG-1", controller.LabelWorkerDone); err != nil {
		t.Errorf("AddLabel with its first request carried out but stalled: %v", err)
	}
	is := srv.Issue("ENG-1")
	if got := len(is.Comments); got != 1 {
		t.Errorf("comments posted = %d; want 1", got)
	}
	if got := srv.StateName(is.StateID); got != "In Progress" {
		t.Errorf("state = %q; want In Progress", got)
	}
	if got := srv.LabelNames(is); !slices.Equal(got, []string{controller.LabelWorkerDone}) {
		t.Errorf("labels = %v; want [%s]", got, controller.LabelWorkerDone)
	}
	var lost []string
	for _, w := range srv.Writes() {
		if w.Lost {
			lost = append(lost, w.Op)
		}
	}
	want := []string{"LegionComment"} // AddLabel's first request is the labels query
	if diff := cmp.Diff(want, lost); diff != "" {
		t.Errorf("writes carried out with the answer stalled (-want +got):\n%s", diff)
	}
}
