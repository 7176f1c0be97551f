package ptyworker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
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

// issueVerbs are the tracker commands an agent may run on its issue: not
// add and list, which reach the team's other issues.
var issueVerbs = []string{"show", "move", "label", "unlabel", "comment", "pr"}

// Limits of a relayed tracker command.
const (
	issueTimeout   = 2 * time.Minute // a remote tracker's API calls included
	issueMaxOutput = 1 << 20
)

// issueArgv checks an agent's `legion issue` arguments against the session
// and returns the legion argv to run: the verb, its flags (--json,
// --author), then "--" and the positional arguments, so that a comment
// starting with '-' stays text.
func issueArgv(s *Spec, argv []string) ([]string, error) {
	var pos, flags []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			pos = append(pos, argv[i+1:]...)
			i = len(argv)
		case a == "--json" || strings.HasPrefix(a, "--author="):
			flags = append(flags, a)
		case a == "--author":
			if i+1 == len(argv) {
				return nil, errors.New("legion issue: --author needs a value")
			}
			flags = append(flags, a, argv[i+1])
			i++
		case strings.HasPrefix(a, "-") && len(pos) < 3:
			return nil, fmt.Errorf("legion issue: flag %q is not passed on to the worker (only --json and --author are)", clip(a, 64))
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) < 3 || !slices.Contains(issueVerbs, pos[0]) {
		return nil, fmt.Errorf("legion issue: want %s TEAM ISSUE ... (an agent acts on its own issue only)", strings.Join(issueVerbs, "|"))
	}
	if pos[1] != s.Team || !strings.EqualFold(pos[2], s.Issue) || s.Issue == "" {
		return nil, fmt.Errorf("session %s may act only on issue %s of team %s, not %s of team %s", s.Name, s.Issue, s.Team, clip(pos[2], 64), clip(pos[1], 64))
	}
	out := append([]string{"issue", pos[0]}, flags...)
	return append(append(out, "--"), pos[1:]...), nil
}

// handleIssue runs MethodIssue: outside the agent's sandbox, with the
// worker's environment and the spec's (no hook socket: the command must
// not come back here), in the agent's directory, or / once that is gone.
func (c *conn) handleIssue(m *message) {
	w := c.w
	var p IssueParams
	if e := params(m, &p); e != nil {
		c.replyRPCErr(m.ID, e, false)
		return
	}
	argv, err := issueArgv(w.spec, p.Argv)
	if err != nil {
		c.replyErr(m.ID, CodeBadRequest, err.Error(), false)
		return
	}
	legion := specEnv(w.spec, EnvLegionBin)
	if legion == "" {
		c.replyErr(m.ID, CodeNotRelayed, fmt.Sprintf("session %s: its spec names no legion program (%s) to run tracker commands with", w.spec.SessionID, EnvLegionBin), false)
		return
	}
	// Not on the read loop: the command may take a remote tracker's time.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), issueTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, legion, argv...)
		cmd.Dir = w.spec.Cwd
		if _, err := os.Stat(cmd.Dir); err != nil {
			cmd.Dir = "/" // the finisher's worktree, removed by legion worktree finish
		}
		cmd.Env = childEnv(os.Environ(), w.spec, "")
		var stdout, stderr limitedBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		res := IssueResult{Stdout: stdout.String(), Stderr: stderr.String()}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			res.Code = ee.ExitCode()
			if res.Code < 0 {
				res.Code = 1
			}
		case err != nil:
			c.replyErr(m.ID, CodeInternalError, fmt.Sprintf("session %s: run %s: %v", w.spec.SessionID, legion, err), false)
			return
		}
		w.log.Info("ran a tracker command for the agent", "argv", strings.Join(argv[:2], " "), "code", res.Code)
		c.reply(m.ID, res)
	}()
}

// specEnv is key's value in the spec's own environment.
func specEnv(s *Spec, key string) string {
	for i := len(s.Env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(s.Env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// limitedBuffer keeps the first issueMaxOutput bytes written to it.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := issueMaxOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
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
	dctx, cancel := context.WithTimeout(ctx, relayDialTimeout)
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
	cctx, ccancel := context.WithTimeout(ctx, issueTimeout+relayDialTimeout)
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
