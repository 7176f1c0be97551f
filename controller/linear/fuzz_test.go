package linear

import (
	"net/http"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
)

// FuzzDecodeIssues feeds arbitrary response bodies through everything
// Issues does with a page: classification, decoding, conversion. Nothing
// may panic.
func FuzzDecodeIssues(f *testing.F) {
	for _, s := range []string{
		`{"data":{"issues":{"nodes":[{"id":"u1","identifier":"ENG-1","number":1,"title":"t","branchName":"b","state":{"id":"s","name":"Todo","type":"unstarted"},"labels":{"nodes":[{"id":"l","name":"worker-done"}]},"comments":{"nodes":[{"body":"hi\n\n(posted by Legion)","createdAt":"2026-01-02T03:04:05.000Z","user":{"name":"ada","displayName":"Ada"}}]}}],"pageInfo":{"hasNextPage":true,"endCursor":"c"}}}}`,
		`{"data":{"issues":{"nodes":[],"pageInfo":{"hasNextPage":false,"endCursor":null}}}}`,
		`{"errors":[{"message":"x","extensions":{"code":"RATELIMITED"}}]}`,
		`{"errors":[{"message":"x","extensions":{"code":"AUTHENTICATION_ERROR"}}],"data":null}`,
		`{"data":null}`, `[]`, `null`, `"x"`, `<html>`, ``,
	} {
		f.Add(200, s)
	}
	f.Add(429, `{}`)
	f.Add(503, `oops`)
	c := &Client{toStatus: map[string]controller.Status{"In Review": "Needs Review"}}
	f.Fuzz(func(t *testing.T, status int, body string) {
		h := http.Header{"Retry-After": {"1"}, "X-Ratelimit-Requests-Reset": {body}}
		data, _, err := service.Parse("LegionIssues", status, h, []byte(body), time.Unix(0, 0))
		if err != nil || data == nil {
			return
		}
		p, err := decodeIssuesPage(data)
		if err != nil {
			return
		}
		for _, n := range p.nodes {
			is := c.tracked(n)
			if is.ID == "" || is.Status == "" {
				t.Errorf("tracked(%+v) = %+v: decoded issue without id or status", n, is)
			}
			_ = issueNumber(is.ID)
		}
	})
}
