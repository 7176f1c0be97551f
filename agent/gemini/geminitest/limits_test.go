package geminitest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/agent/gemini/geminitest"
)

// TestExhausted: a turn's Failure answers as the Gemini API does at a
// spent quota: 429 RESOURCE_EXHAUSTED with a QuotaFailure naming the
// quota and a RetryInfo delay; Repeat answers that many more requests.
func TestExhausted(t *testing.T) {
	srv := geminitest.NewServer(t)
	srv.Script(geminitest.Turn{Failure: geminitest.Exhausted(geminitest.PerDay, 38*time.Second), Repeat: 1}, geminitest.Turn{Text: "ok"})
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1beta/models/"+geminitest.Model+":streamGenerateContent?alt=sse", strings.NewReader(`{}`))
		req.Header.Set("x-goog-api-key", geminitest.Key)
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
		var body struct {
			Error struct {
				Code    int
				Status  string
				Message string
				Details []map[string]any
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		e := body.Error
		if resp.StatusCode != 429 || e.Code != 429 || e.Status != "RESOURCE_EXHAUSTED" || !strings.Contains(e.Message, "Please retry in 38.0s.") {
			t.Fatalf("request %d: %d %+v; want 429 RESOURCE_EXHAUSTED", i+1, resp.StatusCode, e)
		}
		var quotaID, delay string
		for _, d := range e.Details {
			switch d["@type"] {
			case "type.googleapis.com/google.rpc.QuotaFailure":
				v, _ := d["violations"].([]any)
				if len(v) == 1 {
					quotaID, _ = v[0].(map[string]any)["quotaId"].(string)
				}
			case "type.googleapis.com/google.rpc.RetryInfo":
				delay, _ = d["retryDelay"].(string)
			}
		}
		if quotaID != geminitest.PerDay || delay != "38s" {
			t.Errorf("request %d: quotaId %q, retryDelay %q; want %q, 38s", i+1, quotaID, delay, geminitest.PerDay)
		}
	}
}
