package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds a response body read into memory.
const maxBody = 32 << 20

// operation is one GraphQL document Legion sends. Operations that are not
// idempotent are retried only on rate limits, never on 5xx or transport
// errors, after which they may have run.
type operation struct {
	name       string
	query      string
	idempotent bool
}

type request struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables,omitempty"`
}

type response struct {
	Data    json.RawMessage `json:"data"`
	Errors  []gqlError      `json:"errors"`
	Message string          `json:"message"` // REST-style error bodies (401, 403)
}

// gqlError is a GitHub GraphQL error; GitHub puts its type at the top
// level (NOT_FOUND, FORBIDDEN, RATE_LIMITED, ...).
type gqlError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// APIError is a GraphQL error GitHub answered with (unknown repository,
// missing permission, unmergeable pull request, ...). It is not retried.
type APIError struct {
	Operation string
	Status    int    // HTTP status
	Type      string // type of the first error, e.g. NOT_FOUND
	Message   string // the errors' messages, joined with "; "
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("github: %s: %s", e.Operation, e.Message)
	if e.Type != "" {
		s += " (" + e.Type + ")"
	}
	return s
}

type retryable struct {
	err         error
	rateLimited bool
	wait        time.Duration
}

// authError is an ErrAuth with GitHub's reason, if it gave one.
type authError struct{ reason string }

func (e *authError) Error() string { return "authentication failed: " + e.reason }
func (e *authError) Unwrap() error { return ErrAuth }

// do sends op with vars and decodes its data into out, retrying transient
// failures per c.retry.
func (c *Client) do(ctx context.Context, op operation, vars map[string]any, out any) error {
	body, err := json.Marshal(request{Query: op.query, OperationName: op.name, Variables: vars})
	if err != nil {
		return fmt.Errorf("github: %s: encode request: %w", op.name, err)
	}
	for attempt := 1; ; attempt++ {
		data, rt, err := c.attempt(ctx, op, body)
		if err != nil {
			return err
		}
		if rt == nil {
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("github: %s: %w: data does not match the query: %s", op.name, ErrMalformed, jsonProblem(err))
			}
			return nil
		}
		if !rt.rateLimited && !op.idempotent {
			return fmt.Errorf("github: %s: %w (not retried: it may have taken effect)", op.name, rt.err)
		}
		if rt.wait > c.retry.MaxWait {
			return fmt.Errorf("github: %s: %w (%v): GitHub asks to wait %s, more than %s",
				op.name, ErrRateLimited, rt.err, rt.wait.Round(time.Second), c.retry.MaxWait)
		}
		if attempt >= c.retry.Attempts {
			if rt.rateLimited {
				return fmt.Errorf("github: %s: %w after %d attempts (%v)", op.name, ErrRateLimited, attempt, rt.err)
			}
			return fmt.Errorf("github: %s: gave up after %d attempts: %w", op.name, attempt, rt.err)
		}
		wait := max(backoff(c.retry, attempt), rt.wait)
		c.log.Warn("github request failed; retrying", "operation", op.name,
			"attempt", attempt, "wait", wait, "err", rt.err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("github: %s: %w", op.name, ctx.Err())
		case <-t.C:
		}
	}
}

// backoff is the wait after the attempt-th failure: Min·2^(attempt-1)
// capped at Max, with equal jitter.
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

func (c *Client) attempt(ctx context.Context, op operation, body []byte) (json.RawMessage, *retryable, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.Endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("github: %s: %w", op.name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("User-Agent", "legion")
	req.Header.Set("Authorization", "bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("github: %s: %w", op.name, ctx.Err())
		}
		return nil, &retryable{err: err}, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("github: %s: %w", op.name, ctx.Err())
		}
		return nil, &retryable{err: fmt.Errorf("read response: %w", err)}, nil
	}
	data, rt, err := parseResponse(op.name, resp.StatusCode, resp.Header, raw, time.Now())
	var ae *authError
	if errors.As(err, &ae) {
		err = fmt.Errorf("github: %w: check the token in %s%s", ErrAuth, c.tokenFrom, ae.reason)
	}
	return data, rt, err
}

// parseResponse classifies one HTTP response. It is pure, for tests and
// fuzzing: success returns data; a transient failure a retryable; anything
// else an error (*authError, ErrMalformed or *APIError).
func parseResponse(opName string, status int, h http.Header, raw []byte, now time.Time) (json.RawMessage, *retryable, error) {
	if len(raw) > maxBody {
		return nil, nil, fmt.Errorf("github: %s: %w: body larger than %d bytes", opName, ErrMalformed, maxBody)
	}
	var r response
	jsonErr := json.Unmarshal(raw, &r)
	rateLimited := status == http.StatusTooManyRequests ||
		status == http.StatusForbidden && (h.Get("X-RateLimit-Remaining") == "0" || h.Get("Retry-After") != "" ||
			strings.Contains(strings.ToLower(r.Message), "rate limit"))
	for _, e := range r.Errors {
		rateLimited = rateLimited || e.Type == "RATE_LIMITED"
	}
	switch {
	case rateLimited:
		why := fmt.Sprintf("HTTP %d", status)
		if status == http.StatusOK {
			why += ", RATE_LIMITED"
		}
		return nil, &retryable{err: errors.New(why), rateLimited: true, wait: rateLimitWait(h, now)}, nil
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		reason := ""
		if m := strings.TrimSpace(r.Message); m != "" && len(m) < 200 {
			reason = " (GitHub says: " + m + ")"
		}
		return nil, nil, &authError{reason: reason}
	case status >= 500:
		return nil, &retryable{err: fmt.Errorf("server error: HTTP %d%s", status, snippet(raw))}, nil
	}
	if jsonErr != nil && (status < 200 || status > 299) {
		return nil, nil, fmt.Errorf("github: %s: HTTP %d%s", opName, status, snippet(raw))
	}
	if jsonErr != nil {
		return nil, nil, fmt.Errorf("github: %s: %w: want a JSON object {data, errors}, got %s (HTTP %d%s)",
			opName, ErrMalformed, jsonProblem(jsonErr), status, contentType(h))
	}
	if len(r.Errors) > 0 {
		ae := &APIError{Operation: opName, Status: status, Type: r.Errors[0].Type}
		msgs := make([]string, 0, len(r.Errors))
		for _, e := range r.Errors {
			msgs = append(msgs, e.Message)
		}
		ae.Message = strings.Join(msgs, "; ")
		return nil, nil, ae
	}
	if status < 200 || status > 299 {
		return nil, nil, fmt.Errorf("github: %s: HTTP %d%s", opName, status, snippet(raw))
	}
	if len(r.Data) == 0 || bytes.Equal(r.Data, []byte("null")) {
		return nil, nil, fmt.Errorf("github: %s: %w: no data and no errors", opName, ErrMalformed)
	}
	return r.Data, nil, nil
}

// rateLimitWait is the wait a rate-limited response asks for: Retry-After
// (seconds or an HTTP date), else X-RateLimit-Reset (epoch seconds) when
// the budget is exhausted. 0 if none applies.
func rateLimitWait(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if n, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 10, 64); err == nil && n > 0 && n < 1e11 {
			return max(time.Unix(n, 0).Sub(now), 0)
		}
	}
	return 0
}

func snippet(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return ""
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return ": " + strconv.Quote(s)
}

func contentType(h http.Header) string {
	if ct := h.Get("Content-Type"); ct != "" {
		return ", Content-Type " + ct
	}
	return ""
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("JSON %s where %s belongs", te.Value, te.Field)
	}
	return err.Error()
}
