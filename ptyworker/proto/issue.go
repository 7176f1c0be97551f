package proto

// Tracker commands an agent runs through its worker (rpc 1.1 hook
// connections); the worker's side is ptyworker's issue.go.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// MethodIssue runs `legion issue VERB TEAM ISSUE ...` for the agent, on
// its own hook connection (IssueParams, IssueResult): a sandboxed agent
// cannot read Legion's tracker or its keys, so its tracker commands go
// through its worker, which runs them outside the sandbox, for the
// session's own team and issue only. An older worker answers "unknown
// method".
const MethodIssue = "issue"

// EnvLegionBin, in the spec's environment, is the legion program that
// MethodIssue runs. Only the spec's value counts: the agent cannot change
// it.
const EnvLegionBin = "LEGION_BIN"

// ErrNotRelayed is returned (wrapped) by RelayIssue when the worker does
// not run tracker commands for its agent (an older worker, or one whose
// spec names no legion program), or cannot be reached from a sandbox of
// the agent's own. The caller runs the command itself.
var ErrNotRelayed = errors.New("the worker does not run tracker commands")

// IssueTimeout bounds a tracker command the worker runs for its agent,
// a remote tracker's API calls included.
const IssueTimeout = 2 * time.Minute

// RelayDialTimeout bounds the dial and hello of a relay to the worker
// (RelayIssue, and `legion hook`'s).
const RelayDialTimeout = 10 * time.Second

// IssueParams are the arguments after `legion issue`: the verb, the team,
// the issue, and the verb's arguments and flags.
type IssueParams struct {
	Argv []string `json:"argv"`
}

// IssueResult is what the command printed and its exit status.
type IssueResult struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Code   int    `json:"code"`
}

// Issue runs `legion issue ARGV...` through the worker on a hook
// connection (MethodIssue).
func (c *Client) Issue(ctx context.Context, argv []string) (*IssueResult, error) {
	var res IssueResult
	if err := c.call(ctx, MethodIssue, IssueParams{Argv: argv}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RelayIssue is `legion issue` run by an agent of a session (getenv has
// EnvHookSocket and EnvHookToken): it has its worker run the command
// (MethodIssue) and returns what that printed and its exit status.
func RelayIssue(ctx context.Context, argv []string, getenv func(string) string) (*IssueResult, error) {
	socket, token := getenv(EnvHookSocket), getenv(EnvHookToken)
	if socket == "" || token == "" {
		return nil, fmt.Errorf("legion issue: %s and %s are not both set: not an agent of a session", EnvHookSocket, EnvHookToken)
	}
	dctx, cancel := context.WithTimeout(ctx, RelayDialTimeout)
	defer cancel()
	c, err := Dial(dctx, socket)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		// A sandbox of the agent's own (Codex's under allowlist and ask
		// filters connect) keeps the worker out of reach; Legion's
		// sandbox never does (its worker's socket is granted).
		return nil, fmt.Errorf("%w: %v", ErrNotRelayed, err)
	}
	if err != nil {
		return nil, fmt.Errorf("legion issue: %w", err)
	}
	defer c.Close()
	if _, err := c.HelloAs(dctx, HelloParams{RPCMajor: RPCMajor, RPCMinor: 1, Token: token, Client: "legion issue"}); err != nil {
		return nil, fmt.Errorf("legion issue: hello to the worker at %s: %w", socket, err)
	}
	cctx, ccancel := context.WithTimeout(ctx, IssueTimeout+RelayDialTimeout)
	defer ccancel()
	res, err := c.Issue(cctx, argv)
	var re *RPCError
	if errors.As(err, &re) && (re.Code == CodeNotRelayed || re.Code == CodeBadRequest && strings.HasPrefix(re.Message, "unknown method")) {
		return nil, fmt.Errorf("%w: %v", ErrNotRelayed, err)
	}
	if err != nil {
		return nil, fmt.Errorf("legion issue (through the session's worker): %w", err)
	}
	return res, nil
}
