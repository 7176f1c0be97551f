package linear

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestRateLimitWait(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(d time.Duration) string { return fmt.Sprint(now.Add(d).UnixMilli()) }
	for _, tc := range []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, 0},
		{"retry-after seconds", http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{"retry-after date", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{"requests reset", http.Header{"X-Ratelimit-Requests-Remaining": {"0"}, "X-Ratelimit-Requests-Reset": {ms(20 * time.Second)}}, 20 * time.Second},
		{"reset without remaining", http.Header{"X-Ratelimit-Requests-Reset": {ms(5 * time.Second)}}, 5 * time.Second},
		{"complexity exhausted", http.Header{
			"X-Ratelimit-Requests-Remaining": {"100"}, "X-Ratelimit-Requests-Reset": {ms(time.Hour)},
			"X-Ratelimit-Complexity-Remaining": {"0"}, "X-Ratelimit-Complexity-Reset": {ms(30 * time.Second)}}, 30 * time.Second},
		{"reset in seconds", http.Header{"X-Ratelimit-Requests-Reset": {fmt.Sprint(now.Add(8 * time.Second).Unix())}}, 8 * time.Second},
		{"reset in the past", http.Header{"X-Ratelimit-Requests-Reset": {ms(-time.Minute)}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}, "X-Ratelimit-Requests-Reset": {"later"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rateLimitWait(tc.h, now); got != tc.want {
				t.Errorf("rateLimitWait(%v) = %v; want %v", tc.h, got, tc.want)
			}
		})
	}
}
