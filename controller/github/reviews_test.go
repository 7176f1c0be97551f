package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github/githubtest"
)

// TestReviewsOn: which reviews count, and who wins.
func TestReviewsOn(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC) }
	const head, old = "bbbb", "aaaa"
	for _, tc := range []struct {
		name    string
		reviews []Review
		want    controller.Review
	}{
		{"none", nil, controller.ReviewNone},
		{"approved on head", []Review{{"ann", StateApproved, head, at(1)}}, controller.ReviewApproved},
		{"changes on head", []Review{{"ann", StateChangesRequested, head, at(1)}}, controller.ReviewChangesRequested},
		{"changes on an older commit", []Review{{"ann", StateChangesRequested, old, at(1)}}, controller.ReviewNone},
		{"changes on an older commit, approved on head", []Review{{"ann", StateChangesRequested, old, at(1)}, {"bob", StateApproved, head, at(2)}}, controller.ReviewApproved},
		{"commit unknown", []Review{{"ann", StateApproved, "", at(1)}}, controller.ReviewNone},
		{"same author changes mind", []Review{{"ann", StateChangesRequested, head, at(1)}, {"ann", StateApproved, head, at(2)}}, controller.ReviewApproved},
		{"same author, listed out of order", []Review{{"ann", StateApproved, head, at(2)}, {"ann", StateChangesRequested, head, at(1)}}, controller.ReviewApproved},
		{"two authors disagree", []Review{{"ann", StateApproved, head, at(1)}, {"bob", StateChangesRequested, head, at(2)}}, controller.ReviewChangesRequested},
		{"later approval by another does not clear a request", []Review{{"bob", StateChangesRequested, head, at(1)}, {"ann", StateApproved, head, at(2)}}, controller.ReviewChangesRequested},
		{"other states do not count", []Review{{"ann", "COMMENTED", head, at(1)}, {"bob", "DISMISSED", head, at(2)}}, controller.ReviewNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReviewsOn(head, tc.reviews); got != tc.want {
				t.Errorf("ReviewsOn(%s, %v) = %q; want %q", head, tc.reviews, got, tc.want)
			}
		})
	}
	if got := ReviewsOn("", []Review{{"ann", StateApproved, "", at(1)}}); got != controller.ReviewNone {
		t.Errorf("ReviewsOn with no head = %q; want none", got)
	}
}

// TestOutcome: labels and reviews together; changes requested wins.
func TestOutcome(t *testing.T) {
	approve := []Review{{"ann", StateApproved, "h", time.Unix(1, 0)}}
	change := []Review{{"ann", StateChangesRequested, "h", time.Unix(1, 0)}}
	for _, tc := range []struct {
		name    string
		labels  []string
		reviews []Review
		want    controller.Review
	}{
		{"nothing", nil, nil, controller.ReviewNone},
		{"label only", []string{controller.LabelApproved}, nil, controller.ReviewApproved},
		{"review only", nil, approve, controller.ReviewApproved},
		{"both approve", []string{controller.LabelApproved}, approve, controller.ReviewApproved},
		{"approved label, changes review", []string{controller.LabelApproved}, change, controller.ReviewChangesRequested},
		{"changes label, approving review", []string{controller.LabelChangesRequest}, approve, controller.ReviewChangesRequested},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Outcome(tc.labels, "h", tc.reviews); got != tc.want {
				t.Errorf("Outcome(%q, h, %v) = %q; want %q", tc.labels, tc.reviews, got, tc.want)
			}
		})
	}
}

// TestPullRequestsReviews: GitHub reviews read in the same one query as
// the labels, for every branch; only reviews of the head commit count.
func TestPullRequestsReviews(t *testing.T) {
	c, srv := newTest(t, nil)
	type step func(pr *githubtest.PR)
	review := func(who, state string) step { return func(pr *githubtest.PR) { srv.AddReview(pr, who, state) } }
	push := func(pr *githubtest.PR) { srv.Push(pr) }
	cases := []struct {
		name   string
		labels []string
		steps  []step
		want   controller.Review
	}{
		{"approved", nil, []step{review("ann", "APPROVED")}, controller.ReviewApproved},
		{"changes requested", nil, []step{review("ann", "CHANGES_REQUESTED")}, controller.ReviewChangesRequested},
		{"changes requested, then fixes pushed", nil, []step{review("ann", "CHANGES_REQUESTED"), push}, controller.ReviewNone},
		{"changes requested, fixes pushed, approved", nil, []step{review("ann", "CHANGES_REQUESTED"), push, review("ann", "APPROVED")}, controller.ReviewApproved},
		{"approved, then more pushed", nil, []step{review("ann", "APPROVED"), push}, controller.ReviewNone},
		{"commented only", nil, []step{review("ann", "COMMENTED")}, controller.ReviewNone},
		{"dismissed", nil, []step{review("ann", "DISMISSED")}, controller.ReviewNone},
		{"approving label, changes review", []string{controller.LabelApproved}, []step{review("ann", "CHANGES_REQUESTED")}, controller.ReviewChangesRequested},
		{"changes label, approving review", []string{controller.LabelChangesRequest}, []step{review("ann", "APPROVED")}, controller.ReviewChangesRequested},
		{"two reviewers disagree", nil, []step{review("ann", "APPROVED"), review("bob", "CHANGES_REQUESTED")}, controller.ReviewChangesRequested},
		{"a reviewer changes their mind", nil, []step{review("bob", "CHANGES_REQUESTED"), review("bob", "APPROVED")}, controller.ReviewApproved},
		// Only the last 20 outcomes are read: 25 old requests, then an
		// approval of the head.
		{"many old reviews", nil, append(append(repeat(25, review("ann", "CHANGES_REQUESTED")), push), review("ann", "APPROVED")), controller.ReviewApproved},
	}
	var issues []string
	for i, tc := range cases {
		issue := fmt.Sprintf("DEMO-%d", i+1)
		issues = append(issues, issue)
		pr := srv.AddPR("legion/"+issue, "OPEN", tc.labels...)
		for _, s := range tc.steps {
			s(pr)
		}
	}
	got, err := c.Reviews(t.Context(), issues)
	if err != nil {
		t.Fatalf("Reviews: %v", err)
	}
	if n := srv.Calls(""); n != 1 {
		t.Errorf("requests = %d; want 1 batched query for %d branches", n, len(cases))
	}
	for i, tc := range cases {
		if g := got[issues[i]]; g != tc.want {
			t.Errorf("%s: Reviews()[%s] = %q; want %q", tc.name, issues[i], g, tc.want)
		}
	}
	prs, err := c.PullRequests(t.Context(), issues[:1])
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := srv.PR("legion/DEMO-1")
	want := []Review{{Author: "ann", State: StateApproved, Commit: srv.HeadOID(&pr), SubmittedAt: pr.Reviews[0].SubmittedAt}}
	if diff := cmp.Diff(want, prs["DEMO-1"].Reviews); diff != "" || prs["DEMO-1"].Head != srv.HeadOID(&pr) {
		t.Errorf("PullRequests()[DEMO-1] head %s, reviews (-want +got):\n%s", prs["DEMO-1"].Head, diff)
	}
}

func repeat[T any](n int, v T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestPullRequestsMalformedReviews: a review GitHub would never send is
// ErrMalformed naming the branch, not a silent outcome.
func TestPullRequestsMalformedReviews(t *testing.T) {
	node := `{"id":"PR_1","number":1,"state":"OPEN","headRefOid":"h","labels":{"nodes":[]},"reviews":{"nodes":[%s]}}`
	for _, tc := range []struct{ name, review, want string }{
		{"no time", `{"state":"APPROVED","commit":{"oid":"h"}}`, `review 0: want submittedAt as an RFC 3339 time, got ""`},
		{"bad time", `{"state":"APPROVED","submittedAt":"yesterday","commit":{"oid":"h"}}`, `got "yesterday"`},
		{"no state", `{"submittedAt":"2026-01-01T00:00:00Z"}`, "review 0 has no state"},
		{"commit not an object", `{"state":"APPROVED","submittedAt":"2026-01-01T00:00:00Z","commit":"h"}`, "want data.repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, nil)
			srv.Inject(githubtest.Reply{Status: 200, Body: `{"data":{"repository":{"pr0":{"nodes":[` + fmt.Sprintf(node, tc.review) + `]}}}}`})
			_, err := c.PullRequests(t.Context(), []string{"DEMO-1"})
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("PullRequests() error = %v; want ErrMalformed saying %q", err, tc.want)
			}
		})
	}
}

// TestMergeMethod: the configured method when the repository allows it,
// else the first it allows of merge, squash, rebase; a method it does not
// allow is an error naming the repository and what it allows, and no
// merge is tried.
func TestMergeMethod(t *testing.T) {
	for _, tc := range []struct {
		name       string
		allowed    []string
		configured string
		want       string // method sent
		wantErr    string
	}{
		{"default", nil, "", "MERGE", ""},
		{"configured squash", nil, "squash", "SQUASH", ""},
		{"configured rebase", nil, "REBASE", "REBASE", ""},
		{"first allowed: squash", []string{"SQUASH", "REBASE"}, "", "SQUASH", ""},
		{"first allowed: rebase", []string{"REBASE"}, "", "REBASE", ""},
		{"configured, not allowed", []string{"SQUASH", "REBASE"}, "merge", "",
			`merge method "merge" (github.merge_method) is not allowed by the repository legion-dev/demo, which allows squash, rebase`},
		{"none allowed", []string{}, "", "", "the repository legion-dev/demo allows no merge method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, func(o *Options) { o.MergeMethod = tc.configured })
			srv.Lock()
			srv.MergeMethods = tc.allowed
			srv.Unlock()
			pr := srv.AddPR("legion/DEMO-1", "OPEN")
			err := c.Merge(t.Context(), pr.Number)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Merge() error = %v; want %q", err, tc.wantErr)
				}
				if n := srv.Calls("LegionMerge"); n != 0 {
					t.Errorf("merge mutations = %d; want none", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			if got, _ := srv.PR("legion/DEMO-1"); got.MergedBy != tc.want {
				t.Errorf("merged with %q; want %q", got.MergedBy, tc.want)
			}
			if n := srv.Calls(""); n != 2 {
				t.Errorf("requests = %d; want 2 (one read, one merge)", n)
			}
		})
	}
}

// TestMergeMethodGit: each method does to the served repository what
// GitHub's does: a merge commit, one squashed commit, the commits
// replayed.
func TestMergeMethodGit(t *testing.T) {
	for _, tc := range []struct {
		method string
		want   string // git log --first-parent --format=%s main
	}{
		{"merge", "Merge pull request #1 from legion-dev/legion/DEMO-1\nfirst"},
		{"squash", "DEMO-1: greet (#1)\nfirst"},
		{"rebase", "two\none\nfirst"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			c, srv := newTest(t, func(o *Options) { o.MergeMethod = tc.method })
			dir := gitRepo(t)
			for _, args := range [][]string{
				{"checkout", "-q", "-b", "legion/DEMO-1"},
				{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "one"},
				{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "two"},
			} {
				if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			bare := srv.ServeGit(t, dir)
			pr, _, err := c.OpenPullRequest(t.Context(), "DEMO-1", "main", "DEMO-1: greet", "")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Merge(t.Context(), pr.Number); err != nil {
				t.Fatalf("Merge: %v", err)
			}
			out, err := exec.Command("git", "-C", bare, "log", "--first-parent", "--format=%s", "main").Output()
			if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
				t.Errorf("git log main after a %s merge = %q, %v; want %q", tc.method, out, err, tc.want)
			}
		})
	}
}

// TestMergeBlocked: failing or pending checks, a review GitHub requires,
// a draft: ErrBlocked naming the checks and what to do, and no merge
// tried. Conflicts stay ErrConflict.
func TestMergeBlocked(t *testing.T) {
	ci := func(state string) githubtest.Check {
		return githubtest.Check{Kind: "CheckRun", Name: "ci", State: state}
	}
	lint := func(state string) githubtest.Check {
		return githubtest.Check{Kind: "StatusContext", Name: "lint", State: state}
	}
	for _, tc := range []struct {
		name      string
		required  []string
		approvals int
		checks    []githubtest.Check
		reviews   []string // states, by one reviewer each
		draft     bool
		conflict  bool
		want      []string // in the error; nil: merged
	}{
		{"all passed", []string{"ci"}, 0, []githubtest.Check{ci("SUCCESS"), lint("SUCCESS")}, nil, false, false, nil},
		{"no checks", nil, 0, nil, nil, false, false, nil},
		{"neutral and skipped pass", nil, 0, []githubtest.Check{ci("NEUTRAL"), {Kind: "CheckRun", Name: "deploy", State: "SKIPPED"}}, nil, false, false, nil},
		{"required failed", []string{"ci"}, 0, []githubtest.Check{ci("FAILURE"), lint("SUCCESS")}, nil, false, false,
			[]string{"checks failed: ci (required)", "run the finish again", "https://github.com/legion-dev/demo/pull/1"}},
		{"required pending", []string{"ci"}, 0, []githubtest.Check{ci("IN_PROGRESS")}, nil, false, false, []string{"checks pending: ci (required)"}},
		{"status error", nil, 0, []githubtest.Check{lint("ERROR")}, nil, false, false, []string{"checks failed: lint"}},
		{"optional failed", nil, 0, []githubtest.Check{ci("SUCCESS"), lint("FAILURE")}, nil, false, false, []string{"checks failed: lint"}},
		{"failed and pending", []string{"ci"}, 0, []githubtest.Check{ci("TIMED_OUT"), lint("PENDING")}, nil, false, false,
			[]string{"checks failed: ci (required)", "checks pending: lint"}},
		{"required missing", []string{"ci"}, 0, nil, nil, false, false, []string{"mergeStateStatus BLOCKED"}},
		{"review required", nil, 1, nil, nil, false, false, []string{"requires an approving review (reviewDecision REVIEW_REQUIRED)"}},
		{"review given", nil, 1, nil, []string{"APPROVED"}, false, false, nil},
		{"changes requested", nil, 1, nil, []string{"CHANGES_REQUESTED"}, false, false, []string{"reviewDecision CHANGES_REQUESTED"}},
		{"draft", nil, 0, nil, nil, true, false, []string{"is a draft"}},
		{"conflict", []string{"ci"}, 0, []githubtest.Check{ci("FAILURE")}, nil, false, true, []string{"merge conflict"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTest(t, nil)
			pr := srv.AddPR("legion/DEMO-1", "OPEN")
			srv.SetChecks(pr, tc.checks...)
			for i, st := range tc.reviews {
				srv.AddReview(pr, fmt.Sprintf("reviewer%d", i), st)
			}
			srv.Lock()
			srv.RequiredChecks, srv.RequiredApprovals, pr.Draft = tc.required, tc.approvals, tc.draft
			if tc.conflict {
				pr.Mergeable = "CONFLICTING"
			}
			srv.Unlock()
			err := c.Merge(t.Context(), pr.Number)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Merge: %v", err)
				}
				if got := srv.State(pr); got != "MERGED" {
					t.Errorf("state = %s; want MERGED", got)
				}
				return
			}
			wantIs := ErrBlocked
			if tc.conflict {
				wantIs = ErrConflict
			}
			if !errors.Is(err, wantIs) {
				t.Fatalf("Merge() error = %v; want %v", err, wantIs)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Merge() error = %q; want it to say %q", err, w)
				}
			}
			if n := srv.Calls("LegionMerge"); n != 0 {
				t.Errorf("merge mutations = %d; want none", n)
			}
			if got := srv.State(pr); got != "OPEN" {
				t.Errorf("state = %s; want OPEN", got)
			}
		})
	}
}

// TestMergeRefusedBlocked: GitHub had not computed the merge state when
// read (UNKNOWN) and refuses the merge for branch protection: ErrBlocked
// with GitHub's words and the checks read.
func TestMergeRefusedBlocked(t *testing.T) {
	c, srv := newTest(t, nil)
	pr := srv.AddPR("legion/DEMO-1", "OPEN")
	srv.Lock()
	srv.RequiredChecks = []string{"ci"}
	srv.Unlock()
	srv.Inject(githubtest.Reply{Status: 200, Body: fmt.Sprintf(`{"data":{"repository":{%s,"pullRequest":{"id":%q,"number":1,"state":"OPEN","mergeable":"UNKNOWN","mergeStateStatus":"UNKNOWN",
		"commits":{"nodes":[{"commit":{"oid":"h","statusCheckRollup":null}}]}}}}}`, allMethods, pr.ID)})
	err := c.Merge(t.Context(), pr.Number)
	if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), `GitHub says: Required status check "ci" is expected.`) {
		t.Errorf("Merge() error = %v; want ErrBlocked with GitHub's refusal", err)
	}
	if n := srv.Calls("LegionMerge"); n != 1 {
		t.Errorf("merge mutations = %d; want 1", n)
	}
}

// TestMergeMethodRuleset: the repository's settings allow the method but
// GitHub refuses it (a ruleset narrows the methods): an error saying what
// to set.
func TestMergeMethodRuleset(t *testing.T) {
	c, srv := newTest(t, nil)
	pr := srv.AddPR("legion/DEMO-1", "OPEN")
	srv.Lock()
	srv.MergeMethods = []string{"SQUASH"}
	srv.Unlock()
	srv.Inject(githubtest.Reply{Status: 200, Body: fmt.Sprintf(`{"data":{"repository":{%s,"pullRequest":{"id":%q,"number":1,"state":"OPEN","mergeable":"MERGEABLE","mergeStateStatus":"CLEAN"}}}}`, allMethods, pr.ID)})
	err := c.Merge(t.Context(), pr.Number)
	if err == nil || !strings.Contains(err.Error(), "Merge commits are not allowed on this repository.") || !strings.Contains(err.Error(), "set github.merge_method") {
		t.Errorf("Merge() error = %v; want GitHub's refusal and what to set", err)
	}
}

// TestMergePreview: mergeStateStatus is a schema preview: the fake, as
// GitHub, answers a query for it without the preview's media type with
// an error; the client's queries (the tests above) carry it.
func TestMergePreview(t *testing.T) {
	_, srv := newTest(t, nil)
	body, _ := json.Marshal(map[string]any{"query": opPullRequest.Query, "operationName": opPullRequest.Name,
		"variables": map[string]any{"owner": "legion-dev", "name": "demo", "number": 1}})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(body))
	req.Header.Set("Authorization", "bearer "+testToken)
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(got), "Field 'mergeStateStatus' doesn't exist on type 'PullRequest'") {
		t.Errorf("a query without the preview got %s; want GitHub's undefined field error", got)
	}
}
