package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github/githubtest"
)

const (
	testToken = "ghp_TESTTOKEN0123456789"
	testEnv   = "LEGION_TEST_GITHUB_TOKEN"
)

func newTest(t *testing.T, mod func(*Options)) (*Client, *githubtest.Server) {
	t.Helper()
	srv := githubtest.NewServer(t, testToken, "legion-dev", "demo")
	t.Setenv(testEnv, testToken)
	opts := Options{
		Owner: "legion-dev", Repo: "demo", TokenEnv: testEnv, Endpoint: srv.URL,
		Retry: Retry{Attempts: 4, Min: time.Millisecond, Max: 4 * time.Millisecond},
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

// TestPullRequests: ten branches, one request, every outcome.
func TestPullRequests(t *testing.T) {
	c, srv := newTest(t, nil)
	prs := []*githubtest.PR{
		srv.AddPR("legion/DEMO-1", "OPEN", "worker-approved"),
		srv.AddPR("legion/DEMO-2", "OPEN", "worker-changes-requested", "enhancement"),
		srv.AddPR("legion/DEMO-3", "OPEN"),
		srv.AddPR("legion/DEMO-4", "MERGED", "worker-approved"),
		srv.AddPR("legion/DEMO-5", "OPEN", "worker-approved", "worker-changes-requested"),
		srv.AddPR("legion/DEMO-6", "CLOSED", "worker-approved"), // closed: not considered
		srv.AddPR("legion/DEMO-7", "OPEN", "worker-changes-requested"),
		srv.AddPR("legion/DEMO-7", "OPEN", "worker-approved"),  // the newer PR wins
		srv.AddPR("feature/DEMO-8", "OPEN", "worker-approved"), // not Legion's branch
	}
	head := func(n int) string { return srv.HeadOID(prs[n-1]) }

	issues := make([]string, 10)
	for i := range issues {
		issues[i] = fmt.Sprintf("DEMO-%d", i+1)
	}
	got, err := c.PullRequests(t.Context(), issues)
	if err != nil {
		t.Fatalf("PullRequests: %v", err)
	}
	if n := srv.Calls(""); n != 1 {
		t.Errorf("requests = %d; want 1 batched query for 10 branches", n)
	}
	url := func(n int) string { return fmt.Sprintf("https://github.com/legion-dev/demo/pull/%d", n) }
	want := map[string]PullRequest{
		"DEMO-1": {Issue: "DEMO-1", Branch: "legion/DEMO-1", Number: 1, ID: "PR_kwDOAAAA0001", State: "OPEN", URL: url(1), Mergeable: "MERGEABLE", Labels: []string{"worker-approved"}, Head: head(1), Review: controller.ReviewApproved},
		"DEMO-2": {Issue: "DEMO-2", Branch: "legion/DEMO-2", Number: 2, ID: "PR_kwDOAAAA0002", State: "OPEN", URL: url(2), Mergeable: "MERGEABLE", Labels: []string{"worker-changes-requested", "enhancement"}, Head: head(2), Review: controller.ReviewChangesRequested},
		"DEMO-3": {Issue: "DEMO-3", Branch: "legion/DEMO-3", Number: 3, ID: "PR_kwDOAAAA0003", State: "OPEN", URL: url(3), Mergeable: "MERGEABLE", Labels: []string{}, Head: head(3), Review: controller.ReviewNone},
		"DEMO-4": {Issue: "DEMO-4", Branch: "legion/DEMO-4", Number: 4, ID: "PR_kwDOAAAA0004", State: "MERGED", URL: url(4), Mergeable: "UNKNOWN", Labels: []string{"worker-approved"}, Head: head(4), Review: controller.ReviewApproved},
		"DEMO-5": {Issue: "DEMO-5", Branch: "legion/DEMO-5", Number: 5, ID: "PR_kwDOAAAA0005", State: "OPEN", URL: url(5), Mergeable: "MERGEABLE", Labels: []string{"worker-approved", "worker-changes-requested"}, Head: head(5), Review: controller.ReviewChangesRequested},
		"DEMO-7": {Issue: "DEMO-7", Branch: "legion/DEMO-7", Number: 8, ID: "PR_kwDOAAAA0008", State: "OPEN", URL: url(8), Mergeable: "MERGEABLE", Labels: []string{"worker-approved"}, Head: head(8), Review: controller.ReviewApproved},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(PullRequest{})); diff != "" {
		t.Errorf("PullRequests() mismatch (-want +got):\n%s", diff)
	}

	reviews, err := c.Reviews(t.Context(), issues)
	if err != nil {
		t.Fatalf("Reviews: %v", err)
	}
	wantReviews := map[string]controller.Review{
		"DEMO-1": controller.ReviewApproved, "DEMO-2": controller.ReviewChangesRequested,
		"DEMO-4": controller.ReviewApproved, "DEMO-5": controller.ReviewChangesRequested, "DEMO-7": controller.ReviewApproved,
	}
	if diff := cmp.Diff(wantReviews, reviews); diff != "" {
		t.Errorf("Reviews() mismatch (-want +got):\n%s", diff)
	}
	if n := srv.Calls(""); n != 2 {
		t.Errorf("requests after two ticks = %d; want 2", n)
	}
}

func TestPullRequestsBatching(t *testing.T) {
	for _, tc := range []struct {
		issues, batch, wantRequests int
	}{
		{0, 100, 0},
		{1, 100, 1},
		{10, 100, 1},
		{100, 100, 1},
		{250, 100, 3},
	} {
		t.Run(fmt.Sprintf("%d_by_%d", tc.issues, tc.batch), func(t *testing.T) {
			c, srv := newTest(t, func(o *Options) { o.BatchSize = tc.batch })
			var issues []string
			for i := range tc.issues {
				id := fmt.Sprintf("DEMO-%d", i+1)
				issues = append(issues, id, id) // duplicates are asked once
				srv.AddPR("legion/"+id, "OPEN", "worker-approved")
			}
			got, err := c.PullRequests(t.Context(), issues)
			if err != nil {
				t.Fatalf("PullRequests: %v", err)
			}
			if len(got) != tc.issues {
				t.Errorf("PullRequests() found %d; want %d", len(got), tc.issues)
			}
			if n := srv.Calls(""); n != tc.wantRequests {
				t.Errorf("requests = %d; want %d", n, tc.wantRequests)
			}
		})
	}
}

func TestPullRequestsVariables(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.BranchPrefix = "agents/" })
	// A branch name that would break a query built by string pasting.
	if _, err := c.PullRequests(t.Context(), []string{`X") { id } #`}); err != nil {
		t.Fatalf("PullRequests: %v", err)
	}
	v := srv.LastVariables("LegionPullRequests")
	want := map[string]any{"owner": "legion-dev", "name": "demo", "b0": `agents/X") { id } #`}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("variables (-want +got):\n%s", diff)
	}
}

func TestRetry(t *testing.T) {
	past := fmt.Sprint(time.Now().Add(-time.Minute).Unix())
	for _, tc := range []struct {
		name  string
		reply githubtest.Reply
	}{
		{"primary rate limit 403", githubtest.Reply{Status: 403,
			Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {past}},
			Body:   `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`}},
		{"secondary rate limit 403", githubtest.Reply{Status: 403, Header: http.Header{"Retry-After": {"0"}},
			Body: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`}},
		{"429", githubtest.Reply{Status: 429, Header: http.Header{"Retry-After": {"0"}}, Body: `{"message":"Too Many Requests"}`}},
		{"RATE_LIMITED", githubtest.Reply{Status: 200,
			Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {past}},
			Body:   `{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for user ID 1."}]}`}},
		{"502", githubtest.Reply{Status: 502, Body: `<html>Unicorn!</html>`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, nil)
			srv.AddPR("legion/DEMO-1", "OPEN", "worker-approved")
			srv.Inject(tc.reply)
			got, err := c.Reviews(t.Context(), []string{"DEMO-1"})
			if err != nil {
				t.Fatalf("Reviews: %v", err)
			}
			if got["DEMO-1"] != controller.ReviewApproved {
				t.Errorf("Reviews() = %v; want DEMO-1 approved", got)
			}
			if n := srv.Calls(""); n != 2 {
				t.Errorf("requests = %d; want 2", n)
			}
		})
	}
}

func TestRetryGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   githubtest.Reply
		wantIs  error
		wantReq int
	}{
		{"server errors", githubtest.Reply{Status: 500, Body: "{}"}, nil, 4},
		{"rate limited", githubtest.Reply{Status: 429, Body: "{}"}, ErrRateLimited, 4},
		{"reset an hour away", githubtest.Reply{Status: 403,
			Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {fmt.Sprint(time.Now().Add(time.Hour).Unix())}},
			Body:   `{"message":"API rate limit exceeded"}`}, ErrRateLimited, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, nil)
			for range 10 {
				srv.Inject(tc.reply)
			}
			_, err := c.PullRequests(t.Context(), []string{"DEMO-1"})
			if err == nil {
				t.Fatal("PullRequests succeeded; want an error")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("PullRequests() error = %v; want %v", err, tc.wantIs)
			}
			if n := srv.Calls(""); n != tc.wantReq {
				t.Errorf("requests = %d; want %d", n, tc.wantReq)
			}
		})
	}
}

func TestRetryHonoursContext(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.Retry.MaxWait = 2 * time.Hour })
	for range 10 {
		srv.Inject(githubtest.Reply{Status: 429, Header: http.Header{"Retry-After": {"3600"}}, Body: "{}"})
	}
	ctx, cancel := context.WithCancel(t.Context())
	srv.OnCall(func(string, int) { cancel() })
	_, err := c.PullRequests(ctx, []string{"DEMO-1"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("PullRequests() error = %v; want context.Canceled", err)
	}
	if n := srv.Calls(""); n != 1 {
		t.Errorf("requests = %d; want 1", n)
	}
}

func TestAuthFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply *githubtest.Reply
		says  string
	}{
		{"bad credentials", nil, "Bad credentials"},
		{"forbidden", &githubtest.Reply{Status: 403, Body: `{"message":"Resource not accessible by personal access token"}`}, "Resource not accessible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, func(o *Options) { o.TokenFile = "/etc/legion/github.token" })
			if tc.reply == nil {
				srv.Lock()
				srv.Token = "ghp_someone_else"
				srv.Unlock()
			} else {
				srv.Inject(*tc.reply, *tc.reply)
			}
			_, err := c.PullRequests(t.Context(), []string{"DEMO-1"})
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("PullRequests() error = %v; want ErrAuth", err)
			}
			const want = "github: authentication failed: check the token in $" + testEnv + " or /etc/legion/github.token"
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("PullRequests() error = %q; want %q and GitHub's %q", err, want, tc.says)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Errorf("error %q contains the token", err)
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
		{"invalid JSON", `{"data":`, "invalid JSON"},
		{"no data", `{}`, "no data and no errors"},
		{"null repository", `{"data":{"repository":null}}`, "want data.repository"},
		{"missing alias", `{"data":{"repository":{}}}`, "want data.repository.pr0 (branch legion/DEMO-1)"},
		{"node without id", `{"data":{"repository":{"pr0":{"nodes":[{"number":1,"state":"OPEN"}]}}}}`, "lacks id"},
		{"wrong type", `{"data":{"repository":{"pr0":{"nodes":{}}}}}`, "want data.repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, nil)
			srv.Inject(githubtest.Reply{Status: 200, Body: tc.body})
			_, err := c.PullRequests(t.Context(), []string{"DEMO-1"})
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("PullRequests() error = %v; want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("PullRequests() error = %q; want it to mention %q", err, tc.want)
			}
			if n := srv.Calls(""); n != 1 {
				t.Errorf("requests = %d; want 1", n)
			}
		})
	}
}

func TestRepositoryNotFound(t *testing.T) {
	c, _ := newTest(t, func(o *Options) { o.Repo = "nope" })
	_, err := c.PullRequests(t.Context(), []string{"DEMO-1"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Type != "NOT_FOUND" || !strings.Contains(err.Error(), "legion-dev/nope") {
		t.Errorf("PullRequests() error = %v; want a NOT_FOUND APIError naming the repository", err)
	}
}

func TestMerge(t *testing.T) {
	c, srv := newTest(t, func(o *Options) { o.MergeMethod = "squash" })
	open := srv.AddPR("legion/DEMO-1", "OPEN", "worker-approved")
	merged := srv.AddPR("legion/DEMO-2", "MERGED")
	srv.AddPR("legion/DEMO-3", "CLOSED")
	conflict := srv.AddPR("legion/DEMO-4", "OPEN")
	srv.Lock()
	conflict.Mergeable = "CONFLICTING"
	srv.Unlock()

	if err := c.Merge(t.Context(), open.Number); err != nil {
		t.Fatalf("Merge(#%d): %v", open.Number, err)
	}
	if got := srv.State(open); got != "MERGED" {
		t.Errorf("state after Merge = %s; want MERGED", got)
	}
	if got := srv.LastVariables("LegionMerge"); got["id"] != open.ID || got["method"] != "SQUASH" {
		t.Errorf("LegionMerge variables = %v; want the node id %s and SQUASH", got, open.ID)
	}
	// Idempotent: merging again, or an already merged PR, sends no mutation.
	for _, n := range []int{open.Number, merged.Number} {
		if err := c.Merge(t.Context(), n); err != nil {
			t.Errorf("Merge(#%d) of a merged PR: %v", n, err)
		}
	}
	if n := srv.Calls("LegionMerge"); n != 1 {
		t.Errorf("merge mutations = %d; want 1", n)
	}
	if err := c.Merge(t.Context(), 3); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Merge(closed) error = %v; want it to say closed", err)
	}
	if err := c.Merge(t.Context(), conflict.Number); !errors.Is(err, ErrConflict) {
		t.Errorf("Merge(conflicting) error = %v; want ErrConflict", err)
	}
	if err := c.Merge(t.Context(), 99); err == nil || !strings.Contains(err.Error(), "no such pull request") {
		t.Errorf("Merge(#99) error = %v; want no such pull request", err)
	}
	// GitHub finds the conflict only when merging.
	late := srv.AddPR("legion/DEMO-5", "OPEN")
	srv.Inject(githubtest.Reply{Status: 200, Body: fmt.Sprintf(`{"data":{"repository":{%s,"pullRequest":{"id":%q,"number":%d,"state":"OPEN","mergeable":"UNKNOWN","mergeStateStatus":"UNKNOWN"}}}}`, allMethods, late.ID, late.Number)},
		githubtest.Reply{Status: 200, Body: `{"data":{"mergePullRequest":null},"errors":[{"type":"UNPROCESSABLE","message":"Pull Request is not mergeable: merge conflict"}]}`})
	if err := c.Merge(t.Context(), late.Number); !errors.Is(err, ErrConflict) {
		t.Errorf("Merge(late conflict) error = %v; want ErrConflict", err)
	}
}

// allMethods are a repository's merge settings allowing every method, in
// a canned LegionPullRequest answer.
const allMethods = `"mergeCommitAllowed":true,"squashMergeAllowed":true,"rebaseMergeAllowed":true`

// TestMergeNotRetried: a 5xx on the merge mutation is not retried.
func TestMergeNotRetried(t *testing.T) {
	c, srv := newTest(t, nil)
	pr := srv.AddPR("legion/DEMO-1", "OPEN")
	srv.Inject(githubtest.Reply{Status: 200, Body: fmt.Sprintf(`{"data":{"repository":{%s,"pullRequest":{"id":%q,"number":1,"state":"OPEN","mergeable":"MERGEABLE","mergeStateStatus":"CLEAN"}}}}`, allMethods, pr.ID)},
		githubtest.Reply{Status: 502, Body: "bad gateway"})
	if err := c.Merge(t.Context(), 1); err == nil {
		t.Fatal("Merge after a 502 succeeded")
	}
	if n := srv.Calls("LegionMerge"); n != 1 {
		t.Errorf("merge mutations = %d; want 1", n)
	}
}

func TestRemoveLabel(t *testing.T) {
	c, srv := newTest(t, nil)
	pr := srv.AddPR("legion/DEMO-1", "OPEN", "worker-changes-requested", "bug")
	if err := c.RemoveLabel(t.Context(), "DEMO-1", controller.LabelChangesRequest); err != nil {
		t.Fatalf("RemoveLabel: %v", err)
	}
	if diff := cmp.Diff([]string{"bug"}, srv.LabelNames(pr)); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	// Absent label, absent PR: nothing to do, no mutation.
	for _, is := range []string{"DEMO-1", "DEMO-2"} {
		if err := c.RemoveLabel(t.Context(), is, controller.LabelChangesRequest); err != nil {
			t.Errorf("RemoveLabel(%s) again: %v", is, err)
		}
	}
	if n := srv.Calls("LegionRemoveLabels"); n != 1 {
		t.Errorf("label removals = %d; want 1", n)
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(good, []byte("ghp_FROMFILE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loose, []byte("ghp_LOOSE\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name, env, file, want, wantErr string
	}{
		{"env wins", "ghp_ENV", good, "ghp_ENV", ""},
		{"file", "", good, "ghp_FROMFILE", ""},
		{"neither", "", missing, "", "no token: set $" + testEnv + " or write the token to " + missing},
		{"loose", "", loose, "", "mode 0640"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(testEnv, tc.env)
			got, err := LoadToken(testEnv, tc.file)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "ghp_") {
					t.Errorf("LoadToken() error = %v; want %q, without the token", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("LoadToken() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNewOptions(t *testing.T) {
	t.Setenv(testEnv, testToken)
	for _, tc := range []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no repo", Options{Owner: "o", TokenEnv: testEnv}, "want an owner and a repository"},
		{"slash", Options{Owner: "o/r", Repo: "r", TokenEnv: testEnv}, "want an owner and a repository"},
		{"merge method", Options{Owner: "o", Repo: "r", TokenEnv: testEnv, MergeMethod: "octopus"}, "want MERGE, SQUASH or REBASE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New() error = %v; want %q", err, tc.wantErr)
			}
		})
	}
}
