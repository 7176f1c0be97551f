package github

import (
	"net/http"
	"testing"
	"time"
)

// FuzzDecodePullRequests feeds arbitrary response bodies through everything
// PullRequests does with a response: classification, decoding, conversion.
// Nothing may panic.
func FuzzDecodePullRequests(f *testing.F) {
	for _, s := range []string{
		`{"data":{"repository":{"pr0":{"nodes":[{"id":"PR_1","number":1,"state":"OPEN","url":"u","mergeable":"MERGEABLE","labels":{"nodes":[{"id":"L","name":"worker-approved"}]}}]},"pr1":{"nodes":[]}}}}`,
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
		}
	})
}
