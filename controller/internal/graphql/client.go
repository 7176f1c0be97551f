package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// Operation is one GraphQL document a client sends.
type Operation struct {
	// Name is the document's operation name; errors and logs name it.
	Name  string
	Query string
	// Idempotent operations are retried on every transient failure;
	// others only on rate limits, never after an HTTP 5xx or a transport
	// error, after which they may have taken effect.
	Idempotent bool
}

// Options configure one Client.
type Options struct {
	// Endpoint is the URL every operation is POSTed to.
	Endpoint string
	// Authorization is the value of the Authorization header, as the
	// service wants it ("bearer <token>"). It is never logged nor put into
	// an error.
	Authorization string
	// AuthHint ends the error when the service rejects the credential: what
	// to check, e.g. "the API key in $LINEAR_API_KEY" (Secret.Hint). It must
	// not contain the credential.
	AuthHint string
	// HTTPClient sends the requests; a client with a 30 s timeout when nil.
	HTTPClient *http.Client
	// Retry is the retry policy; zero fields take the defaults of Retry.
	Retry Retry
	// Logger receives one warning per retry; discarded when nil.
	Logger *slog.Logger
}

// Client sends a Service's operations. It is safe for concurrent use.
type Client[E any] struct {
	svc      *Service[E]
	endpoint string
	auth     string // never logged, never in an error
	hint     string
	http     *http.Client
	log      *slog.Logger
	retry    Retry
}

// New returns a client of svc with opts.
func New[E any](svc *Service[E], opts Options) *Client[E] {
	c := &Client[E]{
		svc:      svc,
		endpoint: opts.Endpoint,
		auth:     opts.Authorization,
		hint:     opts.AuthHint,
		http:     opts.HTTPClient,
		log:      opts.Logger,
		retry:    opts.Retry.withDefaults(),
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// request is a GraphQL request on the wire.
type request struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables,omitempty"`
}

// Do sends op with vars and decodes the response's data into out (unless
// out is nil), retrying transient failures per Options.Retry. Its errors
// start with the Service's Prefix and the operation's name; callers
// branch on them with errors.Is (ErrAuth, ErrRateLimited, ErrMalformed,
// the context's error) and errors.As (the Service's APIError).
func (c *Client[E]) Do(ctx context.Context, op Operation, vars map[string]any, out any) error {
	_, err := c.DoHeader(ctx, op, vars, out)
	return err
}

// DoHeader is Do that also returns the header of the last response
// received, for what a service says only there (GitHub's token scopes):
// on success the header of the response decoded into out, on failure
// that of the last attempt that got an answer, nil when none did.
func (c *Client[E]) DoHeader(ctx context.Context, op Operation, vars map[string]any, out any) (http.Header, error) {
	p := c.svc.Prefix
	body, err := json.Marshal(request{Query: op.Query, OperationName: op.Name, Variables: vars})
	if err != nil {
		return nil, fmt.Errorf("%s: %s: encode request: %w", p, op.Name, err)
	}
	var last http.Header
	for attempt := 1; ; attempt++ {
		data, h, tr, err := c.attempt(ctx, op, body)
		if h != nil {
			last = h
		}
		if err != nil {
			return last, err
		}
		if tr == nil {
			if out == nil {
				return last, nil
			}
			if err := json.Unmarshal(data, out); err != nil {
				return last, fmt.Errorf("%s: %s: %w: data does not match the query: %s", p, op.Name, ErrMalformed, JSONProblem(err))
			}
			return last, nil
		}
		if !tr.RateLimited && !op.Idempotent {
			return last, fmt.Errorf("%s: %s: %w (not retried: %w)", p, op.Name, tr.Err, ErrUncertain)
		}
		if tr.Wait > c.retry.MaxWait {
			return last, fmt.Errorf("%s: %s: %w (%v): %s asks to wait %s, more than %s",
				p, op.Name, ErrRateLimited, tr.Err, c.svc.Name, tr.Wait.Round(time.Second), c.retry.MaxWait)
		}
		if attempt >= c.retry.Attempts {
			if tr.RateLimited {
				return last, fmt.Errorf("%s: %s: %w after %d attempts (%v)", p, op.Name, ErrRateLimited, attempt, tr.Err)
			}
			return last, fmt.Errorf("%s: %s: gave up after %d attempts: %w", p, op.Name, attempt, tr.Err)
		}
		wait := max(backoff(c.retry, attempt), tr.Wait)
		c.log.Warn(p+" request failed; retrying", "operation", op.Name,
			"attempt", attempt, "wait", wait, "err", tr.Err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, fmt.Errorf("%s: %s: %w", p, op.Name, ctx.Err())
		case <-t.C:
		}
	}
}

// attempt sends one request. A nil *Transient and nil error mean success.
// The header is the response's, nil when none arrived.
func (c *Client[E]) attempt(ctx context.Context, op Operation, body []byte) (json.RawMessage, http.Header, *Transient, error) {
	p := c.svc.Prefix
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %s: %w", p, op.Name, err)
	}
	accept := c.svc.Accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "legion")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, fmt.Errorf("%s: %s: %w", p, op.Name, ctx.Err())
		}
		return nil, nil, &Transient{Err: err}, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, resp.Header, nil, fmt.Errorf("%s: %s: %w", p, op.Name, ctx.Err())
		}
		return nil, resp.Header, &Transient{Err: fmt.Errorf("read response: %w", err)}, nil
	}
	data, tr, err := c.svc.Parse(op.Name, resp.StatusCode, resp.Header, raw, time.Now())
	var ae *authError
	if errors.As(err, &ae) {
		hint := ""
		if c.hint != "" {
			hint = ": check " + c.hint
		}
		err = fmt.Errorf("%s: %w%s%s", p, ErrAuth, hint, ae.suffix())
	}
	return data, resp.Header, tr, err
}
