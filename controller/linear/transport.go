package linear

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
// idempotent are retried only on rate limits (rejected before execution),
// never on 5xx or transport errors, after which they may have run.
type operation struct {
	name       string
	query      string
	idempotent bool
}

// request is a GraphQL request on the wire.
type request struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables,omitempty"`
}

// response is a GraphQL response on the wire.
type response struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code                   string `json:"code"`
		Type                   string `json:"type"`
		UserPresentableMessage string `json:"userPresentableMessage"`
	} `json:"extensions"`
}

// APIError is a GraphQL error Linear answered with (bad input, unknown
// entity, missing permission, ...). It is not retried.
type APIError struct {
	Operation string
	Status    int    // HTTP status
	Code      string // extensions.code of the first error, e.g. INVALID_INPUT
	Message   string // the errors' messages, joined with "; "
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("linear: %s: %s", e.Operation, e.Message)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s
}

// notFound reports whether err says an entity does not exist.
func notFound(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	m := strings.ToLower(ae.Message)
	return strings.Contains(m, "not found") || strings.Contains(m, "could not find")
}

// retryable is an attempt's failure that another attempt may cure.
type retryable struct {
	err         error
	rateLimited bool
	wait        time.Duration // server-requested wait; 0 if none
}

// do sends op with vars and decodes its data into out, retrying transient
// failures per c.retry.
func (c *Client) do(ctx context.Context, op operation, vars map[string]any, out any) error {
	body, err := json.Marshal(request{Query: op.query, OperationName: op.name, Variables: vars})
	if err != nil {
		return fmt.Errorf("linear: %s: encode request: %w", op.name, err)
	}
	for attempt := 1; ; attempt++ {
		data, rt, err := c.attempt(ctx, op, body)
		if err != nil {
			return err
		}
		if rt == nil {
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("linear: %s: %w: data does not match the query: %v", op.name, ErrMalformed, err)
			}
			return nil
		}
		if !rt.rateLimited && !op.idempotent {
			return fmt.Errorf("linear: %s: %w (not retried: it may have taken effect)", op.name, rt.err)
		}
		if rt.wait > c.retry.MaxWait {
			return fmt.Errorf("linear: %s: %w (%v): Linear asks to wait %s, more than %s",
				op.name, ErrRateLimited, rt.err, rt.wait.Round(time.Second), c.retry.MaxWait)
		}
		if attempt >= c.retry.Attempts {
			if rt.rateLimited {
				return fmt.Errorf("linear: %s: %w after %d attempts (%v)", op.name, ErrRateLimited, attempt, rt.err)
			}
			return fmt.Errorf("linear: %s: gave up after %d attempts: %w", op.name, attempt, rt.err)
		}
		wait := max(backoff(c.retry, attempt), rt.wait)
		c.log.Warn("linear request failed; retrying", "operation", op.name,
			"attempt", attempt, "wait", wait, "err", rt.err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("linear: %s: %w", op.name, ctx.Err())
		case <-t.C:
		}
	}
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

// attempt sends one request. A nil retryable and nil error mean success.
func (c *Client) attempt(ctx context.Context, op operation, body []byte) (json.RawMessage, *retryable, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.Endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("linear: %s: %w", op.name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "legion")
	if strings.HasPrefix(c.key, "lin_oauth_") {
		req.Header.Set("Authorization", "Bearer "+c.key) // an OAuth access token
	} else {
		req.Header.Set("Authorization", c.key) // personal API keys go without "Bearer"
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("linear: %s: %w", op.name, ctx.Err())
		}
		return nil, &retryable{err: err}, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("linear: %s: %w", op.name, ctx.Err())
		}
		return nil, &retryable{err: fmt.Errorf("read response: %w", err)}, nil
	}
	data, rt, err := parseResponse(op.name, resp.StatusCode, resp.Header, raw, time.Now())
	if errors.Is(err, ErrAuth) {
		err = fmt.Errorf("linear: %w: check the API key in %s", ErrAuth, c.keyFrom)
	}
	return data, rt, err
}

// parseResponse classifies one HTTP response. It is pure, for tests and
// fuzzing: success returns data; a transient failure returns a retryable;
// anything else an error (ErrAuth, ErrMalformed or *APIError).
func parseResponse(opName string, status int, h http.Header, raw []byte, now time.Time) (json.RawMessage, *retryable, error) {
	if len(raw) > maxBody {
		return nil, nil, fmt.Errorf("linear: %s: %w: body larger than %d bytes", opName, ErrMalformed, maxBody)
	}
	var r response
	jsonErr := json.Unmarshal(raw, &r)
	codes := map[string]bool{}
	for _, e := range r.Errors {
		codes[strings.ToUpper(e.Extensions.Code)] = true
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden || codes["AUTHENTICATION_ERROR"]:
		return nil, nil, ErrAuth
	case status == http.StatusTooManyRequests || codes["RATELIMITED"]:
		why := fmt.Sprintf("HTTP %d", status)
		if codes["RATELIMITED"] {
			why += ", RATELIMITED"
		}
		return nil, &retryable{
			err:         errors.New(why),
			rateLimited: true,
			wait:        rateLimitWait(h, now),
		}, nil
	case status >= 500:
		return nil, &retryable{err: fmt.Errorf("server error: HTTP %d%s", status, snippet(raw))}, nil
	}
	if jsonErr != nil && (status < 200 || status > 299) {
		return nil, nil, fmt.Errorf("linear: %s: HTTP %d%s", opName, status, snippet(raw))
	}
	if jsonErr != nil {
		return nil, nil, fmt.Errorf("linear: %s: %w: want a JSON object {data, errors}, got %s (HTTP %d%s)",
			opName, ErrMalformed, jsonProblem(jsonErr), status, contentType(h))
	}
	if len(r.Errors) > 0 {
		ae := &APIError{Operation: opName, Status: status, Code: r.Errors[0].Extensions.Code}
		msgs := make([]string, 0, len(r.Errors))
		for _, e := range r.Errors {
			m := e.Message
			if e.Extensions.UserPresentableMessage != "" {
				m = e.Extensions.UserPresentableMessage
			}
			msgs = append(msgs, m)
		}
		ae.Message = strings.Join(msgs, "; ")
		return nil, nil, ae
	}
	if status < 200 || status > 299 {
		return nil, nil, fmt.Errorf("linear: %s: HTTP %d%s", opName, status, snippet(raw))
	}
	if len(r.Data) == 0 || bytes.Equal(r.Data, []byte("null")) {
		return nil, nil, fmt.Errorf("linear: %s: %w: no data and no errors", opName, ErrMalformed)
	}
	return r.Data, nil, nil
}

// rateLimitWait is the wait a rate-limited response asks for: Retry-After
// (seconds or an HTTP date), else the latest X-RateLimit-{Requests,
// Complexity}-Reset (epoch milliseconds; seconds accepted) of an exhausted
// budget. 0 if none applies.
func rateLimitWait(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	// Prefer the reset of an exhausted budget; with no Remaining headers,
	// the requests budget's.
	var wait time.Duration
	found := false
	for _, b := range []string{"Requests", "Complexity"} {
		if h.Get("X-RateLimit-"+b+"-Remaining") == "0" {
			if d, ok := resetIn(h.Get("X-RateLimit-"+b+"-Reset"), now); ok {
				wait, found = max(wait, d), true
			}
		}
	}
	if !found {
		if d, ok := resetIn(h.Get("X-RateLimit-Requests-Reset"), now); ok {
			wait = d
		}
	}
	return wait
}

// resetIn parses a reset time in epoch milliseconds (Linear's unit) or
// seconds and returns how far ahead it is.
func resetIn(v string, now time.Time) (time.Duration, bool) {
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
