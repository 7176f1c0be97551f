package github

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestRateLimitWait(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sec := func(d time.Duration) string { return fmt.Sprint(now.Add(d).Unix()) }
	for _, tc := range []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, 0},
		{"retry-after", http.Header{"Retry-After": {"60"}}, time.Minute},
		{"exhausted", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {sec(42 * time.Second)}}, 42 * time.Second},
		{"not exhausted", http.Header{"X-Ratelimit-Remaining": {"12"}, "X-Ratelimit-Reset": {sec(42 * time.Second)}}, 0},
		{"reset passed", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {sec(-time.Second)}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rateLimitWait(tc.h, now); got != tc.want {
				t.Errorf("rateLimitWait(%v) = %v; want %v", tc.h, got, tc.want)
			}
		})
	}
}
