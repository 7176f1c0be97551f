package openaitest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Forever is a Turn.Repeat that answers every matching request from then on.
const Forever = -1

// APIError is the error object of a Responses API error body:
// {"error":{"message","type","param","code"}}, and the fields the
// ChatGPT backend adds to a usage limit (plan_type, resets_at,
// resets_in_seconds), which Codex reads (codex FACTS X40).
type APIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// The ChatGPT backend's usage limit (type usage_limit_reached).
	PlanType        string `json:"plan_type,omitempty"`
	ResetsAt        int64  `json:"resets_at,omitempty"`
	ResetsInSeconds int64  `json:"resets_in_seconds,omitempty"`
}

// Failure is an HTTP error response instead of a stream.
type Failure struct {
	Status int
	Error  APIError
	Header http.Header // extra response headers (retry-after, …)
}

func code(s string) *string { return &s }

// RateLimited is a 429 rate_limit_exceeded as the OpenAI API sends it
// for a requests-per-minute limit: the message says "Please try again in
// Ns", retry-after is N whole seconds (at least 1), and the
// x-ratelimit-*-requests and -tokens headers say the limit is spent, to
// reset in retryAfter (as a duration, "20s", the API's format).
func RateLimited(retryAfter time.Duration) *Failure {
	secs := max(1, int(retryAfter.Round(time.Second)/time.Second))
	h := http.Header{}
	h.Set("retry-after", strconv.Itoa(secs))
	h.Set("x-ratelimit-limit-requests", "3")
	h.Set("x-ratelimit-remaining-requests", "0")
	h.Set("x-ratelimit-reset-requests", (time.Duration(secs) * time.Second).String())
	h.Set("x-ratelimit-limit-tokens", "40000")
	h.Set("x-ratelimit-remaining-tokens", "39000")
	h.Set("x-ratelimit-reset-tokens", "1.5s")
	return &Failure{
		Status: http.StatusTooManyRequests,
		Error: APIError{
			Type: "requests", Code: code("rate_limit_exceeded"),
			Message: "Rate limit reached for fake-model in organization org-legion on requests per min (RPM): Limit 3, Used 3, Requested 1. " +
				"Please try again in " + strconv.Itoa(secs) + "s. Visit https://platform.openai.com/account/rate-limits to learn more.",
		},
		Header: h,
	}
}

// QuotaExceeded is a 429 insufficient_quota as the OpenAI API sends it
// when the account's credit is spent: no reset time, no retry-after.
func QuotaExceeded() *Failure {
	return &Failure{
		Status: http.StatusTooManyRequests,
		Error: APIError{
			Type: "insufficient_quota", Code: code("insufficient_quota"),
			Message: "You exceeded your current quota, please check your plan and billing details. " +
				"For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
		},
	}
}

// UsageLimitReached is a 429 usage_limit_reached as the ChatGPT backend
// sends it when a ChatGPT plan's usage limit is spent (Codex signed in
// with ChatGPT): plan_type, resets_at (Unix seconds) and
// resets_in_seconds in the error object, and the x-codex-primary-*
// headers of the plan's window.
func UsageLimitReached(plan string, reset time.Time) *Failure {
	in := max(0, int64(time.Until(reset).Round(time.Second)/time.Second))
	h := http.Header{}
	h.Set("x-codex-primary-used-percent", "100")
	h.Set("x-codex-primary-window-minutes", "300")
	h.Set("x-codex-primary-reset-at", strconv.FormatInt(reset.Unix(), 10))
	h.Set("x-codex-primary-reset-after-seconds", strconv.FormatInt(in, 10))
	return &Failure{
		Status: http.StatusTooManyRequests,
		Error: APIError{
			Type: "usage_limit_reached", Message: "The usage limit has been reached",
			PlanType: plan, ResetsAt: reset.Unix(), ResetsInSeconds: in,
		},
		Header: h,
	}
}

// write answers with f.
func (f *Failure) write(w http.ResponseWriter) {
	for k, vs := range f.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-request-id", "req_legion_openaitest")
	w.WriteHeader(f.Status)
	b, _ := json.Marshal(map[string]any{"error": f.Error})
	w.Write(b)
}
