package githubtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// comment posts a LegionComment on the issue of node id with client c;
// it returns the response's status, or the transport's error.
func comment(t *testing.T, c *http.Client, s *Server, id, body string) (int, string, error) {
	t.Helper()
	req, _ := json.Marshal(map[string]any{
		"query":         `mutation LegionComment($id: ID!, $body: String!) { addComment(input: {subjectId: $id, body: $body}) { commentEdge { node { id } } } }`,
		"operationName": "LegionComment",
		"variables":     map[string]any{"id": id, "body": body},
	})
	r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/graphql", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "bearer "+s.Token)
	resp, err := c.Do(r)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestFaults: each fault answers the next request as it says, takes
// effect on the fake or not as it says, and the request after it is
// answered as usual.
func TestFaults(t *testing.T) {
	for _, c := range []struct {
		name   string
		inject func(s *Server)
		// status 0: no answer (a transport error)
		status int
		posted bool // the comment was posted
		lost   bool // and logged in Writes as lost
	}{
		{"none", func(*Server) {}, 200, true, false},
		{"502", func(s *Server) { s.Inject(ServerError(502)) }, 502, false, false},
		{"503", func(s *Server) { s.Inject(ServerError(503)) }, 503, false, false},
		{"secondary rate limit", func(s *Server) { s.Inject(RateLimitReply(429, true, time.Second, time.Now())) }, 429, false, false},
		{"lost answer", func(s *Server) { s.LoseAnswers(1) }, 0, true, true},
		{"stalled", func(s *Server) { s.Stall(false) }, 0, false, false},
		{"stalled, carried out", func(s *Server) { s.Stall(true) }, 0, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewServer(t, "ghp_T", "acme", "web")
			n := s.AddIssue("One", "legion")
			is, _ := s.Issue(n)
			c.inject(s)
			if r, st, l := s.Pending(); c.name != "none" && r+st+l != 1 {
				t.Errorf("Pending() = %d, %d, %d after one fault; want it counted", r, st, l)
			}
			client := &http.Client{Timeout: 2 * time.Second}
			status, body, err := comment(t, client, s, is.ID, "hello")
			if c.status == 0 && err == nil || c.status != 0 && status != c.status {
				t.Fatalf("comment = %d %q, %v; want status %d (0: no answer)", status, body, err, c.status)
			}
			got, _ := s.Issue(n)
			if posted := len(got.Comments) == 1; posted != c.posted {
				t.Errorf("comments after the fault: %+v; want posted %v", got.Comments, c.posted)
			}
			w := s.Writes()
			if c.posted && (len(w) != 1 || w[0].Op != "LegionComment" || w[0].Lost != c.lost || w[0].Variables["body"] != "hello") ||
				!c.posted && len(w) != 0 {
				t.Errorf("Writes() = %+v; want the comment once if posted, lost %v", w, c.lost)
			}
			if r, st, l := s.Pending(); r+st+l != 0 {
				t.Errorf("Pending() = %d, %d, %d after the request; want the fault met", r, st, l)
			}
			// The next request is answered as usual.
			if status, body, err := comment(t, client, s, is.ID, "again"); err != nil || status != 200 || strings.Contains(body, "errors") {
				t.Errorf("the next comment = %d %q, %v; want 200", status, body, err)
			}
			if w := s.Writes(); len(w) == 0 || w[len(w)-1].Lost {
				t.Errorf("Writes() = %+v; want the next comment last, not lost", w)
			}
		})
	}
}

// TestRateLimitReply: GitHub's headers for its two kinds of limit.
func TestRateLimitReply(t *testing.T) {
	now := time.Unix(1767225600, 250e6)
	p := RateLimitReply(403, false, 3*time.Second, now)
	if p.Header.Get("X-RateLimit-Remaining") != "0" || p.Header.Get("Retry-After") != "" || !strings.Contains(p.Body, "API rate limit exceeded") {
		t.Errorf("primary: %+v; want x-ratelimit-remaining 0, no retry-after, GitHub's message", p)
	}
	if reset, _ := strconv.ParseInt(p.Header.Get("X-RateLimit-Reset"), 10, 64); reset != 1767225604 {
		t.Errorf("primary: x-ratelimit-reset %d; want 1767225604 (now + 3 s, rounded up)", reset)
	}
	s := RateLimitReply(429, true, 1500*time.Millisecond, now)
	if s.Status != 429 || s.Header.Get("Retry-After") != "2" || s.Header.Get("X-RateLimit-Remaining") == "0" || !strings.Contains(s.Body, "secondary rate limit") {
		t.Errorf("secondary: %+v; want 429, retry-after 2, requests left, GitHub's message", s)
	}
}
