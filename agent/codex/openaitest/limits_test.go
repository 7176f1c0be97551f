package openaitest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent/codex/openaitest"
)

// TestFailures: a turn's Failure answers as the API does (status, the
// error object, the headers), and Repeat answers that many more requests
// before the next turn.
func TestFailures(t *testing.T) {
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	for _, c := range []struct {
		name   string
		f      *openaitest.Failure
		want   map[string]any
		header map[string]string
	}{
		{"rate limited", openaitest.RateLimited(20 * time.Second),
			map[string]any{"type": "requests", "code": "rate_limit_exceeded", "param": nil},
			map[string]string{"retry-after": "20", "x-ratelimit-reset-requests": "20s", "x-ratelimit-remaining-requests": "0"}},
		{"quota", openaitest.QuotaExceeded(),
			map[string]any{"type": "insufficient_quota", "code": "insufficient_quota", "param": nil}, nil},
		{"usage limit", openaitest.UsageLimitReached("plus", reset),
			map[string]any{"type": "usage_limit_reached", "code": nil, "param": nil, "plan_type": "plus", "resets_at": float64(reset.Unix())},
			map[string]string{"x-codex-primary-used-percent": "100"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := openaitest.NewServer(t)
			srv.Script(openaitest.Turn{Failure: c.f, Repeat: 1}, openaitest.Turn{Text: "ok"})
			for i := range 3 {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/responses", strings.NewReader(`{"input":[]}`))
				req.Header.Set("Authorization", "Bearer "+openaitest.Key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if i == 2 {
					if resp.StatusCode != http.StatusOK {
						t.Errorf("request 3: status %d; want 200 (the turn after the repeated failure)", resp.StatusCode)
					}
					break
				}
				if resp.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("request %d: status %d; want 429", i+1, resp.StatusCode)
				}
				var body struct{ Error map[string]any }
				if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
					t.Fatal(err)
				}
				for k, v := range c.want {
					if diff := cmp.Diff(v, body.Error[k]); diff != "" {
						t.Errorf("error.%s (-want +got):\n%s", k, diff)
					}
				}
				if msg, _ := body.Error["message"].(string); msg == "" {
					t.Errorf("error.message is empty: %v", body.Error)
				}
				for k, v := range c.header {
					if got := resp.Header.Get(k); got != v {
						t.Errorf("header %s = %q; want %q", k, got, v)
					}
				}
			}
		})
	}
}
