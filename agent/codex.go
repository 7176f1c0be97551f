package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/internal/privdir"
	"github.com/legion-dev/legion/internal/shellquote"
)

// Codex is OpenAI's Codex CLI (agent.kind = "codex"), as probed in
// agent/codex/FACTS.md (cited below as X<n>). Codex picks its
// conversation's id itself (X9), so Legion gives every conversation a
// Codex home of its own, [CodexHome], and resumes "the last session" of
// that home (`codex resume --last`, X11). Prepare gives every session:
//
//   - the home's config.toml (0600, in a 0700 directory): the user's own
//     config.toml ($CODEX_HOME, else ~/.codex) with, replaced, a hook for
//     each of [CodexHookEvents] running `<legion> hook` (Codex's hooks have
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
// The worker runs it as kind claude ([Launch].Agent is "claude"): its state
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
type Codex struct {
	Config config.Agent // the team's agent table
}

// CodexHookEvents are the Codex hook events a session's config.toml sends
// to its worker (X13).
var CodexHookEvents = []string{
	"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
	"PostToolUse", "Stop", "SubagentStart", "SubagentStop", "SessionEnd",
}

// codexFinishMode is the mode of the phase that merges and removes the
// worktree (controller.ModeFinish).
const codexFinishMode = "finish"

// CodexHistoryFile is the file of a Codex home that Codex writes at every
// prompt: a Codex session's session file.
const CodexHistoryFile = "history.jsonl"

// Name is "codex".
func (*Codex) Name() string { return string(config.AgentCodex) }

// SessionID is Legion's id of the conversation, as for Claude: it names
// the Codex home ({session_id} is not Codex's own id, X9).
func (*Codex) SessionID(team uuid.UUID, issue, mode string) uuid.UUID {
	return claudecode.SessionID(team, issue, mode)
}

// SessionFile is "": a Codex session's file is in its Codex home, which
// depends on the session's directory; Plan names it.
func (*Codex) SessionFile(home, cwd string, id uuid.UUID) string { return "" }

// CodexHome is the Codex home of conversation id whose sessions keep their
// directories in dir's parent: "codex-<id>" beside them, shared by the
// sessions of one conversation (an implementer and its retro).
func CodexHome(dir string, id uuid.UUID) string {
	return conversationHome(dir, "codex", id)
}

// conversationHome is the agent home of a kind whose CLI keeps its state
// per conversation: "<kind>-<id>" beside the sessions' directories (dir's
// parent), shared by the sessions of one conversation.
func conversationHome(dir, kind string, id uuid.UUID) string {
	return filepath.Join(filepath.Dir(dir), kind+"-"+id.String())
}

// Plan expands agent.new and agent.resume and names the session file.
func (c *Codex) Plan(s Session) (Launch, error) {
	argvNew, argvResume, err := expand(c.Config, s.Vars)
	if err != nil {
		return Launch{}, err
	}
	return Launch{
		Agent: string(config.AgentClaude), ArgvNew: argvNew, ArgvResume: argvResume,
		SessionFile: filepath.Join(CodexHome(s.Dir, s.ID), CodexHistoryFile),
	}, nil
}

// Prepare writes the Codex home's config.toml and auth link, and adds the
// arguments and CODEX_HOME to l.
func (c *Codex) Prepare(ctx context.Context, s Session, l Launch) (Launch, error) {
	if !filepath.IsAbs(s.Legion) {
		return Launch{}, fmt.Errorf("prepare codex session %s: the hooks need the legion binary's absolute path, got %q", s.ID, s.Legion)
	}
	if !filepath.IsAbs(s.Dir) || !filepath.IsAbs(s.Repo) || !filepath.IsAbs(s.Home) {
		return Launch{}, fmt.Errorf("prepare codex session %s: want absolute paths, got dir %q, repo %q, home %q", s.ID, s.Dir, s.Repo, s.Home)
	}
	policy := applyPolicy(c.Config, s, config.AgentCodex, &l)
	switch policy {
	case config.PermissionsAllowlist, config.PermissionsAsk, config.PermissionsBypass, "":
	default:
		return Launch{}, fmt.Errorf("prepare codex session %s: unknown permission policy %q", s.ID, policy)
	}
	home := CodexHome(s.Dir, s.ID)
	if err := privdir.Ensure(home); err != nil {
		return Launch{}, fmt.Errorf("prepare codex session %s: %w", s.ID, err)
	}
	user := filepath.Join(s.Home, ".codex")
	if v, ok := s.Getenv("CODEX_HOME"); ok && filepath.IsAbs(v) {
		user = v
	}
	var sb *CodexSandbox
	if policy != config.PermissionsBypass {
		// Codex's own workspace-write sandbox: a commit in the worktree
		// writes the repository's git directory, and Legion's own
		// commands reach the session's worker over its unix socket.
		sb = &CodexSandbox{WritableRoots: gitWritable(s.Cwd), Network: true}
	}
	data, err := CodexConfigFor(filepath.Join(user, "config.toml"), s.Legion, physical(s.Repo), sb)
	if err != nil {
		return Launch{}, fmt.Errorf("prepare codex session %s: %w", s.ID, err)
	}
	path := filepath.Join(home, "config.toml")
	if err := atomicfile.WritePrivate(path, data); err != nil {
		return Launch{}, fmt.Errorf("prepare codex session %s: write %s: %w", s.ID, path, err)
	}
	if err := linkAuth(filepath.Join(user, "auth.json"), filepath.Join(home, "auth.json")); err != nil {
		return Launch{}, fmt.Errorf("prepare codex session %s: %w", s.ID, err)
	}

	args := []string{"--no-daemon", "--dangerously-bypass-hook-trust"}
	if s.Mode == codexFinishMode {
		// The finisher removes the worktree it starts in; Codex runs its
		// hooks in its working root, and fails them once that is gone
		// (X21): the finisher's root is the main checkout.
		args = append(args, "--cd", physical(s.Repo))
	}
	if policy == config.PermissionsBypass {
		args = append(args, "--dangerously-bypass-approvals-and-sandbox")
	}
	l.ArgvNew = InsertArgs(nil, l.ArgvNew, args...)
	if l.ArgvResume != nil {
		l.ArgvResume = InsertArgs(nil, l.ArgvResume, args...)
	}
	l.Env = append(l.Env, "CODEX_HOME="+home)
	return l, nil
}

// CodexConfigFor is the config.toml of a Codex home: the user's config
// file userConfig (none when it does not exist) with its hooks replaced by
// Legion's (each of CodexHookEvents running `<legion> hook`, the
// PermissionRequest one with PermissionHookTimeout, SessionEnd with Codex's
// own limit) and the main checkout repo trusted.
func CodexConfigFor(userConfig, legion, repo string, sb *CodexSandbox) ([]byte, error) {
	cfg := map[string]any{}
	if _, err := toml.DecodeFile(userConfig, &cfg); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read your Codex config %s: %w", userConfig, err)
	}
	command := shellquote.Quote(legion) + " hook"
	hooks := map[string]any{}
	for _, ev := range CodexHookEvents {
		h := map[string]any{"type": "command", "command": command}
		switch ev {
		case "PermissionRequest":
			h["timeout"] = int64(PermissionHookTimeout / time.Second)
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

// CodexSandbox is what a Codex home's config.toml adds to Codex's own
// workspace-write sandbox (sandbox_workspace_write), the sandbox of the
// allowlist and ask policies.
type CodexSandbox struct {
	WritableRoots []string // writable besides the working root
	Network       bool     // network_access: sockets, unix ones included
}

// linkAuth makes link a symlink to auth when auth exists, and removes a
// link left from an earlier start when it does not.
func linkAuth(auth, link string) error {
	if _, err := os.Stat(auth); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("check %s: %w", auth, err)
		}
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", link, err)
		}
		return nil
	}
	if target, err := os.Readlink(link); err == nil && target == auth {
		return nil
	}
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(auth, tmp); err != nil {
		return fmt.Errorf("link %s: %w", auth, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		return fmt.Errorf("link %s: %w", auth, err)
	}
	return nil
}
