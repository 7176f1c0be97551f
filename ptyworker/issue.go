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

	"github.com/legion-dev/legion/ptyworker/proto"
)

// issueVerbs are the tracker commands an agent may run on its issue: not
// add and list, which reach the team's other issues.
var issueVerbs = []string{"show", "move", "label", "unlabel", "comment", "pr"}

// Limits of a relayed tracker command.
const (
	issueMaxOutput = 1 << 20
)

// issueArgv checks an agent's `legion issue` arguments against the session
// and returns the legion argv to run: the verb, its flags (--json,
// --author), then "--" and the positional arguments, so that a comment
// starting with '-' stays text.
func issueArgv(s *proto.Spec, argv []string) ([]string, error) {
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
func (c *conn) handleIssue(m *proto.Message) {
	w := c.w
	var p proto.IssueParams
	if e := params(m, &p); e != nil {
		c.replyRPCErr(m.ID, e, false)
		return
	}
	argv, err := issueArgv(w.spec, p.Argv)
	if err != nil {
		c.replyErr(m.ID, proto.CodeBadRequest, err.Error(), false)
		return
	}
	legion := specEnv(w.spec, proto.EnvLegionBin)
	if legion == "" {
		c.replyErr(m.ID, proto.CodeNotRelayed, fmt.Sprintf("session %s: its spec names no legion program (%s) to run tracker commands with", w.spec.SessionID, proto.EnvLegionBin), false)
		return
	}
	// Not on the read loop: the command may take a remote tracker's time.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), proto.IssueTimeout)
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
		res := proto.IssueResult{Stdout: stdout.String(), Stderr: stderr.String()}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			res.Code = ee.ExitCode()
			if res.Code < 0 {
				res.Code = 1
			}
		case err != nil:
			c.replyErr(m.ID, proto.CodeInternalError, fmt.Sprintf("session %s: run %s: %v", w.spec.SessionID, legion, err), false)
			return
		}
		w.log.Info("ran a tracker command for the agent", "argv", strings.Join(argv[:2], " "), "code", res.Code)
		c.reply(m.ID, res)
	}()
}

// specEnv is key's value in the spec's own environment.
func specEnv(s *proto.Spec, key string) string {
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
