package github

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/legion-dev/legion/controller/internal/graphql"
)

// DefaultEndpoint is GitHub's GraphQL endpoint.
const DefaultEndpoint = "https://api.github.com/graphql"

// DefaultTokenEnv is the environment variable read for the token when
// Options.TokenEnv is empty.
const DefaultTokenEnv = "GITHUB_TOKEN"

// DefaultBranchPrefix is the prefix of an issue's branch: legion/<issue>.
const DefaultBranchPrefix = "legion/"

// Options configures a Client. Owner and Repo are required.
type Options struct {
	// Owner and Repo name the repository the pull requests are in.
	Owner, Repo string
	// BranchPrefix is put before an issue identifier to name its branch;
	// DefaultBranchPrefix when empty.
	BranchPrefix string
	// TokenEnv names the environment variable holding the token;
	// DefaultTokenEnv when empty. It is read before TokenFile.
	TokenEnv string
	// TokenFile is a file holding the token (its first line that is
	// neither empty nor a # comment); it must not be readable by group or
	// others. Optional.
	TokenFile string
	// Getenv looks TokenEnv up; os.Getenv when nil. legion doctor passes
	// the user manager's environment, which the controller runs in.
	Getenv func(string) string
	// MergeMethod is MERGE, SQUASH or REBASE (any case), which the
	// repository must allow; when empty, Merge uses the first the
	// repository allows of MERGE, SQUASH and REBASE.
	MergeMethod string
	// BatchSize is the number of branches per query; 100 when zero. A tick
	// with more branches sends ceil(branches / BatchSize) requests.
	BatchSize int
	// Endpoint overrides DefaultEndpoint (tests, GitHub Enterprise).
	Endpoint string
	// HTTPClient is used for all requests; a client with a 30 s timeout
	// when nil.
	HTTPClient *http.Client
	// Retry is the retry policy; zero fields take the defaults of Retry.
	Retry Retry
	// Logger receives one warning per retry; discarded when nil. The token
	// is never logged.
	Logger *slog.Logger
}

// Retry is the retry policy for transient failures: Attempts tries in
// all (5 when zero), backoffs from Min (500 ms) doubling up to Max (30 s)
// with equal jitter, and server-requested waits (Retry-After,
// X-RateLimit-Reset) honoured up to MaxWait (2 min); a longer one fails
// at once with ErrRateLimited, leaving the retry to the next tick.
type Retry = graphql.Retry

// Errors callers can branch on with errors.Is. ErrAuth, ErrRateLimited
// and ErrMalformed are the values of controller/internal/graphql, shared
// with package linear: which service failed is told by the client that
// returned the error, and by its message ("github: ...").
var (
	// ErrAuth: GitHub rejected the token (HTTP 401, or 403 that is not a
	// rate limit). Never retried.
	ErrAuth = graphql.ErrAuth
	// ErrRateLimited: still rate limited after the retries, or asked to
	// wait longer than Retry.MaxWait.
	ErrRateLimited = graphql.ErrRateLimited
	// ErrMalformed: the response is not the JSON the operation expects.
	ErrMalformed = graphql.ErrMalformed
	// ErrConflict: the pull request cannot be merged because of conflicts.
	ErrConflict = errors.New("merge conflict")
	// ErrBlocked: Legion does not merge the pull request, or GitHub
	// refused to: checks failed or are pending, a review is required or
	// changes were requested, the branch is behind or a draft. The error
	// names the checks and says what a person does.
	ErrBlocked = errors.New("merge blocked")
)

// Client reads review outcomes from, and merges, pull requests of one
// repository. It is safe for concurrent use.
type Client struct {
	opts  Options
	gql   *graphql.Client[gqlError] // holds the token; never logs it
	token string                    // for REST's conditional requests (rest.go); never logged

	mu    sync.Mutex
	etags map[string]string // REST path → the ETag of its last 200 answer
}

// New returns a client for opts.Owner/opts.Repo, reading the token with
// LoadToken.
func New(opts Options) (*Client, error) {
	if opts.Owner == "" || opts.Repo == "" || strings.Contains(opts.Owner+opts.Repo, "/") {
		return nil, fmt.Errorf("github: repository %q/%q: want an owner and a repository name", opts.Owner, opts.Repo)
	}
	if opts.TokenEnv == "" {
		opts.TokenEnv = DefaultTokenEnv
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	token, err := credential.LoadWith(opts.Getenv, opts.TokenEnv, opts.TokenFile)
	if err != nil {
		return nil, err
	}
	if opts.BranchPrefix == "" {
		opts.BranchPrefix = DefaultBranchPrefix
	}
	opts.MergeMethod = strings.ToUpper(opts.MergeMethod)
	switch opts.MergeMethod {
	case "", "MERGE", "SQUASH", "REBASE":
	default:
		return nil, fmt.Errorf("github: merge method %q: want MERGE, SQUASH or REBASE", opts.MergeMethod)
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	return &Client{opts: opts, token: token, etags: map[string]string{}, gql: graphql.New(service, graphql.Options{
		Endpoint:      opts.Endpoint,
		Authorization: "bearer " + token,
		AuthHint:      credential.Hint(opts.TokenEnv, opts.TokenFile),
		HTTPClient:    opts.HTTPClient,
		Retry:         opts.Retry,
		Logger:        opts.Logger,
	})}, nil
}

// Branch is the branch of an issue: BranchPrefix + issue.
func (c *Client) Branch(issue string) string { return c.opts.BranchPrefix + issue }

func (c *Client) repo() string { return c.opts.Owner + "/" + c.opts.Repo }

// credential is GitHub's token as messages name it.
var credential = graphql.Secret{Prefix: "github", Name: "token", Short: "token", File: "token file"}

// LoadToken returns the GitHub token from the environment variable env or,
// when that is unset or empty, from file (skipped when ""): its first line
// that is neither empty nor a # comment; a file readable by group or
// others is refused. The error names both sources when neither has a
// token; it never contains the token.
func LoadToken(env, file string) (string, error) { return credential.Load(env, file) }
