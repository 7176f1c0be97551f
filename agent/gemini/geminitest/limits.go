package geminitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Forever is a Turn.Repeat that answers every matching request from then on.
const Forever = -1

// Failure is an HTTP error response instead of a stream: the Gemini API's
// error body {"error":{"code","message","status","details"}}, details
// being google.rpc messages with their "@type".
type Failure struct {
	Code    int
	Status  string // RESOURCE_EXHAUSTED, …
	Message string
	Details []map[string]any
}

// QuotaMetric is the metric of the quota Exhausted names.
const QuotaMetric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"

// Exhausted is a 429 RESOURCE_EXHAUSTED as the Gemini API sends it when
// a quota is spent: a google.rpc.QuotaFailure naming the quota (quotaId,
// e.g. "GenerateRequestsPerMinutePerProjectPerModel-FreeTier" or
// "GenerateRequestsPerDayPerProjectPerModel-FreeTier"), a google.rpc.Help
// link, and a google.rpc.RetryInfo whose retryDelay is retry (whole
// seconds, "38s"); the message ends "Please retry in N.Ns.".
func Exhausted(quotaID string, retry time.Duration) *Failure {
	secs := max(1, int(retry.Round(time.Second)/time.Second))
	return &Failure{
		Code: http.StatusTooManyRequests, Status: "RESOURCE_EXHAUSTED",
		Message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n" +
			"* Quota exceeded for metric: " + QuotaMetric + ", limit: 10, model: " + Model + "\n" +
			fmt.Sprintf("Please retry in %d.0s.", secs),
		Details: []map[string]any{
			{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
				"quotaMetric": QuotaMetric, "quotaId": quotaID,
				"quotaDimensions": map[string]any{"location": "global", "model": Model}, "quotaValue": "10",
			}}},
			{"@type": "type.googleapis.com/google.rpc.Help", "links": []any{map[string]any{
				"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
			}}},
			{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": strconv.Itoa(secs) + "s"},
		},
	}
}

// Quota ids of Exhausted: a per-minute and a per-day quota.
const (
	PerMinute = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
	PerDay    = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
)

func (f *Failure) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(f.Code)
	e := map[string]any{"code": f.Code, "message": f.Message, "status": f.Status}
	if len(f.Details) > 0 {
		e["details"] = f.Details
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	w.Write(b)
}
