package graphql

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Retry is the retry policy for transient failures.
type Retry struct {
	// Attempts is the number of tries in all, first included; 5 when zero.
	Attempts int
	// Min is the first backoff (500 ms when zero); each further one
	// doubles, capped at Max (30 s when zero), with equal jitter.
	Min, Max time.Duration
	// MaxWait is the longest server-requested wait (Retry-After, a rate
	// limit's reset time) honoured; a longer one fails at once with
	// ErrRateLimited, leaving the retry to the next tick. 2 min when zero.
	MaxWait time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = 5
	}
	if r.Min <= 0 {
		r.Min = 500 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 30 * time.Second
	}
	if r.Max < r.Min {
		r.Max = r.Min
	}
	if r.MaxWait <= 0 {
		r.MaxWait = 2 * time.Minute
	}
	return r
}

// backoff is the wait after the attempt-th failure: Min·2^(attempt-1)
// capped at Max, with equal jitter (half fixed, half random).
func backoff(r Retry, attempt int) time.Duration {
	d := r.Max
	if attempt-1 < 32 {
		if e := r.Min << (attempt - 1); e > 0 && e < r.Max {
			d = e
		}
	}
	half := d / 2
	return half + rand.N(half+1)
}

// RetryAfter returns the wait a Retry-After header asks for (seconds or an
// HTTP date; a date in the past is 0), and false when there is no header
// or it is neither.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// ResetIn returns how far ahead of now a rate limit's reset time v is (0
// when past), and false when v is not a positive integer. v is in epoch
// seconds, or in epoch milliseconds when it is too large to be seconds
// (after the year 5138).
func ResetIn(v string, now time.Time) (time.Duration, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	t := time.Unix(n, 0)
	if n > 1e11 {
		t = time.UnixMilli(n)
	}
	return max(t.Sub(now), 0), true
}
