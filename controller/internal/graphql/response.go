package graphql

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds a response body read into memory.
const maxBody = 32 << 20

// Errors callers can branch on with errors.Is. The client packages export
// them under their own names (linear.ErrAuth, github.ErrAuth, ...): they
// are the same values.
var (
	// ErrAuth: the service rejected the credential. Never retried.
	ErrAuth = errors.New("authentication failed")
	// ErrRateLimited: still rate limited after the retries, or asked to
	// wait longer than Retry.MaxWait.
	ErrRateLimited = errors.New("rate limited")
	// ErrMalformed: the response is not the JSON the operation expects.
	ErrMalformed = errors.New("malformed response")
	// ErrUncertain: an operation that is not idempotent failed in a way
	// that may have let it take effect (HTTP 5xx, a transport error, its
	// answer lost), so it was not sent again. The caller may look whether
	// it did before sending it again.
	ErrUncertain = errors.New("it may have taken effect")
)

// Service describes one GraphQL API: how messages name it and how its
// responses are read. It holds no credential and no per-client state, so
// a client package keeps one in a package variable. E is the service's
// GraphQL error object, as it decodes from the response's "errors".
type Service[E any] struct {
	// Name is how messages name the service ("Linear").
	Name string
	// Prefix starts every error and log message ("linear").
	Prefix string
	// Accept is the Accept header sent; "application/json" when empty.
	Accept string
	// Classify reads what the service says beyond the HTTP status: whether
	// a response is an authentication failure or a rate limit, and how
	// long it asks to wait. It sees every response and must not panic on
	// any; nil reads none (only HTTP 5xx is then retried).
	Classify func(r *Response[E]) Verdict
	// APIError turns a response's GraphQL errors (at least one) into the
	// error the client returns, e.g. the client's *APIError. Required.
	APIError func(op string, r *Response[E]) error
}

// Response is one HTTP response as a Service's hooks see it.
type Response[E any] struct {
	Status int
	Header http.Header
	// Errors are the GraphQL errors of the body, as far as it decoded;
	// nil when it has none or is not JSON.
	Errors []E
	// Message is a top-level string "message", which some services send
	// instead of GraphQL errors (GitHub with HTTP 401 and 403); "" if none.
	Message string
	// Now is when the response arrived, to turn reset times into waits.
	Now time.Time
}

// Kind is what a Verdict says a response is.
type Kind int

const (
	// Ordinary responses are read by their HTTP status and body.
	Ordinary Kind = iota
	// AuthFailed: the service rejected the credential.
	AuthFailed
	// RateLimited: the service refused the request before running it;
	// any operation may be sent again, after Verdict.Wait.
	RateLimited
)

// Verdict is a Service's reading of a response.
type Verdict struct {
	Kind Kind
	// Reason is added to the error: for AuthFailed the service's own words
	// on why (never the credential), for RateLimited the signal beyond the
	// HTTP status (an error code). "" for none.
	Reason string
	// Wait is how long a rate-limited response asks to wait; 0 for none.
	Wait time.Duration
}

// Transient is a failed attempt that another attempt may cure.
type Transient struct {
	Err error
	// RateLimited: the request was refused before it ran, so even an
	// operation that is not idempotent may be sent again.
	RateLimited bool
	// Wait is the server-requested wait; 0 for none.
	Wait time.Duration
}

// authError is an ErrAuth with the service's reason, if it gave one.
type authError struct{ reason string }

func (e *authError) Error() string { return ErrAuth.Error() + e.suffix() }
func (e *authError) Unwrap() error { return ErrAuth }

func (e *authError) suffix() string {
	if e.reason == "" {
		return ""
	}
	return " (" + e.reason + ")"
}

// Parse reads one HTTP response to the operation called op. It is pure,
// for tests and fuzzing. Success returns the response's data; a failure
// that another attempt may cure returns a *Transient; anything else
// returns an error: one wrapping ErrAuth or ErrMalformed, the error of
// s.APIError, or one naming the HTTP status.
func (s *Service[E]) Parse(op string, status int, h http.Header, raw []byte, now time.Time) (json.RawMessage, *Transient, error) {
	if len(raw) > maxBody {
		return nil, nil, fmt.Errorf("%s: %s: %w: body larger than %d bytes", s.Prefix, op, ErrMalformed, maxBody)
	}
	var body struct {
		Data    json.RawMessage `json:"data"`
		Errors  []E             `json:"errors"`
		Message json.RawMessage `json:"message"` // a string, if anything: a hint, never a reason to fail
	}
	jsonErr := json.Unmarshal(raw, &body)
	r := &Response[E]{Status: status, Header: h, Errors: body.Errors, Now: now}
	if json.Unmarshal(body.Message, &r.Message) != nil {
		r.Message = ""
	}
	var v Verdict
	if s.Classify != nil {
		v = s.Classify(r)
	}
	switch {
	case v.Kind == AuthFailed:
		return nil, nil, &authError{reason: v.Reason}
	case v.Kind == RateLimited:
		why := fmt.Sprintf("HTTP %d", status)
		if v.Reason != "" {
			why += ", " + v.Reason
		}
		return nil, &Transient{Err: errors.New(why), RateLimited: true, Wait: v.Wait}, nil
	case status >= 500:
		return nil, &Transient{Err: fmt.Errorf("server error: HTTP %d%s", status, snippet(raw))}, nil
	}
	ok := status >= 200 && status <= 299
	if jsonErr != nil && !ok {
		return nil, nil, fmt.Errorf("%s: %s: HTTP %d%s", s.Prefix, op, status, snippet(raw))
	}
	if jsonErr != nil {
		return nil, nil, fmt.Errorf("%s: %s: %w: want a JSON object {data, errors}, got %s (HTTP %d%s)",
			s.Prefix, op, ErrMalformed, JSONProblem(jsonErr), status, contentType(h))
	}
	if len(body.Errors) > 0 {
		return nil, nil, s.APIError(op, r)
	}
	if !ok {
		return nil, nil, fmt.Errorf("%s: %s: HTTP %d%s", s.Prefix, op, status, snippet(raw))
	}
	if len(body.Data) == 0 || bytes.Equal(body.Data, []byte("null")) {
		return nil, nil, fmt.Errorf("%s: %s: %w: no data and no errors", s.Prefix, op, ErrMalformed)
	}
	return body.Data, nil, nil
}

// JSONProblem says briefly what is wrong with a JSON document, from the
// error decoding it: where the syntax breaks, or which field has the
// wrong type.
func JSONProblem(err error) string {
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

// snippet is the start of a body for an error message: ": " and at most
// 200 bytes, quoted; "" for an empty body.
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
