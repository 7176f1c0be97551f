package github

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
)

// FuzzDecodePullRequests feeds arbitrary response bodies through everything
// PullRequests does with a response: classification, decoding, conversion.
// Nothing may panic.
func FuzzDecodePullRequests(f *testing.F) {
	for _, s := range []string{
		`{"data":{"repository":{"pr0":{"nodes":[{"id":"PR_1","number":1,"state":"OPEN","url":"u","mergeable":"MERGEABLE","labels":{"nodes":[{"id":"L","name":"worker-approved"}]}}]},"pr1":{"nodes":[]}}}}`,
		`{"data":{"repository":{"pr0":{"nodes":[{"id":"PR_1","number":1,"state":"OPEN","headRefOid":"h","labels":{"nodes":[]},"reviews":{"nodes":[{"state":"CHANGES_REQUESTED","submittedAt":"2026-01-01T00:00:00Z","author":{"login":"ann"},"commit":{"oid":"g"}},{"state":"APPROVED","submittedAt":"2026-01-01T00:01:00Z","author":null,"commit":{"oid":"h"}}]}}]},"pr1":{"nodes":[]}}}}`,
		`{"data":{"repository":{"pr0":{"nodes":[{"id":"PR_1","number":1,"state":"OPEN","headRefOid":null,"reviews":{"nodes":[{"state":"APPROVED","submittedAt":"x","commit":null}]}}]}}}}`,
		`{"data":{"repository":null},"errors":[{"type":"NOT_FOUND","message":"Could not resolve"}]}`,
		`{"errors":[{"type":"RATE_LIMITED","message":"slow"}]}`,
		`{"message":"Bad credentials"}`,
		`{"data":{"repository":{"pr0":null}}}`, `null`, `[]`, `<html>`, ``,
	} {
		f.Add(200, s)
	}
	f.Add(403, `{"message":"API rate limit exceeded"}`)
	f.Add(502, `x`)
	branches := []string{"legion/A-1", "legion/A-2"}
	f.Fuzz(func(t *testing.T, status int, body string) {
		h := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {body}}
		data, _, err := service.Parse("LegionPullRequests", status, h, []byte(body), time.Unix(0, 0))
		if err != nil || data == nil {
			return
		}
		nodes, err := decodePulls(data, branches)
		if err != nil {
			return
		}
		for br, n := range nodes {
			pr := pullRequest("A", br, n)
			if pr.ID == "" || pr.Number <= 0 {
				t.Errorf("pullRequest(%+v) = %+v: decoded without id or number", n, pr)
			}
			if _, ok := rank[pr.Review]; !ok {
				t.Errorf("pullRequest(%+v) has review outcome %q", n, pr.Review)
			}
			if pr.Review == controller.ReviewApproved && ReviewOf(pr.Labels) == controller.ReviewNone && pr.Head == "" {
				t.Errorf("pullRequest(%+v) approved by reviews without a head commit", n)
			}
		}
	})
}

// FuzzDecodeMerge feeds arbitrary LegionPullRequest answers through what
// Merge does with one before it merges: decoding, the merge method, the
// merge state. Nothing may panic, and checks that did not pass are never
// taken for a mergeable pull request.
func FuzzDecodeMerge(f *testing.F) {
	for _, s := range []string{
		`{"data":{"repository":{"mergeCommitAllowed":true,"squashMergeAllowed":false,"rebaseMergeAllowed":true,"pullRequest":{"id":"PR_1","number":1,"state":"OPEN","url":"u","mergeable":"MERGEABLE","mergeStateStatus":"BLOCKED","reviewDecision":"REVIEW_REQUIRED","commits":{"nodes":[{"commit":{"oid":"h","statusCheckRollup":{"state":"FAILURE","contexts":{"nodes":[{"__typename":"CheckRun","name":"ci","status":"COMPLETED","conclusion":"FAILURE","isRequired":true},{"__typename":"StatusContext","context":"lint","state":"PENDING","isRequired":false}]}}}}]}}}}}`,
		`{"data":{"repository":{"mergeCommitAllowed":false,"squashMergeAllowed":false,"rebaseMergeAllowed":false,"pullRequest":{"id":"PR_1","number":1,"state":"OPEN","mergeStateStatus":"CLEAN","reviewDecision":null,"commits":{"nodes":[{"commit":{"oid":"h","statusCheckRollup":null}}]}}}}}`,
		`{"data":{"repository":{"pullRequest":{"id":"PR_1","commits":{"nodes":[]}}}}}`,
		`{"data":{"repository":{"pullRequest":{"commits":{"nodes":[{"commit":{"statusCheckRollup":{"state":"PENDING","contexts":{"nodes":[{}]}}}}]}}}}}`,
		`{"data":{"repository":null},"errors":[{"type":"NOT_FOUND","message":"Could not resolve"}]}`,
		`{"data":{"repository":{"pullRequest":{"commits":{"nodes":null}}}}}`, `null`, `<html>`, ``,
	} {
		f.Add(200, s, "")
		f.Add(200, s, "squash")
	}
	f.Fuzz(func(t *testing.T, status int, body, method string) {
		c := &Client{opts: Options{Owner: "o", Repo: "r", MergeMethod: strings.ToUpper(method)}}
		data, _, err := service.Parse("LegionPullRequest", status, http.Header{}, []byte(body), time.Unix(0, 0))
		if err != nil || data == nil {
			return
		}
		var d struct {
			Repository *mergeRepository `json:"repository"`
		}
		if json.Unmarshal(data, &d) != nil || d.Repository == nil {
			return
		}
		if m, err := c.mergeMethod(d.Repository.mergeSettings); err == nil && m != "MERGE" && m != "SQUASH" && m != "REBASE" {
			t.Errorf("mergeMethod() = %q; want MERGE, SQUASH or REBASE", m)
		}
		pr := d.Repository.PullRequest
		if pr == nil {
			return
		}
		why := pr.blocked()
		for _, n := range pr.Commits.Nodes {
			if r := n.Commit.StatusCheckRollup; r != nil {
				for _, cn := range r.Contexts.Nodes {
					if _, v := cn.verdict(); v != "passed" && len(why) == 0 {
						t.Errorf("blocked(%+v) = nothing; want the check %+v that has not passed", pr, cn)
					}
				}
			}
		}
	})
}

// FuzzDecodeIssues: any LegionIssues answer decodes into issues with an
// id and a number and converts without panic, or is an error.
func FuzzDecodeIssues(f *testing.F) {
	for _, s := range []string{
		`{"data":{"repository":{"id":"R","issues":{"nodes":[{"id":"I_1","number":1,"title":"t","state":"OPEN","labels":{"nodes":[{"id":"L","name":"legion:retro"}]},"comments":{"nodes":[{"body":"x\n\n<!-- posted by Legion -->","createdAt":"2026-01-01T00:00:00Z","authorAssociation":"NONE","author":null}]}}],"pageInfo":{"hasNextPage":true,"endCursor":"Y3Vyc29y"}}}}}`,
		`{"data":{"repository":{"issues":{"nodes":[],"pageInfo":{"hasNextPage":true}}}}}`,
		`{"data":{"repository":{"issues":null}}}`, `{"data":null}`, `null`, `{`,
	} {
		f.Add(200, s)
	}
	tr := &Tracker{c: &Client{opts: Options{Owner: "o", Repo: "r"}}, opts: TrackerOptions{Label: DefaultLabel, Statuses: DefaultStatuses, Prefix: "WEB"}}
	f.Fuzz(func(t *testing.T, status int, body string) {
		data, _, err := service.Parse("LegionIssues", status, http.Header{}, []byte(body), time.Unix(0, 0))
		if err != nil || data == nil {
			return
		}
		p, err := decodeIssuesPage(data)
		if err != nil {
			return
		}
		for _, n := range p.nodes {
			is := tr.tracked(n)
			if n.ID == "" || n.Number <= 0 || !strings.HasPrefix(is.ID, "WEB-") {
				t.Errorf("decoded %+v into %+v: want an id and a number", n, is)
			}
		}
	})
}

// FuzzDecodeAccess feeds arbitrary response bodies and X-OAuth-Scopes
// values through everything Access does with a response. Nothing may
// panic; what decodes has a login and a repository, and no scope is
// empty or padded.
func FuzzDecodeAccess(f *testing.F) {
	for _, s := range []string{
		`{"data":{"viewer":{"login":"bot"},"repository":{"nameWithOwner":"a/b","viewerPermission":"WRITE","isPrivate":true,"hasIssuesEnabled":true},"rateLimit":{"limit":5000,"remaining":4999,"cost":1,"resetAt":"2026-01-02T03:04:05Z"}}}`,
		`{"data":{"viewer":{"login":"bot"},"repository":null,"rateLimit":{"limit":5000}},"errors":[{"type":"NOT_FOUND","message":"Could not resolve"}]}`,
		`{"data":{"viewer":{"login":"bot"},"repository":{"nameWithOwner":"a/b","viewerPermission":null},"rateLimit":{"resetAt":"soon"}}}`,
		`{"message":"Bad credentials"}`, `null`, `<html>`, ``,
	} {
		f.Add(200, s, "repo, read:org")
	}
	f.Add(200, `{"data":{}}`, "")
	f.Fuzz(func(t *testing.T, status int, body, scopes string) {
		h := http.Header{"X-Oauth-Scopes": {scopes}}
		got := scopesOf(h)
		for _, s := range got {
			if s == "" || strings.TrimSpace(s) != s || strings.Contains(s, ",") {
				t.Errorf("scopesOf(%q) has scope %q", scopes, s)
			}
		}
		data, _, err := service.Parse("LegionAccess", status, h, []byte(body), time.Unix(0, 0))
		if err != nil || data == nil {
			return
		}
		a, err := decodeAccess(data, got)
		if err != nil {
			return
		}
		if a.Login == "" || a.Repository == "" {
			t.Errorf("decodeAccess(%s) = %+v: decoded without login or repository", data, a)
		}
		a.Missing(Needs{Issues: true, Project: true})
	})
}
