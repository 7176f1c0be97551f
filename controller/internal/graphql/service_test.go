package graphql

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// testError is the error object of the test service: GraphQL's message
// and a code in extensions, as many services send it.
type testError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code string `json:"code"`
	} `json:"extensions"`
}

// testAPIError is what the test service makes of GraphQL errors.
type testAPIError struct {
	op, code, msg string
}

func (e *testAPIError) Error() string { return fmt.Sprintf("test: %s: %s (%s)", e.op, e.msg, e.code) }

// testService reads its signals the way a real one might: HTTP 401 rejects
// the credential, with the top-level message as the reason; HTTP 429 and
// the code SLOW_DOWN are rate limits, whose wait is Retry-After.
var testService = &Service[testError]{
	Name:   "Test",
	Prefix: "test",
	Accept: "application/test+json",
	Classify: func(r *Response[testError]) Verdict {
		for _, e := range r.Errors {
			if e.Extensions.Code == "SLOW_DOWN" {
				d, _ := RetryAfter(r.Header, r.Now)
				return Verdict{Kind: RateLimited, Reason: "SLOW_DOWN", Wait: d}
			}
		}
		switch r.Status {
		case http.StatusUnauthorized:
			return Verdict{Kind: AuthFailed, Reason: r.Message}
		case http.StatusTooManyRequests:
			d, _ := RetryAfter(r.Header, r.Now)
			return Verdict{Kind: RateLimited, Wait: d}
		}
		return Verdict{}
	},
	APIError: func(op string, r *Response[testError]) error {
		msgs := make([]string, 0, len(r.Errors))
		for _, e := range r.Errors {
			msgs = append(msgs, e.Message)
		}
		return &testAPIError{op: op, code: r.Errors[0].Extensions.Code, msg: strings.Join(msgs, "; ")}
	},
}

// isAPIError reports whether err is the test service's API error with code.
func isAPIError(err error, code string) bool {
	var ae *testAPIError
	return errors.As(err, &ae) && ae.code == code
}
