package linear

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/internal/graphql"
)

// service is Linear's GraphQL API as the transport reads it.
var service = &graphql.Service[gqlError]{
	Name:     "Linear",
	Prefix:   "linear",
	Accept:   "application/json",
	Classify: classify,
	APIError: apiError,
}

// gqlError is a Linear GraphQL error; Linear puts its code in extensions.
type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code                   string `json:"code"`
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

// apiError is the *APIError of a response with GraphQL errors; a user
// presentable message is preferred to the technical one.
func apiError(op string, r *graphql.Response[gqlError]) error {
	ae := &APIError{Operation: op, Status: r.Status, Code: r.Errors[0].Extensions.Code}
	msgs := make([]string, 0, len(r.Errors))
	for _, e := range r.Errors {
		msgs = append(msgs, cmp.Or(e.Extensions.UserPresentableMessage, e.Message))
	}
	ae.Message = strings.Join(msgs, "; ")
	return ae
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

// classify reads Linear's signals: HTTP 401/403 and AUTHENTICATION_ERROR
// reject the key; HTTP 429 and RATELIMITED are rate limits.
func classify(r *graphql.Response[gqlError]) graphql.Verdict {
	codes := map[string]bool{}
	for _, e := range r.Errors {
		codes[strings.ToUpper(e.Extensions.Code)] = true
	}
	switch {
	case r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden || codes["AUTHENTICATION_ERROR"]:
		return graphql.Verdict{Kind: graphql.AuthFailed}
	case r.Status == http.StatusTooManyRequests || codes["RATELIMITED"]:
		v := graphql.Verdict{Kind: graphql.RateLimited, Wait: rateLimitWait(r.Header, r.Now)}
		if codes["RATELIMITED"] {
			v.Reason = "RATELIMITED"
		}
		return v
	}
	return graphql.Verdict{}
}

// rateLimitWait is the wait a rate-limited response asks for: Retry-After
// (seconds or an HTTP date), else the latest X-RateLimit-{Requests,
// Complexity}-Reset (epoch milliseconds; seconds accepted) of an exhausted
// budget. 0 if none applies.
func rateLimitWait(h http.Header, now time.Time) time.Duration {
	if d, ok := graphql.RetryAfter(h, now); ok {
		return d
	}
	// Prefer the reset of an exhausted budget; with no Remaining headers,
	// the requests budget's.
	var wait time.Duration
	found := false
	for _, b := range []string{"Requests", "Complexity"} {
		if h.Get("X-RateLimit-"+b+"-Remaining") == "0" {
			if d, ok := graphql.ResetIn(h.Get("X-RateLimit-"+b+"-Reset"), now); ok {
				wait, found = max(wait, d), true
			}
		}
	}
	if !found {
		if d, ok := graphql.ResetIn(h.Get("X-RateLimit-Requests-Reset"), now); ok {
			wait = d
		}
	}
	return wait
}

// authorization is the Authorization header for key: a personal API key
// goes as it is, an OAuth access token (lin_oauth_…) as a Bearer token.
func authorization(key string) string {
	if strings.HasPrefix(key, "lin_oauth_") {
		return "Bearer " + key
	}
	return key
}

// noteBudget records the request budget Linear's answer to the pages-th
// page of a tick reports (X-RateLimit-Requests-Limit, -Remaining, -Reset
// in epoch milliseconds); an answer without them changes nothing.
func (c *Client) noteBudget(h http.Header, pages int) {
	limit, err1 := strconv.Atoi(h.Get("X-RateLimit-Requests-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("X-RateLimit-Requests-Remaining"))
	reset, err3 := strconv.ParseInt(h.Get("X-RateLimit-Requests-Reset"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || limit <= 0 {
		return
	}
	at := time.UnixMilli(reset)
	if reset < 1e12 { // seconds, as some answers give
		at = time.Unix(reset, 0)
	}
	c.mu.Lock()
	c.budget = controller.Budget{Limit: limit, Remaining: remaining, Reset: at, TickCost: pages}
	c.mu.Unlock()
}

// Budget implements controller.Budgeter: Linear's requests of the API
// key, as the last tick's answers reported them; a tick costs a request
// per page of issues.
func (c *Client) Budget() (controller.Budget, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.budget, c.budget.Limit > 0
}

var _ controller.Budgeter = (*Client)(nil)
