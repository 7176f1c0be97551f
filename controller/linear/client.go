package linear

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/controller"
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

// Retry is the retry policy for transient failures.
type Retry struct {
	// Attempts is the number of tries in all, first included; 5 when zero.
	Attempts int
	// Min is the first backoff (500 ms when zero); each further one
	// doubles, capped at Max (30 s when zero), with equal jitter.
	Min, Max time.Duration
	// MaxWait is the longest server-requested wait (Retry-After,
	// X-RateLimit-*-Reset) honoured; a longer one fails at once with
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
	// ErrAuth: Linear rejected the API key (HTTP 401/403 or
	// AUTHENTICATION_ERROR). Never retried.
	ErrAuth = errors.New("authentication failed")
	// ErrRateLimited: still rate limited after the retries, or asked to
	// wait longer than Retry.MaxWait.
	ErrRateLimited = errors.New("rate limited")
	// ErrMalformed: the response is not the JSON the operation expects.
	ErrMalformed = errors.New("malformed response")
)

// Client is a Linear tracker for one team. It is safe for concurrent use.
type Client struct {
	opts     Options
	key      string // never logged, never in an error
	keyFrom  string // where the key came from, for the auth error
	http     *http.Client
	log      *slog.Logger
	retry    Retry
	toStatus map[string]controller.Status // workflow state name → Legion status

	teamMu sync.Mutex // held while the team is resolved, so it is resolved once
	team   *team

	mu     sync.Mutex
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
		opts:     opts,
		key:      key,
		keyFrom:  sources(opts.APIKeyEnv, opts.CredentialsFile),
		http:     opts.HTTPClient,
		log:      opts.Logger,
		retry:    opts.Retry.withDefaults(),
		toStatus: map[string]controller.Status{},
		labels:   map[string]string{},
		issues:   map[string]issueMemo{},
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
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

func sources(env, file string) string {
	if file == "" {
		return "$" + env
	}
	return "$" + env + " or " + file
}

// LoadAPIKey returns the Linear API key from the environment variable env
// or, when that is unset or empty, from file (skipped when ""). The error
// names both sources when neither has a key; it never contains the key.
func LoadAPIKey(env, file string) (string, error) {
	if env != "" {
		if k := strings.TrimSpace(os.Getenv(env)); k != "" {
			return k, nil
		}
	}
	if file != "" {
		k, err := readKeyFile(file)
		if err == nil {
			return k, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("linear: API key: %w", err)
		}
	}
	if file == "" {
		return "", fmt.Errorf("linear: no API key: set $%s or configure a credentials file", env)
	}
	return "", fmt.Errorf("linear: no API key: set $%s or write the key to %s (mode 0600)", env, file)
}

// readKeyFile reads a key file: its first line that is neither empty nor a
// # comment. It refuses files readable by group or others.
func readKeyFile(path string) (string, error) {
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
		return "", fmt.Errorf("credentials file %s has mode %04o: it must not be accessible by group or others (chmod 600 %s)", path, perm, path)
	}
	buf := make([]byte, 4096)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return "", fmt.Errorf("credentials file %s is empty: want the API key on its first line", path)
	}
	for line := range strings.Lines(string(buf[:n])) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("credentials file %s has no key: want the API key on its first line", path)
}
