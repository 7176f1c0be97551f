package graphql

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestRetryDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want Retry
	}{
		{Retry{}, Retry{Attempts: 5, Min: 500 * time.Millisecond, Max: 30 * time.Second, MaxWait: 2 * time.Minute}},
		{Retry{Attempts: 2, Min: time.Second, Max: time.Millisecond, MaxWait: time.Hour},
			Retry{Attempts: 2, Min: time.Second, Max: time.Second, MaxWait: time.Hour}},
		{Retry{Attempts: -1, Min: -1, Max: -1, MaxWait: -1}, Retry{}.withDefaults()},
	} {
		if got := tc.in.withDefaults(); got != tc.want {
			t.Errorf("%+v.withDefaults() = %+v; want %+v", tc.in, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	r := Retry{Min: 100 * time.Millisecond, Max: time.Second}.withDefaults()
	for attempt, base := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		base *= time.Millisecond
		for range 50 {
			if got := backoff(r, attempt+1); got < base/2 || got > base {
				t.Fatalf("backoff(attempt %d) = %v; want within [%v, %v]", attempt+1, got, base/2, base)
			}
		}
	}
	for _, attempt := range []int{33, 64, 200} {
		if got := backoff(r, attempt); got < r.Max/2 || got > r.Max {
			t.Errorf("backoff(attempt %d) = %v; want within [%v, %v]", attempt, got, r.Max/2, r.Max)
		}
	}
}

// TestWaits: the waits servers ask for, in Retry-After and in reset times.
func TestWaits(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	retryAfter := func(v string, now time.Time) (time.Duration, bool) {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		return RetryAfter(h, now)
	}
	for _, tc := range []struct {
		name   string
		parse  func(string, time.Time) (time.Duration, bool)
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"RetryAfter/none", retryAfter, "", 0, false},
		{"RetryAfter/seconds", retryAfter, "7", 7 * time.Second, true},
		{"RetryAfter/zero", retryAfter, "0", 0, true},
		{"RetryAfter/spaces", retryAfter, " 3 ", 3 * time.Second, true},
		{"RetryAfter/date", retryAfter, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"RetryAfter/date in the past", retryAfter, now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"RetryAfter/negative", retryAfter, "-5", 0, false},
		{"RetryAfter/garbage", retryAfter, "soon", 0, false},
		{"ResetIn/seconds", ResetIn, fmt.Sprint(now.Add(42 * time.Second).Unix()), 42 * time.Second, true},
		{"ResetIn/milliseconds", ResetIn, fmt.Sprint(now.Add(1500 * time.Millisecond).UnixMilli()), 1500 * time.Millisecond, true},
		{"ResetIn/past", ResetIn, fmt.Sprint(now.Add(-time.Minute).Unix()), 0, true},
		{"ResetIn/empty", ResetIn, "", 0, false},
		{"ResetIn/zero", ResetIn, "0", 0, false},
		{"ResetIn/negative", ResetIn, "-1", 0, false},
		{"ResetIn/garbage", ResetIn, "later", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.parse(tc.value, now)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("%s(%q) = %v, %v; want %v, %v", tc.name, tc.value, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
