package github

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/legion-dev/legion/controller/internal/graphql"
)

// service is GitHub's GraphQL API as the transport reads it.
var service = &graphql.Service[gqlError]{
	Name:   "GitHub",
	Prefix: "github",
	// merge-info-preview: PullRequest.mergeStateStatus is a schema preview.
	Accept:   "application/vnd.github+json, application/vnd.github.merge-info-preview+json",
	Classify: classify,
	APIError: apiError,
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

// apiError is the *APIError of a response with GraphQL errors.
func apiError(op string, r *graphql.Response[gqlError]) error {
	ae := &APIError{Operation: op, Status: r.Status, Type: r.Errors[0].Type}
	msgs := make([]string, 0, len(r.Errors))
	for _, e := range r.Errors {
		msgs = append(msgs, e.Message)
	}
	ae.Message = strings.Join(msgs, "; ")
	return ae
}

// classify reads GitHub's signals. Rate limits come first, for GitHub
// answers some with HTTP 403: HTTP 429; 403 with X-RateLimit-Remaining: 0,
// a Retry-After or a message about a rate limit (secondary limits); a
// GraphQL error of type RATE_LIMITED. Any other 401 or 403 rejects the
// token, with GitHub's message as the reason.
func classify(r *graphql.Response[gqlError]) graphql.Verdict {
	typed := false
	for _, e := range r.Errors {
		typed = typed || e.Type == "RATE_LIMITED"
	}
	h := r.Header
	switch {
	case typed || r.Status == http.StatusTooManyRequests ||
		r.Status == http.StatusForbidden && (h.Get("X-RateLimit-Remaining") == "0" || h.Get("Retry-After") != "" ||
			strings.Contains(strings.ToLower(r.Message), "rate limit")):
		v := graphql.Verdict{Kind: graphql.RateLimited, Wait: rateLimitWait(h, r.Now)}
		if typed {
			v.Reason = "RATE_LIMITED"
		}
		return v
	case r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden:
		v := graphql.Verdict{Kind: graphql.AuthFailed}
		if m := strings.TrimSpace(r.Message); m != "" && len(m) < 200 {
			v.Reason = "GitHub says: " + m
		}
		return v
	}
	return graphql.Verdict{}
}

// rateLimitWait is the wait a rate-limited response asks for: Retry-After
// (seconds or an HTTP date), else X-RateLimit-Reset (epoch seconds) when
// the budget is exhausted. 0 if none applies.
func rateLimitWait(h http.Header, now time.Time) time.Duration {
	if d, ok := graphql.RetryAfter(h, now); ok {
		return d
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if d, ok := graphql.ResetIn(h.Get("X-RateLimit-Reset"), now); ok {
			return d
		}
	}
	return 0
}
