package codex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/internal/privdir"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// Kind is OpenAI's Codex CLI (agent.kind = "codex"), as probed in
// agent/codex/FACTS.md (cited below as X<n>). Codex picks its
// conversation's id itself (X9), so Legion gives every conversation a
// Kind home of its own, [Home], and resumes "the last session" of
// that home (`codex resume --last`, X11). Prepare gives every session:
//
//   - the home's config.toml (0600, in a 0700 directory): the user's own
//     config.toml ($CODEX_HOME, else ~/.codex) with, replaced, a hook for
//     each of [HookEvents] running `<legion> hook` (Codex's hooks have
//     Claude Code's names and payloads, X13, and its PermissionRequest hook
//     takes Claude Code's decision, X15) and, added, the trust of the
//     team's main checkout, which covers its worktrees (X5);
//   - a link to the user's auth.json there, when there is one (a `codex
//     login`); an API key comes from the environment as the user's
//     config.toml says;
//   - the arguments --no-daemon (no shared background server that would run
//     the hooks outside the worker, X3), --dangerously-bypass-hook-trust
//     (the hooks are Legion's own; without it a dialog asks, X6) and, for
//     the bypass policy, --dangerously-bypass-approvals-and-sandbox, and for
//     the finish mode --cd <main checkout> (its worktree goes away while it
//     runs, and with it Codex's hooks, X21), right after the program in
//     both argvs;
//   - CODEX_HOME in its environment.
//
// The worker runs it as kind claude ([agent.Launch].Agent is "claude"): its state
// comes from those hooks, approvals are held and answered through the
// PermissionRequest hook. The session file is the home's history.jsonl,
// which Codex writes at the first prompt (X10): once it exists a restart
// resumes. Codex's rollout file has a date in its name and is not watched:
// liveness comes from the hooks.
//
// Limits: the allowlist and ask policies run Codex with its own default
// approvals (a workspace-write sandbox; the model asks for escalation),
// agent.allow is not used. Codex's question tool (request_user_input)
// exists in its plan mode only (X16): in the default mode Legion runs, a
// call of it fails at once (X24), so questions come as text at the end of
// a turn, which the controller escalates.
type Kind struct {
	Config config.Agent // the team's agent table
}

// HookEvents are the Codex hook events a session's config.toml sends
// to its worker (X13), and PostModelRequest, the only one that reports a
// failed model request (X34; [HookDialect] reads it as a StopFailure).
var HookEvents = []string{
	"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
	"PostToolUse", "Stop", "SubagentStart", "SubagentStop", "SessionEnd",
	"PostModelRequest",
}

// HistoryFile is the file of a Codex home that Codex writes at every
// prompt: a Codex session's session file.
const HistoryFile = "history.jsonl"

// Name is "codex".
func (*Kind) Name() string { return string(config.AgentCodex) }

// SessionID is Legion's id of the conversation, as for Claude: it names
// the Codex home ({session_id} is not Codex's own id, X9).
func (*Kind) SessionID(team uuid.UUID, issue, mode string) uuid.UUID {
	return claudecode.SessionID(team, issue, mode)
}

// SessionFile is "": a Codex session's file is in its Codex home, which
// depends on the session's directory; Plan names it.
func (*Kind) SessionFile(home, cwd string, id uuid.UUID) string { return "" }

// UserConfig is the user's config.toml ($CODEX_HOME, else ~/.codex), the
// one writeHome makes a session's from, for a pod's home
// (agent.UserConfiger). Not auth.json: a key reaches a pod from the
// team's Secret.
func (*Kind) UserConfig(home string, lookupEnv func(string) (string, bool)) []agent.HomeFile {
	user := filepath.Join(home, ".codex")
	if v, ok := lookupEnv("CODEX_HOME"); ok && filepath.IsAbs(v) {
		user = v
	}
	return []agent.HomeFile{{From: filepath.Join(user, "config.toml"), To: filepath.Join(".codex", "config.toml")}}
}

// Home is the Codex home of conversation id whose sessions keep their
// directories in dir's parent: "codex-<id>" beside them, shared by the
// sessions of one conversation (an implementer and its retro).
func Home(dir string, id uuid.UUID) string {
	return agent.ConversationHome(dir, "codex", id)
}

// Plan expands agent.new and agent.resume and names the session file.
func (c *Kind) Plan(s agent.Session) (agent.Launch, error) {
	argvNew, argvResume, err := agent.Expand(c.Config, s.Vars)
	if err != nil {
		return agent.Launch{}, err
	}
	return agent.Launch{
		Agent: string(config.AgentClaude), ArgvNew: argvNew, ArgvResume: argvResume,
		SessionFile: filepath.Join(Home(s.Dir, s.ID), HistoryFile),
	}, nil
}

// Prepare writes the Codex home's config.toml and auth link (not with
// s.PlanOnly), and adds the arguments and CODEX_HOME to l.
func (c *Kind) Prepare(ctx context.Context, s agent.Session, l agent.Launch) (agent.Launch, error) {
	if !filepath.IsAbs(s.Legion) {
		return agent.Launch{}, fmt.Errorf("prepare codex session %s: the hooks need the legion binary's absolute path, got %q", s.ID, s.Legion)
	}
	if !filepath.IsAbs(s.Dir) || !filepath.IsAbs(s.Repo) || !filepath.IsAbs(s.Home) {
		return agent.Launch{}, fmt.Errorf("prepare codex session %s: want absolute paths, got dir %q, repo %q, home %q", s.ID, s.Dir, s.Repo, s.Home)
	}
	policy := agent.ApplyPolicy(c.Config, s, config.AgentCodex, &l)
	switch policy {
	case config.PermissionsAllowlist, config.PermissionsAsk, config.PermissionsBypass, "":
	default:
		return agent.Launch{}, fmt.Errorf("prepare codex session %s: unknown permission policy %q", s.ID, policy)
	}
	home := Home(s.Dir, s.ID)
	// In a pod, Codex's own sandbox cannot be drawn (X38): the pod's
	// security context confines the agent, as it does Claude Code, whose
	// Landlock sandbox is drawn on a machine only.
	podFull := s.Pod && policy != config.PermissionsBypass
	if !s.PlanOnly {
		if err := c.writeHome(s, policy, home, podFull); err != nil {
			return agent.Launch{}, fmt.Errorf("prepare codex session %s: %w", s.ID, err)
		}
	}

	args := []string{"--no-daemon", "--dangerously-bypass-hook-trust"}
	if s.Mode == agent.FinishMode {
		// The finisher removes the worktree it starts in; Codex runs its
		// hooks in its working root, and fails them once that is gone
		// (X21): the finisher's root is the main checkout.
		args = append(args, "--cd", agent.Physical(s.Repo))
	}
	if policy == config.PermissionsBypass {
		args = append(args, "--dangerously-bypass-approvals-and-sandbox")
	}
	if podFull {
		args = append(args, "--sandbox", "danger-full-access")
	}
	l.ArgvNew = agent.InsertArgs(nil, l.ArgvNew, args...)
	if l.ArgvResume != nil {
		l.ArgvResume = agent.InsertArgs(nil, l.ArgvResume, args...)
	}
	l.Env = append(l.Env, "CODEX_HOME="+home, proto.EnvHookDialect+"="+string(config.AgentCodex))
	return l, nil
}

// writeHome writes the Codex home of session s: its config.toml, made
// from the user's, and the link to the user's auth.json.
func (c *Kind) writeHome(s agent.Session, policy config.PermissionPolicy, home string, podFull bool) error {
	if err := privdir.Ensure(home); err != nil {
		return err
	}
	user := filepath.Join(s.Home, ".codex")
	if v, ok := s.Getenv("CODEX_HOME"); ok && filepath.IsAbs(v) {
		user = v
	}
	var sb *Sandbox
	if policy != config.PermissionsBypass && !podFull {
		// Codex's own workspace-write sandbox: a commit in the worktree
		// writes the repository's git directory, and Legion's own
		// commands reach the session's worker over its unix socket.
		sb = &Sandbox{WritableRoots: agent.GitWritable(s.Cwd), Network: true}
	}
	data, err := ConfigFor(filepath.Join(user, "config.toml"), s.Legion, agent.Physical(s.Repo), sb)
	if err != nil {
		return err
	}
	path := filepath.Join(home, "config.toml")
	if err := atomicfile.WritePrivate(path, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return agent.LinkAuth(filepath.Join(user, "auth.json"), filepath.Join(home, "auth.json"))
}

// ConfigFor is the config.toml of a Codex home: the user's config
// file userConfig (none when it does not exist) with its hooks replaced by
// Legion's (each of CodexHookEvents running `<legion> hook`, the
// PermissionRequest one with PermissionHookTimeout, SessionEnd with Codex's
// own limit) and the main checkout repo trusted.
func ConfigFor(userConfig, legion, repo string, sb *Sandbox) ([]byte, error) {
	cfg := map[string]any{}
	if _, err := toml.DecodeFile(userConfig, &cfg); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read your Codex config %s: %w", userConfig, err)
	}
	command := shellquote.Quote(legion) + " hook"
	hooks := map[string]any{}
	for _, ev := range HookEvents {
		h := map[string]any{"type": "command", "command": command}
		switch ev {
		case "PermissionRequest":
			h["timeout"] = int64(agent.PermissionHookTimeout / time.Second)
		case "SessionEnd":
			// Codex clamps it to 3 s with a startup warning (X13).
			h["timeout"] = int64(3)
		}
		hooks[ev] = []map[string]any{{"hooks": []map[string]any{h}}}
	}
	cfg["hooks"] = hooks
	projects, _ := cfg["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
	}
	p, _ := projects[repo].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	p["trust_level"] = "trusted"
	projects[repo] = p
	cfg["projects"] = projects
	if sb != nil {
		ww, _ := cfg["sandbox_workspace_write"].(map[string]any)
		if ww == nil {
			ww = map[string]any{}
		}
		var roots []any
		if old, ok := ww["writable_roots"].([]any); ok {
			roots = old
		}
		for _, r := range sb.WritableRoots {
			roots = append(roots, r)
		}
		if len(roots) > 0 {
			ww["writable_roots"] = roots
		}
		if sb.Network {
			ww["network_access"] = true
		}
		cfg["sandbox_workspace_write"] = ww
	}
	var b bytes.Buffer
	b.WriteString("# Written by Legion for one conversation (agent.kind = \"codex\"), from your own\n# config.toml; rewritten at every start of its worker.\n")
	if err := toml.NewEncoder(&b).Encode(cfg); err != nil {
		return nil, fmt.Errorf("encode Codex config: %w", err)
	}
	return b.Bytes(), nil
}

// Sandbox is what a Codex home's config.toml adds to Codex's own
// workspace-write sandbox (sandbox_workspace_write), the sandbox of the
// allowlist and ask policies.
type Sandbox struct {
	WritableRoots []string // writable besides the working root
	Network       bool     // network_access: sockets, unix ones included
}

// New is the kind for the team's agent table a.
func New(a config.Agent) agent.Kind { return &Kind{Config: a} }

// LimitWindow is five hours: the provider's usage windows (a plan's
// five-hour limit) are the longest Legion backs off at a limit whose
// reset time it does not learn.
func (*Kind) LimitWindow() time.Duration { return 5 * time.Hour }
