package opencode

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/internal/privdir"
)

// Kind is the opencode CLI (agent.kind = "opencode"), as probed in
// agent/opencode/FACTS.md (cited below as O<n>). opencode picks its
// conversation's id itself (ses_…, O6), so Legion gives every
// conversation an opencode home of its own, [Home], with its own
// session database (OPENCODE_DB), and resumes the last session of that
// database (`opencode --continue`). Prepare gives every session:
//
//   - the home's opencode.json (0600, in a 0700 directory), passed as
//     OPENCODE_CONFIG, which opencode merges over the user's own
//     ~/.config/opencode/opencode.json (provider, model, key: the key comes
//     from the environment as the user's config says, never from Legion):
//     Legion's plugin and the team's permission policy;
//   - the plugin (legion.js beside it), which relays opencode's events to
//     `<legion> hook` as Claude Code's hook payloads (SessionStart,
//     UserPromptSubmit, PreToolUse, PostToolUse, PermissionRequest, Stop,
//     StopFailure), answers a permission request through opencode's API
//     with the hook's decision, and records opencode's session id in the
//     session file once it appears;
//   - OPENCODE_DB, and the variables that keep opencode off the network
//     (no auto-update, no models.dev fetch, no share, no LSP download);
//   - for the finish mode the main checkout as opencode's project (its
//     worktree goes away while it runs) and for the bypass policy --auto,
//     right after the program;
//   - the removal of opencode's lock left by a killed run (O4), when its
//     process is gone.
//
// The worker runs it as kind claude ([agent.Launch].Agent is "claude"): the
// plugin's payloads have Claude Code's names and fields. The session file
// is the home's "session" (opencode's ses_ id): once it exists a restart
// resumes, and the plugin sends the resumed start's prompt (O7: with
// --continue or -s the TUI ignores --prompt).
//
// Questions come as text: the question tool is denied (O19), so the model
// asks in its answer and ends its turn, which the controller escalates.
//
// Limits: agent.allow's Bash rules become opencode bash patterns, its
// other rules are not used.
type Kind struct {
	Config config.Agent // the team's agent table
}

//go:embed opencode_plugin.js
var opencodePlugin string

// SessionFileName is the file of an opencode home that holds the
// conversation's opencode session id: its session file.
const SessionFileName = "session"

// UsageFile is the file of an opencode home where Legion's plugin
// appends each assistant message's tokens and cost, one JSON object a
// line ({"id","sessionID","tokens":{"input","output","reasoning",
// "cache":{"read","write"}},"cost"}), again whenever they change: opencode
// itself keeps them only in its SQLite database (FACTS O27).
const UsageFile = "usage.jsonl"

// Env is the environment every opencode agent gets: no network
// beyond its provider (O3).
var Env = []string{
	"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1",
	"OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
}

// Name is "opencode".
func (*Kind) Name() string { return string(config.AgentOpencode) }

// SessionID is Legion's id of the conversation, as for Claude: it names
// the opencode home ({session_id} is not opencode's own id, O6).
func (*Kind) SessionID(team uuid.UUID, issue, mode string) uuid.UUID {
	return claudecode.SessionID(team, issue, mode)
}

// SessionFile is "": the session file is in the opencode home, which
// depends on the session's directory; Plan names it.
func (*Kind) SessionFile(home, cwd string, id uuid.UUID) string { return "" }

// UserConfig is the user's global opencode.json (or .jsonc) in
// $XDG_CONFIG_HOME/opencode, else ~/.config/opencode, which opencode
// merges the session's config over, for a pod's home (agent.UserConfiger;
// the pod sets no XDG_CONFIG_HOME). Not auth.json: a key reaches a pod from
// the team's Secret.
func (*Kind) UserConfig(home string, lookupEnv func(string) (string, bool)) []agent.HomeFile {
	dir := filepath.Join(home, ".config")
	if v, ok := lookupEnv("XDG_CONFIG_HOME"); ok && filepath.IsAbs(v) {
		dir = v
	}
	var out []agent.HomeFile
	for _, name := range []string{"opencode.json", "opencode.jsonc"} {
		out = append(out, agent.HomeFile{From: filepath.Join(dir, "opencode", name), To: filepath.Join(".config", "opencode", name)})
	}
	return out
}

// Home is the opencode home of conversation id whose sessions keep
// their directories in dir's parent: "opencode-<id>" beside them, shared
// by the sessions of one conversation (an implementer and its retro).
func Home(dir string, id uuid.UUID) string {
	return agent.ConversationHome(dir, "opencode", id)
}

// Plan expands agent.new and agent.resume and names the session file.
func (o *Kind) Plan(s agent.Session) (agent.Launch, error) {
	argvNew, argvResume, err := agent.Expand(o.Config, s.Vars)
	if err != nil {
		return agent.Launch{}, err
	}
	return agent.Launch{
		Agent: string(config.AgentClaude), ArgvNew: argvNew, ArgvResume: argvResume,
		SessionFile: filepath.Join(Home(s.Dir, s.ID), SessionFileName),
	}, nil
}

// Prepare writes the opencode home's config and plugin, removes a stale
// lock (not with s.PlanOnly), and adds the arguments and environment to l.
func (o *Kind) Prepare(ctx context.Context, s agent.Session, l agent.Launch) (agent.Launch, error) {
	if !filepath.IsAbs(s.Legion) {
		return agent.Launch{}, fmt.Errorf("prepare opencode session %s: the plugin needs the legion binary's absolute path, got %q", s.ID, s.Legion)
	}
	if !filepath.IsAbs(s.Dir) || !filepath.IsAbs(s.Home) {
		return agent.Launch{}, fmt.Errorf("prepare opencode session %s: want absolute paths, got dir %q, home %q", s.ID, s.Dir, s.Home)
	}
	policy := agent.ApplyPolicy(o.Config, s, config.AgentOpencode, &l)
	if policy == "" {
		policy = config.PermissionsAllowlist
	}
	switch policy {
	case config.PermissionsAllowlist, config.PermissionsAsk, config.PermissionsBypass:
	default:
		return agent.Launch{}, fmt.Errorf("prepare opencode session %s: unknown permission policy %q", s.ID, policy)
	}
	home := Home(s.Dir, s.ID)
	plugin := filepath.Join(home, "legion.js")
	cfg, err := ConfigFor(plugin, s.Legion, policy, o.Config.Allow)
	if err != nil {
		return agent.Launch{}, fmt.Errorf("prepare opencode session %s: %w", s.ID, err)
	}
	path := filepath.Join(home, "opencode.json")
	if !s.PlanOnly {
		if err := writeHome(s, l, home, cfg); err != nil {
			return agent.Launch{}, fmt.Errorf("prepare opencode session %s: %w", s.ID, err)
		}
	}
	var args []string
	if s.Mode == agent.FinishMode && filepath.IsAbs(s.Repo) {
		// The finisher removes the worktree it starts in: its project is
		// the main checkout (opencode's positional [project]), as for
		// Codex (codex FACTS X21).
		args = append(args, agent.Physical(s.Repo))
	}
	if policy == config.PermissionsBypass {
		args = append(args, "--auto")
	}
	if len(args) > 0 {
		l.ArgvNew = agent.InsertArgs(nil, l.ArgvNew, args...)
		if l.ArgvResume != nil {
			l.ArgvResume = agent.InsertArgs(nil, l.ArgvResume, args...)
		}
	}
	l.Env = append(l.Env, Env...)
	l.Env = append(l.Env, "OPENCODE_CONFIG="+path, "OPENCODE_DB="+filepath.Join(home, "opencode.db"))
	return l, nil
}

// writeHome writes the opencode home of session s: the resumed start's
// prompt (it goes through the plugin, O7), Legion's plugin, the config
// cfg; and removes the stale locks a killed opencode left in the user's
// state.
func writeHome(s agent.Session, l agent.Launch, home string, cfg []byte) error {
	if err := privdir.Ensure(home); err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{
		{"resume-prompt", []byte(argValue(l.ArgvResume, "--prompt"))},
		{"legion.js", PluginFor(s.Legion, home)},
		{"opencode.json", cfg},
	}
	for _, f := range files {
		path := filepath.Join(home, f.name)
		if err := atomicfile.WritePrivate(path, f.data); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	state := filepath.Join(s.Home, ".local", "state")
	if v, ok := s.Getenv("XDG_STATE_HOME"); ok && filepath.IsAbs(v) {
		state = v
	}
	_, err := RemoveStaleLocks(filepath.Join(state, "opencode", "locks"))
	return err
}

// PluginFor is the plugin of the conversation whose opencode home
// is home: Legion's plugin with the legion binary and its files there
// (the session file it records the id in, the usage file, the resumed
// start's prompt, its log).
func PluginFor(legion, home string) []byte {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return []byte("// Written by Legion for one conversation (agent.kind = \"opencode\"); rewritten at every start.\n" +
		"const LEGION = " + q(legion) + "\nconst SESSION_FILE = " + q(filepath.Join(home, SessionFileName)) +
		"\nconst USAGE_FILE = " + q(filepath.Join(home, UsageFile)) + "\nconst HOME_DIR = " + q(home) + "\nconst PROMPT_FILE = " + q(filepath.Join(home, "resume-prompt")) + "\nconst LOG = " + q(filepath.Join(home, "plugin.log")) +
		"\n" + opencodePlugin)
}

// argValue is the value of flag in argv ("--flag value" or
// "--flag=value"), "" when it has none.
func argValue(argv []string, flag string) string {
	for i, a := range argv {
		if a == flag && i+1 < len(argv) {
			return argv[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// ConfigFor is the opencode.json Legion passes as OPENCODE_CONFIG:
// the plugin, and the permissions of policy (allow: Claude Code rules of
// agent.allow; only Bash(...) ones are used), the question tool denied
// under every policy, whatever the user's own opencode.json says of it.
func ConfigFor(plugin, legion string, policy config.PermissionPolicy, allow []string) ([]byte, error) {
	var perm map[string]any
	switch policy {
	case config.PermissionsBypass:
		perm = map[string]any{"*": "allow", "bash": "allow", "edit": "allow", "webfetch": "allow", "external_directory": "allow"}
	case config.PermissionsAsk:
		bash := map[string]any{"*": "ask"}
		for _, p := range []string{"legion", legion} {
			bash[p+" issue *"] = "allow"
		}
		perm = map[string]any{"*": "ask", "bash": bash, "edit": "ask", "webfetch": "ask", "external_directory": "ask"}
	default:
		bash := map[string]any{"*": "ask", "git": "allow", "git *": "allow"}
		for _, p := range []string{"legion", legion} {
			for _, c := range []string{"issue", "state", "worktree finish"} {
				bash[p+" "+c+" *"] = "allow"
			}
		}
		for _, r := range allow {
			if pat, ok := bashPattern(r); ok {
				bash[pat] = "allow"
			}
		}
		perm = map[string]any{"bash": bash, "edit": "allow", "read": "allow", "glob": "allow", "grep": "allow",
			"list": "allow", "webfetch": "ask", "external_directory": "ask"}
	}
	// The TUI offers the model its question tool, whose dialog no hook or
	// plugin event answers: a question would wait unseen until the
	// watchdog restarts the worker (FACTS O19). Denied, the tool is not
	// offered; the model asks in text and ends its turn, which the
	// controller escalates. opencode applies the last rule that matches
	// a tool, in the merged config's key order, where a key keeps the
	// place of the file that named it first: a "question" key in the
	// user's own opencode.json puts this rule before their "*" or ours
	// (FACTS O19a). "question*" matches the tool too, and a key their
	// configs do not name is placed after all of theirs.
	perm["question"] = "deny"
	perm["question*"] = "deny"
	cfg := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"plugin":     []string{"file://" + plugin},
		"permission": perm,
		"autoupdate": false,
		"share":      "disabled",
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode opencode config: %w", err)
	}
	return append(b, '\n'), nil
}

// bashPattern is the opencode bash pattern of a Claude Code rule
// "Bash(cmd)" ("cmd") or "Bash(cmd:*)" ("cmd *").
func bashPattern(rule string) (string, bool) {
	in, ok := strings.CutPrefix(rule, "Bash(")
	if !ok || !strings.HasSuffix(in, ")") {
		return "", false
	}
	in = strings.TrimSuffix(in, ")")
	if p, ok := strings.CutSuffix(in, ":*"); ok {
		return p + " *", true
	}
	return in, in != ""
}

// RemoveStaleLocks removes the locks in dir
// (~/.local/state/opencode/locks/<hash>.lock/, O4) left by an opencode
// that is gone: its meta.json ({token, pid, hostname, createdAt}) names
// this host and a pid that no longer runs. opencode itself breaks a lock
// only once its heartbeat file is a minute old (O10); a start that finds
// one sooner waits. A lock whose meta.json cannot be read, or of another
// host, is left to opencode. It returns the locks it removed.
func RemoveStaleLocks(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read opencode's locks %s: %w", dir, err)
	}
	host, _ := os.Hostname()
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".lock") {
			continue
		}
		lock := filepath.Join(dir, e.Name())
		meta, err := os.ReadFile(filepath.Join(lock, "meta.json"))
		if err != nil {
			continue
		}
		m, ok := parseOpencodeLock(meta)
		if !ok || m.Hostname != host || processAlive(m.PID) {
			continue
		}
		if err := os.RemoveAll(lock); err != nil {
			return removed, fmt.Errorf("remove opencode's stale lock %s: %w", lock, err)
		}
		removed = append(removed, lock)
	}
	return removed, nil
}

// opencodeLock is a lock's meta.json.
type opencodeLock struct {
	PID      int    `json:"pid"`
	Hostname string `json:"hostname"`
}

// parseOpencodeLock reads a lock's meta.json; ok is false unless it is a
// JSON object with a positive pid and a hostname.
func parseOpencodeLock(meta []byte) (m opencodeLock, ok bool) {
	if err := json.Unmarshal(meta, &m); err != nil {
		return opencodeLock{}, false
	}
	return m, m.PID > 0 && m.Hostname != ""
}

// processAlive reports whether pid runs (or cannot be signalled for want
// of rights, which also means it runs).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// New is the kind for the team's agent table a.
func New(a config.Agent) agent.Kind { return &Kind{Config: a} }

// LimitWindow is five hours: the provider's usage windows (a plan's
// five-hour limit) are the longest Legion backs off at a limit whose
// reset time it does not learn.
func (*Kind) LimitWindow() time.Duration { return 5 * time.Hour }
