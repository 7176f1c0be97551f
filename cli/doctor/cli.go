package doctor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/config"
)

// cliCheckName names the version check of a kind's CLI for a team.
func cliCheckName(team string, kind config.AgentKind) string {
	return string(kind) + " version of team " + team
}

// InstalledCLI is an agent CLI as a worker will find it, and its version,
// in a check's JSON.
type InstalledCLI struct {
	Kind config.AgentKind `json:"kind"`
	// Modes are the team's modes that run it.
	Modes []string `json:"modes"`
	// Program is argv[0] of the kind's agent.new in those modes.
	Program string `json:"program"`
	// Path is where a worker finds Program; "" when it does not.
	Path string `json:"path,omitempty"`
	// Version is what the program reports for --version; "" when that
	// could not be read.
	Version string `json:"version,omitempty"`
	// Tested is the release Legion was tested with (package
	// agent/cliversion).
	Tested string `json:"tested"`
}

// kindUse is one kind of agent a team runs: the modes it runs in and the
// program its agent.new starts there.
type kindUse struct {
	kind  config.AgentKind
	modes []string
	prog  string
}

// kindUses are the kinds team t runs, in the order of the modes (each
// mode's agent.kind_by_mode, else agent.kind), each with its program: the
// team's agent.new for agent.kind, the kind's default one for a kind
// only agent.kind_by_mode names (config.Agent.ForMode).
func kindUses(t config.Team) []kindUse {
	var out []kindUse
	for _, m := range modes {
		a := t.Agent.ForMode(m)
		k := a.Kind
		if k == "" {
			k = config.AgentClaude
		}
		var prog string
		if len(a.New) > 0 {
			prog = a.New[0]
		}
		found := false
		for i := range out {
			if out[i].kind == k && out[i].prog == prog {
				out[i].modes = append(out[i].modes, m)
				found = true
			}
		}
		if !found {
			out = append(out, kindUse{kind: k, modes: []string{m}, prog: prog})
		}
	}
	return out
}

// versionTimeout is the least time a CLI gets to print its version: the
// Gemini CLI, a Node program that starts itself again (FACTS G1), took 2 s
// on an idle machine and 8 s on a busy one.
const versionTimeout = 30 * time.Second

// versionCache holds what each program (by path) printed for --version,
// so that teams that share a CLI run it once per doctor run.
type versionCache map[string]versionResult

type versionResult struct {
	out string
	err error
}

// checkCLI: which version of kind u's CLI does team t's worker start,
// against the release Legion was tested with (cliversion)? The program is
// looked up as [checkAgent] looks it up (the user manager's PATH, which
// workers get) and run with --version. Another release than the tested one
// is a warning: newer releases change hooks and dialogs, older ones lack
// what Legion uses. The second result is false for a kind with no CLI of
// its own ("custom").
func checkCLI(ctx context.Context, o Options, t config.Team, u kindUse, w workerEnv, versions versionCache) (Check, bool) {
	cli, ok := cliversion.For(string(u.kind))
	if !ok {
		return Check{}, false
	}
	info := &InstalledCLI{Kind: u.kind, Modes: u.modes, Program: u.prog, Tested: cli.Tested}
	c := Check{Name: cliCheckName(t.Name, u.kind), Team: t.Name, CLI: info}
	install := fmt.Sprintf("`npm install -g %s@%s`, or %s from Legion's source, which installs it under ~/.cache/legion and prints its path",
		cli.Package, cli.Tested, cli.Script)
	own := u.kind == t.Agent.Kind || (t.Agent.Kind == "" && u.kind == config.AgentClaude)
	where := "agent.new"
	point := "start agent.new and agent.resume with its path" // how to make workers run another build
	if !own {
		where = "agent.kind_by_mode of " + strings.Join(u.modes, ", ")
		point = fmt.Sprintf("put its directory before the others in the PATH of the user manager (a file of %s, then `systemctl --user daemon-reload`): "+
			"a mode that agent.kind_by_mode gives %s runs %s from there", w.environmentDir(), u.kind, cli.Program)
	}

	prog := u.prog
	searched := w.get("PATH")
	if w.err != nil {
		searched = os.Getenv("PATH")
	}
	var shellNote string
	switch {
	case prog == "":
		c.Status, c.Detail = Warn, fmt.Sprintf("%s has no program: cannot tell which %s runs", where, cli.Name)
		c.Fix = fmt.Sprintf("see the check %q", agentCheckName(t.Name))
		return c, true
	case strings.ContainsAny(prog, "{}"):
		c.Status, c.Detail = Warn, fmt.Sprintf("%q is filled in per session (a placeholder): cannot tell which %s it is", prog, cli.Name)
		c.Fix = fmt.Sprintf("check by hand that each session's program is %s %s (`PROGRAM --version` prints %q)", cli.Name, cli.Tested, cli.Want(cli.Tested))
		return c, true
	case strings.Contains(prog, "/"):
		if p, err := exec.LookPath(prog); err == nil {
			info.Path = p
		}
	case w.err != nil:
		if p, err := exec.LookPath(prog); err == nil && filepath.IsAbs(p) {
			info.Path = p
			shellNote = " (found in this shell's PATH: the user manager's environment, which workers get, cannot be read)"
		}
	default:
		info.Path = agent.LookIn(prog, searched)
	}
	if info.Path == "" {
		c.Status = Fail
		c.Detail = fmt.Sprintf("%s (%s) not found in the user manager's PATH (%s), which workers get", prog, where, searched)
		if w.err != nil {
			c.Detail = fmt.Sprintf("%s (%s) not found in this shell's PATH (%s); the user manager's environment, which workers get, cannot be read: %v",
				prog, where, searched, w.err)
		}
		if strings.Contains(prog, "/") {
			c.Detail = fmt.Sprintf("%s (%s) is not an executable file", prog, where)
		}
		if own {
			c.Fix = fmt.Sprintf("see the check %q", agentCheckName(t.Name))
		} else {
			c.Fix = fmt.Sprintf("install %s %s (%s) and put its directory in PATH in a file of %s (then `systemctl --user daemon-reload`)",
				cli.Name, cli.Tested, install, w.environmentDir())
		}
		return c, true
	}

	r, ok := versions[info.Path]
	if !ok {
		vctx, cancel := context.WithTimeout(ctx, max(o.Timeout, versionTimeout))
		r.out, r.err = runVersion(vctx, info.Path, searched)
		cancel()
		versions[info.Path] = r
	}
	if r.err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("cannot tell the version of %s%s: %v", info.Path, shellNote, r.err)
		c.Fix = fmt.Sprintf("make sure %s starts %s: `%s --version` must print %q", where, cli.Name, info.Path, cli.Want(cli.Tested))
		return c, true
	}
	v, err := cli.Parse(r.out)
	if err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("cannot tell the version of %s%s: %v", info.Path, shellNote, err)
		c.Fix = fmt.Sprintf("make sure %s starts %s, or check by hand that it is %s %s", where, cli.Name, cli.Name, cli.Tested)
		return c, true
	}
	info.Version = v
	order, err := cliversion.Compare(v, cli.Tested)
	switch {
	case err != nil: // Parse took v, and Tested is a version: cannot happen
		c.Status, c.Detail, c.Fix = Warn, fmt.Sprintf("%s: %v", info.Path, err), "report this as a bug of legion doctor"
	case order == 0:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s %s at %s%s, the release Legion was tested with", cli.Name, v, info.Path, shellNote)
	case order > 0:
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s %s installed (%s%s), Legion was tested with %s: newer releases change hooks and dialogs; run the tests or pin it",
			cli.Program, v, info.Path, shellNote, cli.Tested)
		c.Fix = fmt.Sprintf("run Legion's tests against it (`%s=%s make test` in Legion's source), or pin %s %s (%s) and %s",
			cli.TestEnv, info.Path, cli.Name, cli.Tested, install, point)
	default:
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s %s installed (%s%s), Legion was tested with %s: older releases lack hooks and options Legion uses; update it or pin it",
			cli.Program, v, info.Path, shellNote, cli.Tested)
		c.Fix = fmt.Sprintf("install %s %s (%s) and %s", cli.Name, cli.Tested, install, point)
	}
	return c, true
}

// runVersion runs `path --version` and returns what it printed on stdout.
// The program gets only PATH (for `#!/usr/bin/env node`) and, as HOME and
// its working directory, a temporary directory that is removed afterwards:
// the Gemini CLI, Codex and opencode write into their home even for
// --version (FACTS G22, X25, O20), which must not touch the user's. The
// whole process group is killed when ctx ends.
func runVersion(ctx context.Context, path, pathEnv string) (string, error) {
	dir, err := os.MkdirTemp("", "legion-doctor-")
	if err != nil {
		return "", fmt.Errorf("run %s --version: %w", path, err)
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + pathEnv, "HOME=" + dir}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within the check's timeout (%w)", ctx.Err())
		}
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if msg != "" {
			return "", fmt.Errorf("`%s --version`: %w: %s", path, err, msg)
		}
		return "", fmt.Errorf("`%s --version`: %w", path, err)
	}
	return stdout.String(), nil
}
