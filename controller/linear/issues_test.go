package linear

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/linear/lineartest"
)

const (
	testKey = "lin_api_TESTKEY0123456789"
	testEnv = "LEGION_TEST_LINEAR_API_KEY"
)

// newTest starts a fake Linear for team ENG and a client for it with tiny
// backoffs.
func newTest(t *testing.T, mod func(*Options)) (*Client, *lineartest.Server) {
	t.Helper()
	srv := lineartest.NewServer(t, testKey, "ENG")
	t.Setenv(testEnv, testKey)
	opts := Options{
		Team:      "ENG",
		APIKeyEnv: testEnv,
		Endpoint:  srv.URL,
		Retry:     Retry{Attempts: 4, Min: time.Millisecond, Max: 4 * time.Millisecond},
	}
	if mod != nil {
		mod(&opts)
	}
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, srv
}

func TestIssues(t *testing.T) {
	c, srv := newTest(t, func(o *Options) {
		o.Statuses = map[controller.Status]string{controller.StatusNeedsReview: "In Review"}
	})
	srv.Lock()
	srv.States = append(srv.States, lineartest.State{ID: "st-inreview", Name: "In Review", Type: "started"})
	srv.Unlock()
	srv.AddIssue("Plan the thing", "Todo")
	b := srv.AddIssue("Build the thing", "In Progress", "worker-done", "bug")
	srv.AddIssue("Review the thing", "In Review", "user-input-needed")
	srv.AddIssue("Old thing", "Done")
	srv.AddIssue("Dropped thing", "Canceled")
	srv.AddIssue("Someday", "Backlog")
	srv.Comment(b, "Grace Hopper", "Use the blue widget.")
	srv.Comment(b, "Ada Lovelace", "The implement agent asks: which widget?\n\n"+commentSignature)
	srv.Comment(b, "Grace Hopper", "The red one, sorry.")

	got, err := c.Issues(t.Context())
	if err != nil {
		t.Fatalf("Issues: %v", err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := []controller.TrackedIssue{
		{ID: "ENG-1", Title: "Plan the thing", Status: controller.StatusTodo, Labels: []string{}, Branch: "ada/eng-1"},
		{ID: "ENG-2", Title: "Build the thing", Status: controller.StatusInProgress, Labels: []string{"worker-done", "bug"}, Branch: "ada/eng-2",
			Comments: []controller.Comment{
				{Author: "Grace Hopper", Text: "Use the blue widget.", Time: t0.Add(1 * time.Minute)},
				{Author: controller.AuthorLegion, Text: "The implement agent asks: which widget?", Time: t0.Add(2 * time.Minute)},
				{Author: "Grace Hopper", Text: "The red one, sorry.", Time: t0.Add(3 * time.Minute)},
			}},
		{ID: "ENG-3", Title: "Review the thing", Status: controller.StatusNeedsReview, Labels: []string{"user-input-needed"}, Branch: "ada/eng-3"},
		{ID: "ENG-6", Title: "Someday", Status: "Backlog", Labels: []string{}, Branch: "ada/eng-6"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Issues() mismatch (-want +got):\n%s", diff)
	}
	if got[1].LatestHumanComment() != "The red one, sorry." {
		t.Errorf("LatestHumanComment() = %q; want the red one", got[1].LatestHumanComment())
	}
	if n := srv.Calls(""); n != 1 {
		t.Errorf("requests = %d; want 1 batched query", n)
	}
}

func TestIssuesIncludeClosed(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.IncludeClosed = true })
	srv.AddIssue("Open", "Todo")
	srv.AddIssue("Closed", "Done")
	got, err := c.Issues(t.Context())
	if err != nil {
		t.Fatalf("Issues: %v", err)
	}
	if len(got) != 2 || got[1].Status != controller.StatusDone {
		t.Errorf("Issues() = %+v; want both issues, the second Done", got)
	}
}

func TestIssuesCommentsLimit(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.Comments = 2 })
	is := srv.AddIssue("Chatty", "Todo")
	for i := range 6 {
		srv.Comment(is, "Grace Hopper", fmt.Sprintf("comment %d", i))
	}
	got, err := c.Issues(t.Context())
	if err != nil {
		t.Fatalf("Issues: %v", err)
	}
	var texts []string
	for _, cm := range got[0].Comments {
		texts = append(texts, cm.Text)
	}
	if diff := cmp.Diff([]string{"comment 4", "comment 5"}, texts); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
}

// TestIssuesPagination asserts one request per page, never one per issue.
func TestIssuesPagination(t *testing.T) {
	for _, tc := range []struct {
		issues, pageSize, wantRequests int
	}{
		{30, 12, 3},
		{30, 15, 2},
		{30, 50, 1},
		{0, 50, 1},
	} {
		t.Run(fmt.Sprintf("%d_by_%d", tc.issues, tc.pageSize), func(t *testing.T) {
			c, srv := newTest(t, func(o *Options) { o.PageSize = tc.pageSize })
			for i := range tc.issues {
				srv.AddIssue(fmt.Sprintf("issue %d", i+1), "Todo", "worker-done")
			}
			got, err := c.Issues(t.Context())
			if err != nil {
				t.Fatalf("Issues: %v", err)
			}
			if len(got) != tc.issues {
				t.Fatalf("Issues() returned %d issues; want %d", len(got), tc.issues)
			}
			for i, is := range got {
				if want := fmt.Sprintf("ENG-%d", i+1); is.ID != want {
					t.Errorf("Issues()[%d].ID = %s; want %s", i, is.ID, want)
				}
			}
			if n := srv.Calls(""); n != tc.wantRequests {
				t.Errorf("requests = %d; want %d (one per page)", n, tc.wantRequests)
			}
			// A second tick costs the same again: nothing per issue.
			if _, err := c.Issues(t.Context()); err != nil {
				t.Fatalf("Issues: %v", err)
			}
			if n := srv.Calls(""); n != 2*tc.wantRequests {
				t.Errorf("requests after two ticks = %d; want %d", n, 2*tc.wantRequests)
			}
		})
	}
}

func TestIssuesPaginationVariables(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.PageSize = 2 })
	for i := range 3 {
		srv.AddIssue(fmt.Sprintf("issue %d", i), "Todo")
	}
	var afters []any
	srv.OnCall(func(op string, _ int) { afters = append(afters, srv.LastVariables(op)["after"]) })
	if _, err := c.Issues(t.Context()); err != nil {
		t.Fatalf("Issues: %v", err)
	}
	if len(afters) != 2 || afters[0] != nil || afters[1] == nil {
		t.Errorf("after variables = %v; want [null, <cursor of page 1>]", afters)
	}
}

func TestIssuesRetry(t *testing.T) {
	past := fmt.Sprint(time.Now().Add(-time.Minute).UnixMilli())
	for _, tc := range []struct {
		name  string
		reply lineartest.Reply
	}{
		{"http 429", lineartest.Reply{Status: 429, Header: http.Header{"Retry-After": {"0"}}, Body: `{"errors":[{"message":"Too many requests"}]}`}},
		{"RATELIMITED code", lineartest.Reply{Status: 400,
			Header: http.Header{"X-Ratelimit-Requests-Remaining": {"0"}, "X-Ratelimit-Requests-Reset": {past}},
			Body:   `{"errors":[{"message":"Rate limit exceeded","extensions":{"code":"RATELIMITED","type":"ratelimited"}}],"data":null}`}},
		{"http 502", lineartest.Reply{Status: 502, Header: http.Header{"Content-Type": {"text/html"}}, Body: "<html>Bad Gateway</html>"}},
		{"http 503 twice", lineartest.Reply{Status: 503, Body: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, nil)
			srv.AddIssue("one", "Todo")
			n := 1
			if strings.HasSuffix(tc.name, "twice") {
				n = 2
			}
			for range n {
				srv.Inject(tc.reply)
			}
			got, err := c.Issues(t.Context())
			if err != nil {
				t.Fatalf("Issues: %v", err)
			}
			if len(got) != 1 {
				t.Errorf("Issues() = %v; want one issue", got)
			}
			if calls := srv.Calls(""); calls != n+1 {
				t.Errorf("requests = %d; want %d", calls, n+1)
			}
		})
	}
}

func TestIssuesRetryGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   lineartest.Reply
		wantIs  error
		wantReq int
	}{
		{"server errors", lineartest.Reply{Status: 500, Body: "oops"}, nil, 4},
		{"rate limited", lineartest.Reply{Status: 429, Body: "{}"}, ErrRateLimited, 4},
		{"asked to wait an hour", lineartest.Reply{Status: 429, Header: http.Header{"Retry-After": {"3600"}}, Body: "{}"}, ErrRateLimited, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, nil)
			for range 10 {
				srv.Inject(tc.reply)
			}
			_, err := c.Issues(t.Context())
			if err == nil {
				t.Fatal("Issues succeeded; want an error")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("Issues() error = %v; want %v", err, tc.wantIs)
			}
			if n := srv.Calls(""); n != tc.wantReq {
				t.Errorf("requests = %d; want %d", n, tc.wantReq)
			}
		})
	}
}

// TestRetryHonoursContext: a backoff in progress ends with the context.
func TestRetryHonoursContext(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.Retry.MaxWait = 2 * time.Hour })
	for range 10 {
		srv.Inject(lineartest.Reply{Status: 429, Header: http.Header{"Retry-After": {"3600"}}, Body: "{}"})
	}
	ctx, cancel := context.WithCancel(t.Context())
	srv.OnCall(func(string, int) { cancel() })
	_, err := c.Issues(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Issues() error = %v; want context.Canceled", err)
	}
	if n := srv.Calls(""); n != 1 {
		t.Errorf("requests = %d; want 1", n)
	}
}

func TestAuthFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply *lineartest.Reply // nil: the server rejects the wrong key itself
	}{
		{"wrong key", nil},
		{"http 401", &lineartest.Reply{Status: 401, Body: `{"errors":[{"message":"Unauthorized"}]}`}},
		{"http 403", &lineartest.Reply{Status: 403, Body: "forbidden"}},
		{"AUTHENTICATION_ERROR", &lineartest.Reply{Status: 200, Body: `{"errors":[{"message":"Authentication required, not authenticated","extensions":{"code":"AUTHENTICATION_ERROR"}}]}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, func(o *Options) { o.CredentialsFile = "/etc/legion/linear.key" })
			if tc.reply == nil {
				srv.Lock()
				srv.Key = "lin_api_someone_else"
				srv.Unlock()
			} else {
				srv.Inject(*tc.reply, *tc.reply)
			}
			_, err := c.Issues(t.Context())
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("Issues() error = %v; want ErrAuth", err)
			}
			const want = "linear: authentication failed: check the API key in $" + testEnv + " or /etc/legion/linear.key"
			if !strings.HasSuffix(err.Error(), want) {
				t.Errorf("Issues() error = %q; want it to end with %q", err, want)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("Issues() error %q contains the API key", err)
			}
			if n := srv.Calls(""); n != 1 {
				t.Errorf("requests = %d; want 1 (no retries on auth failure)", n)
			}
		})
	}
}

func TestMalformedResponse(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"invalid JSON", `{"data": {"issues": `, "invalid JSON"},
		{"HTML", `<html>maintenance</html>`, "want a JSON object"},
		{"no data", `{}`, "no data and no errors"},
		{"null data", `{"data": null}`, "no data and no errors"},
		{"missing issues", `{"data": {}}`, "want data.issues"},
		{"missing pageInfo", `{"data": {"issues": {"nodes": []}}}`, "want data.issues.pageInfo"},
		{"next page without cursor", `{"data": {"issues": {"nodes": [], "pageInfo": {"hasNextPage": true, "endCursor": null}}}}`, "no endCursor"},
		{"issue without identifier", `{"data": {"issues": {"nodes": [{"id": "x", "state": {"name": "Todo"}}], "pageInfo": {"hasNextPage": false}}}}`, "has no identifier"},
		{"issue without state", `{"data": {"issues": {"nodes": [{"id": "x", "identifier": "ENG-1"}], "pageInfo": {"hasNextPage": false}}}}`, "ENG-1 has no state"},
		{"wrong type", `{"data": {"issues": {"nodes": "many", "pageInfo": {}}}}`, "want data.issues"},
		{"bad time", `{"data": {"issues": {"nodes": [{"id": "x", "identifier": "ENG-1", "state": {"name": "Todo"}, "comments": {"nodes": [{"body": "hi", "createdAt": "yesterday"}]}}], "pageInfo": {}}}}`, "want data.issues"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, nil)
			srv.Inject(lineartest.Reply{Status: 200, Body: tc.body})
			_, err := c.Issues(t.Context())
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Issues() error = %v; want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Issues() error = %q; want it to mention %q", err, tc.want)
			}
			if n := srv.Calls(""); n != 1 {
				t.Errorf("requests = %d; want 1 (a malformed response is not retried)", n)
			}
		})
	}
}

func TestRepeatedCursor(t *testing.T) {
	c, srv := newTest(t, nil)
	page := `{"data": {"issues": {"nodes": [], "pageInfo": {"hasNextPage": true, "endCursor": "abc"}}}}`
	srv.Inject(lineartest.Reply{Status: 200, Body: page}, lineartest.Reply{Status: 200, Body: page})
	_, err := c.Issues(t.Context())
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "repeats") {
		t.Errorf("Issues() error = %v; want a malformed response with a repeating cursor", err)
	}
}

func TestAPIError(t *testing.T) {
	c, srv := newTest(t, nil)
	srv.Inject(lineartest.Reply{Status: 400, Body: `{"errors":[{"message":"Argument Validation Error","extensions":{"code":"INVALID_INPUT","userPresentableMessage":"first must be at most 250"}}]}`})
	_, err := c.Issues(t.Context())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "INVALID_INPUT" || !strings.Contains(err.Error(), "first must be at most 250") {
		t.Errorf("Issues() error = %v; want an *APIError INVALID_INPUT with Linear's message", err)
	}
	if n := srv.Calls(""); n != 1 {
		t.Errorf("requests = %d; want 1", n)
	}
}

// TestBudget: Issues records Linear's request budget from its answer's
// headers, a tick costing a request per page, for the controller's pace.
func TestBudget(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.PageSize = 2 })
	if _, ok := c.Budget(); ok {
		t.Errorf("Budget before any answer: ok; want not known")
	}
	for i := range 5 {
		srv.AddIssue(fmt.Sprintf("issue %d", i), "Todo")
	}
	if _, err := c.Issues(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, ok := c.Budget()
	if !ok || b.Limit != lineartest.RequestsPerHour || b.TickCost != 3 || b.Remaining < lineartest.RequestsPerHour-srv.Calls("") || b.Remaining >= lineartest.RequestsPerHour || b.Reset.Before(time.Now()) {
		t.Errorf("Budget = %+v, %v; want Linear's limit, 3 pages a tick, what is left, a reset ahead", b, ok)
	}
}
