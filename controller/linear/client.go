package linear

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/internal/graphql"
)

// DefaultEndpoint is Linear's GraphQL endpoint.
const DefaultEndpoint = "https://api.linear.app/graphql"

// DefaultAPIKeyEnv is the environment variable read for the API key when
// Options.APIKeyEnv is empty.
const DefaultAPIKeyEnv = "LINEAR_API_KEY"

// Options configures a Client. Only Team is required.
type Options struct {
	// Team is the team's key, the prefix of its issue identifiers ("ENG"
	// for ENG-12).
	Team string
	// Statuses maps Legion's statuses to the team's workflow state names,
	// e.g. {controller.StatusNeedsReview: "In Review"}. A status not in the
	// map uses its own name. States that no status maps to are reported
	// under their own name (Backlog, Triage, ...), which the controller
	// leaves alone.
	Statuses map[controller.Status]string
	// APIKeyEnv names the environment variable holding a personal API key
	// (sent as "Authorization: <key>"; an OAuth access token, lin_oauth_…,
	// is sent as a Bearer token); DefaultAPIKeyEnv when empty. It is read
	// before CredentialsFile.
	APIKeyEnv string
	// CredentialsFile is a file holding the API key (its first line that is
	// neither empty nor a # comment); it must not be readable by group or
	// others. Optional.
	CredentialsFile string
	// IncludeClosed makes Issues include issues in completed and canceled
	// states too. By default they are left out, so a tick's query grows
	// with the open work, not with the team's history.
	IncludeClosed bool
	// PageSize is the number of issues per page (1–250); 50 when zero.
	PageSize int
	// Comments is the number of latest comments fetched per issue; 5 when
	// zero.
	Comments int
	// Endpoint overrides DefaultEndpoint (tests).
	Endpoint string
	// HTTPClient is used for all requests; a client with a 30 s timeout
	// when nil.
	HTTPClient *http.Client
	// Retry is the retry policy; zero fields take the defaults of Retry.
	Retry Retry
	// Logger receives one warning per retry; discarded when nil. The API
	// key is never logged.
	Logger *slog.Logger
}

// Retry is the retry policy for transient failures: Attempts tries in
// all (5 when zero), backoffs from Min (500 ms) doubling up to Max (30 s)
// with equal jitter, and server-requested waits (Retry-After,
// X-RateLimit-*-Reset) honoured up to MaxWait (2 min); a longer one fails
// at once with ErrRateLimited, leaving the retry to the next tick.
type Retry = graphql.Retry

// Errors callers can branch on with errors.Is. They are the values of
// controller/internal/graphql, shared with package github: which service
// failed is told by the client that returned the error, and by its
// message ("linear: ...").
var (
	// ErrAuth: Linear rejected the API key (HTTP 401/403 or
	// AUTHENTICATION_ERROR). Never retried.
	ErrAuth = graphql.ErrAuth
	// ErrRateLimited: still rate limited after the retries, or asked to
	// wait longer than Retry.MaxWait.
	ErrRateLimited = graphql.ErrRateLimited
	// ErrMalformed: the response is not the JSON the operation expects.
	ErrMalformed = graphql.ErrMalformed
)

// Client is a Linear tracker for one team. It is safe for concurrent use.
type Client struct {
	opts     Options
	gql      *graphql.Client[gqlError]    // holds the API key; never logs it
	toStatus map[string]controller.Status // workflow state name → Legion status

	teamMu sync.Mutex // held while the team is resolved, so it is resolved once
	team   *team

	mu     sync.Mutex
	budget controller.Budget    // from the last Issues' rate-limit headers
	labels map[string]string    // lower-case label name → label id
	issues map[string]issueMemo // upper-case identifier → what the last Issues saw
}

type issueMemo struct {
	uuid   string
	labels map[string]bool // label names on the issue
}

// New returns a client for opts.Team, reading the API key with LoadAPIKey.
func New(opts Options) (*Client, error) {
	if strings.TrimSpace(opts.Team) == "" {
		return nil, errors.New("linear: no team: set the team key (the prefix of its issue identifiers, e.g. ENG)")
	}
	if opts.APIKeyEnv == "" {
		opts.APIKeyEnv = DefaultAPIKeyEnv
	}
	key, err := LoadAPIKey(opts.APIKeyEnv, opts.CredentialsFile)
	if err != nil {
		return nil, err
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 50
	}
	if opts.PageSize > 250 {
		return nil, fmt.Errorf("linear: page size %d: want 1 to 250", opts.PageSize)
	}
	if opts.Comments <= 0 {
		opts.Comments = 5
	}
	c := &Client{
		opts: opts,
		gql: graphql.New(service, graphql.Options{
			Endpoint:      opts.Endpoint,
			Authorization: authorization(key),
			AuthHint:      credential.Hint(opts.APIKeyEnv, opts.CredentialsFile),
			HTTPClient:    opts.HTTPClient,
			Retry:         opts.Retry,
			Logger:        opts.Logger,
		}),
		toStatus: map[string]controller.Status{},
		labels:   map[string]string{},
		issues:   map[string]issueMemo{},
	}
	for st, name := range opts.Statuses {
		if name == "" {
			return nil, fmt.Errorf("linear: status %q maps to an empty workflow state name", st)
		}
		if prev, dup := c.toStatus[name]; dup {
			return nil, fmt.Errorf("linear: workflow state %q is mapped from both %q and %q", name, prev, st)
		}
		c.toStatus[name] = st
	}
	return c, nil
}

// stateName is the workflow state name of a Legion status.
func (c *Client) stateName(s controller.Status) string {
	if n, ok := c.opts.Statuses[s]; ok {
		return n
	}
	return string(s)
}

// status is the Legion status of a workflow state name.
func (c *Client) status(stateName string) controller.Status {
	if s, ok := c.toStatus[stateName]; ok {
		return s
	}
	return controller.Status(stateName)
}

// credential is Linear's API key as messages name it.
var credential = graphql.Secret{Prefix: "linear", Name: "API key", Short: "key", File: "credentials file"}

// LoadAPIKey returns the Linear API key from the environment variable env
// or, when that is unset or empty, from file (skipped when ""): its first
// line that is neither empty nor a # comment; a file readable by group or
// others is refused. The error names both sources when neither has a key;
// it never contains the key.
func LoadAPIKey(env, file string) (string, error) { return credential.Load(env, file) }
