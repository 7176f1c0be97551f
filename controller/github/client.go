package github

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"
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
	// MergeMethod is MERGE, SQUASH or REBASE; MERGE when empty.
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

// Retry is the retry policy for transient failures.
type Retry struct {
	// Attempts is the number of tries in all, first included; 5 when zero.
	Attempts int
	// Min is the first backoff (500 ms when zero); each further one
	// doubles, capped at Max (30 s when zero), with equal jitter.
	Min, Max time.Duration
	// MaxWait is the longest server-requested wait (Retry-After,
	// X-RateLimit-Reset) honoured; a longer one fails at once with
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

// Errors callers can branch on with errors.Is.
var (
	// ErrAuth: GitHub rejected the token (HTTP 401, or 403 that is not a
	// rate limit). Never retried.
	ErrAuth = errors.New("authentication failed")
	// ErrRateLimited: still rate limited after the retries, or asked to
	// wait longer than Retry.MaxWait.
	ErrRateLimited = errors.New("rate limited")
	// ErrMalformed: the response is not the JSON the operation expects.
	ErrMalformed = errors.New("malformed response")
	// ErrConflict: the pull request cannot be merged because of conflicts.
	ErrConflict = errors.New("merge conflict")
)

// Client reads review outcomes from, and merges, pull requests of one
// repository. It is safe for concurrent use.
type Client struct {
	opts      Options
	token     string // never logged, never in an error
	tokenFrom string // where the token came from, for the auth error
	http      *http.Client
	log       *slog.Logger
	retry     Retry
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
	token, err := LoadToken(opts.TokenEnv, opts.TokenFile)
	if err != nil {
		return nil, err
	}
	if opts.BranchPrefix == "" {
		opts.BranchPrefix = DefaultBranchPrefix
	}
	opts.MergeMethod = strings.ToUpper(opts.MergeMethod)
	switch opts.MergeMethod {
	case "":
		opts.MergeMethod = "MERGE"
	case "MERGE", "SQUASH", "REBASE":
	default:
		return nil, fmt.Errorf("github: merge method %q: want MERGE, SQUASH or REBASE", opts.MergeMethod)
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	c := &Client{
		opts:      opts,
		token:     token,
		tokenFrom: sources(opts.TokenEnv, opts.TokenFile),
		http:      opts.HTTPClient,
		log:       opts.Logger,
		retry:     opts.Retry.withDefaults(),
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Branch is the branch of an issue: BranchPrefix + issue.
func (c *Client) Branch(issue string) string { return c.opts.BranchPrefix + issue }

func (c *Client) repo() string { return c.opts.Owner + "/" + c.opts.Repo }

func sources(env, file string) string {
	if file == "" {
		return "$" + env
	}
	return "$" + env + " or " + file
}

// LoadToken returns the GitHub token from the environment variable env or,
// when that is unset or empty, from file (skipped when ""). The error names
// both sources when neither has a token; it never contains the token.
func LoadToken(env, file string) (string, error) {
	if env != "" {
		if k := strings.TrimSpace(os.Getenv(env)); k != "" {
			return k, nil
		}
	}
	if file != "" {
		k, err := readTokenFile(file)
		if err == nil {
			return k, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("github: token: %w", err)
		}
	}
	if file == "" {
		return "", fmt.Errorf("github: no token: set $%s or configure a token file", env)
	}
	return "", fmt.Errorf("github: no token: set $%s or write the token to %s (mode 0600)", env, file)
}

// readTokenFile reads a token file: its first line that is neither empty
// nor a # comment. It refuses files readable by group or others.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token file %s has mode %04o: it must not be accessible by group or others (chmod 600 %s)", path, perm, path)
	}
	buf := make([]byte, 4096)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return "", fmt.Errorf("token file %s is empty: want the token on its first line", path)
	}
	for line := range strings.Lines(string(buf[:n])) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("token file %s has no token: want the token on its first line", path)
}
