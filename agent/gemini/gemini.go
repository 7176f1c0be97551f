package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// Kind is Google's Gemini CLI (agent.kind = "gemini"), as probed in
// agent/gemini/FACTS.md (cited below as G<n>). Every conversation gets
// a Gemini home of its own, [Home], passed as GEMINI_CLI_HOME (the
// CLI then keeps all of its state in <home>/.gemini, G14), so the user's
// ~/.gemini is never written. Prepare gives every session:
//
//   - the home's .gemini/settings.json (0600, in 0700 directories): the
//     user's own settings.json (~/.gemini) with, replaced, a hook for each
//     of [HookEvents] running `<legion> hook` (which reads Gemini's
//     events as Claude Code's, translated as [HookDialect] says), the auth type
//     gemini-api-key unless the user chose another (no auth dialog, G4,
//     G5), no auto-update, update nag or usage statistics;
//   - a policy file (.gemini/policies/legion.toml, [PolicyFor])
//     that denies the question tool ask_user and, for the allowlist and
//     ask policies, allows the shell commands of Legion's worker skill:
//     legion issue, legion state, legion worktree finish, git and file edits
//     in the worktree, or only legion issue;
//   - trustedFolders.json trusting the session's worktree (no trust
//     dialog, which would restart the CLI and lose the prompt, G4) and
//     projects.json naming its project "legion", so that its files are in
//     <home>/.gemini/tmp/legion;
//   - a link to the user's oauth_creds.json, when there is one (a Google
//     login); an API key comes from the environment (GEMINI_API_KEY), and
//     is never written;
//   - for the bypass policy --approval-mode yolo after the program, and
//     for the finish mode `/usr/bin/env -C <main checkout>` before it (its
//     worktree goes away while it runs, and with it the CLI's hooks, which
//     run in its working directory: so the main checkout is the one
//     trusted and named then);
//   - GEMINI_CLI_HOME, GEMINI_CLI_NO_RELAUNCH=true (one node process
//     instead of two, G1, so the worker's SIGINT ends it cleanly, G3) and
//     LEGION_HOOK_DIALECT=gemini (`legion hook` translates its payloads
//     with [HookDialect]).
//
// The session id is Legion's own (--session-id on a new run, --resume on a
// restart, G7). The worker runs it as kind claude ([agent.Launch].Agent is
// "claude"). Approvals cannot be answered by a hook (G11): the worker sees
// the dialog by its Notification (G10), and a person's answer goes in by
// keys (1 allows, Esc denies); for one of Legion's own commands the
// worker types the allow itself (G28). The session file is the project's
// logs.json, which the CLI writes at every prompt: once it exists a
// restart resumes.
//
// Questions come as text: ask_user is denied (G12, G21), so the model asks
// in its answer and ends its turn, which the controller escalates.
//
// Limits: agent.allow is not used (Claude Code's rule syntax); a stalled
// stream is only seen by the missing hooks (G13).
type Kind struct {
	Config config.Agent // the team's agent table
}

// HookEvents are the Gemini hook events a session's settings send to
// its worker (G9): not AfterModel (once per streamed chunk) nor
// PreCompress (before every model call), which say nothing of the state.
var HookEvents = []string{
	"SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "Notification", "SessionEnd",
}

// geminiProject is the project name Legion gives a session's worktree in
// its Gemini home (projects.json): the CLI's files for it are in
// <home>/.gemini/tmp/<geminiProject>.
const geminiProject = "legion"

// LogsFile is the file of a project that the Gemini CLI writes at
// every prompt (relative to the Gemini home): a Gemini session's session
// file.
var LogsFile = filepath.Join(".gemini", "tmp", geminiProject, "logs.json")

// geminiAllowed are the command prefixes of the shell commands policy
// lets a gemini agent run without asking, as Claude Code's rules
// ([agent.AllowRules]): for allowlist Legion's own commands of the worker's
// instructions (legion issue, legion state, legion worktree finish, by
// name and by legion's absolute path) and git, for ask only Legion's
// reports (legion issue); none for bypass, which asks nothing. A prefix
// matches the command's text up to a blank or a quote, so a variable in
// the rest ($LEGION_TEAM) does not defeat it, and the CLI checks each
// command of a compound one apart (gemini FACTS G28).
func geminiAllowed(legion string, policy config.PermissionPolicy) []string {
	var subs []string
	switch policy {
	case config.PermissionsAllowlist, "":
		subs = []string{"issue", "state", "worktree finish"}
	case config.PermissionsAsk:
		subs = []string{"issue"}
	default:
		return nil
	}
	var out []string
	for _, sub := range subs {
		out = append(out, legion+" "+sub, "legion "+sub)
	}
	if policy != config.PermissionsAsk {
		out = append(out, "git")
	}
	return out
}

// PolicyFor is the policy file (the Gemini CLI's policy engine, its
// user tier: <home>/.gemini/policies) of every session. It denies the
// question tool ask_user: its dialog is answered by no hook (G12) and
// opens even under --approval-mode yolo, so a question would wait on a
// screen nobody sees; denied, the tool is not offered to the model, which
// asks in text and ends its turn, and the controller escalates what it
// said like any turn that ended without worker-done (G21). It allows the
// shell commands of geminiAllowed and, for allowlist, the file tools
// write_file and replace (which keep to the worktree, as Claude Code's
// allowlist does). tools.allowed of the settings is not used: with it,
// 0.61.0 denied every other shell command instead of asking (gemini FACTS
// G15).
func PolicyFor(legion string, policy config.PermissionPolicy) ([]byte, error) {
	// Above yolo's own rule for ask_user (priority 999 of the default
	// tier): a user-tier rule wins over every default-tier one.
	rules := []any{map[string]any{"toolName": "ask_user", "decision": "deny", "priority": 100}}
	if allowed := geminiAllowed(legion, policy); len(allowed) > 0 {
		rules = append(rules, map[string]any{"toolName": "run_shell_command", "commandPrefix": allowed, "decision": "allow", "priority": 100})
		if policy != config.PermissionsAsk {
			// Editing files: the CLI's file tools refuse paths outside its
			// workspace, the worktree.
			for _, tool := range []string{"write_file", "replace"} {
				rules = append(rules, map[string]any{"toolName": tool, "decision": "allow", "priority": 100})
			}
		}
	}
	var b bytes.Buffer
	b.WriteString("# Written by Legion for one conversation (agent.kind = \"gemini\"): no question\n# tool (its dialog is answered by no hook), and the shell commands its\n# permission policy runs without asking; rewritten at every start.\n")
	if err := toml.NewEncoder(&b).Encode(map[string]any{"rule": rules}); err != nil {
		return nil, fmt.Errorf("encode Gemini policy: %w", err)
	}
	return b.Bytes(), nil
}

// Name is "gemini".
func (*Kind) Name() string { return string(config.AgentGemini) }

// SessionID is Legion's id of the conversation, as for Claude; the CLI
// takes it as its own (G7).
func (*Kind) SessionID(team uuid.UUID, issue, mode string) uuid.UUID {
	return claudecode.SessionID(team, issue, mode)
}

// SessionFile is "": a Gemini session's file is in its Gemini home, which
// depends on the session's directory; Plan names it.
func (*Kind) SessionFile(home, cwd string, id uuid.UUID) string { return "" }

// UserConfig is the user's ~/.gemini/settings.json, the one writeHome
// makes a session's from, for a pod's home (agent.UserConfiger). Not the
// OAuth credentials: a key reaches a pod from the team's Secret.
func (*Kind) UserConfig(home string, _ func(string) (string, bool)) []agent.HomeFile {
	rel := filepath.Join(".gemini", "settings.json")
	return []agent.HomeFile{{From: filepath.Join(home, rel), To: rel}}
}

// Home is the Gemini home (GEMINI_CLI_HOME) of conversation id whose
// sessions keep their directories in dir's parent: "gemini-<id>" beside
// them, shared by the sessions of one conversation (an implementer and its
// retro).
func Home(dir string, id uuid.UUID) string {
	return agent.ConversationHome(dir, "gemini", id)
}

// Plan expands agent.new and agent.resume and names the session file.
func (g *Kind) Plan(s agent.Session) (agent.Launch, error) {
	argvNew, argvResume, err := agent.Expand(g.Config, s.Vars)
	if err != nil {
		return agent.Launch{}, err
	}
	return agent.Launch{
		Agent: string(config.AgentClaude), ArgvNew: argvNew, ArgvResume: argvResume,
		SessionFile: filepath.Join(Home(s.Dir, s.ID), LogsFile),
	}, nil
}

// writeHome writes the Gemini CLI home of session s, whose working
// directory is cwd: its settings (the user's with Legion's hooks), the
// trust and project of cwd, Legion's policy rules and the link to the
// user's OAuth credentials.
func writeHome(s agent.Session, policy config.PermissionPolicy, home, cwd string) error {
	dot := filepath.Join(home, ".gemini")
	for _, d := range []string{home, dot} {
		if err := privdir.Ensure(d); err != nil {
			return err
		}
	}
	user := filepath.Join(s.Home, ".gemini")
	settings, err := SettingsFor(filepath.Join(user, "settings.json"), s.Legion)
	if err != nil {
		return err
	}
	trust, _ := json.Marshal(map[string]string{cwd: "TRUST_FOLDER"})
	projects, _ := json.Marshal(map[string]any{"projects": map[string]string{cwd: geminiProject}})
	for name, data := range map[string][]byte{"settings.json": settings, "trustedFolders.json": trust, "projects.json": projects} {
		path := filepath.Join(dot, name)
		if err := atomicfile.WritePrivate(path, data); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	rules, err := PolicyFor(s.Legion, policy)
	if err != nil {
		return err
	}
	policies := filepath.Join(dot, "policies")
	rulesPath := filepath.Join(policies, "legion.toml")
	if err := privdir.Ensure(policies); err != nil {
		return err
	}
	if err := atomicfile.WritePrivate(rulesPath, rules); err != nil {
		return fmt.Errorf("write %s: %w", rulesPath, err)
	}
	return agent.LinkAuth(filepath.Join(user, "oauth_creds.json"), filepath.Join(dot, "oauth_creds.json"))
}

// Prepare writes the Gemini home's settings, trust and project files and
// the credentials link (not with s.PlanOnly), and adds the arguments and
// environment to l.
func (g *Kind) Prepare(ctx context.Context, s agent.Session, l agent.Launch) (agent.Launch, error) {
	fail := func(err error) (agent.Launch, error) {
		return agent.Launch{}, fmt.Errorf("prepare gemini session %s: %w", s.ID, err)
	}
	if !filepath.IsAbs(s.Legion) {
		return fail(fmt.Errorf("the hooks need the legion binary's absolute path, got %q", s.Legion))
	}
	if !filepath.IsAbs(s.Dir) || !filepath.IsAbs(s.Cwd) || !filepath.IsAbs(s.Home) {
		return fail(fmt.Errorf("want absolute paths, got dir %q, cwd %q, home %q", s.Dir, s.Cwd, s.Home))
	}
	policy := agent.ApplyPolicy(g.Config, s, config.AgentGemini, &l)
	switch policy {
	case config.PermissionsAllowlist, config.PermissionsAsk, config.PermissionsBypass, "":
	default:
		return fail(fmt.Errorf("unknown permission policy %q", policy))
	}
	home := Home(s.Dir, s.ID)
	cwd := agent.Physical(s.Cwd)
	if s.Mode == agent.FinishMode {
		// The finisher removes the worktree it starts in; the CLI runs
		// its hooks in its working directory, and fails them once that
		// is gone (like Codex, X21): the finisher runs in the main
		// checkout, as for Codex.
		cwd = agent.Physical(s.Repo)
	}
	if !s.PlanOnly {
		if err := writeHome(s, policy, home, cwd); err != nil {
			return fail(err)
		}
	}
	if policy == config.PermissionsBypass {
		l.ArgvNew = agent.InsertArgs(g.Config.New, l.ArgvNew, "--approval-mode", "yolo")
		if l.ArgvResume != nil {
			l.ArgvResume = agent.InsertArgs(g.Config.Resume, l.ArgvResume, "--approval-mode", "yolo")
		}
	}
	if s.Mode == agent.FinishMode {
		// The Gemini CLI has no option for its directory: env(1) -C.
		l.ArgvNew = append([]string{"/usr/bin/env", "-C", cwd}, l.ArgvNew...)
		if l.ArgvResume != nil {
			l.ArgvResume = append([]string{"/usr/bin/env", "-C", cwd}, l.ArgvResume...)
		}
	}
	l.Env = append(l.Env, "GEMINI_CLI_HOME="+home, "GEMINI_CLI_NO_RELAUNCH=true", proto.EnvHookDialect+"="+string(config.AgentGemini))
	l.DialogMarkers = []string{DialogMarker}
	return l, nil
}

// SettingsFor is the settings.json of a Gemini home: the user's
// settings file userSettings (none when it does not exist) with its hooks
// replaced by Legion's (each of GeminiHookEvents running `<legion> hook`),
// the API key's auth type unless it names one, and no auto-update, update
// nag or usage statistics.
func SettingsFor(userSettings, legion string) ([]byte, error) {
	cfg := map[string]any{}
	data, err := os.ReadFile(userSettings)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read your Gemini settings %s: %w", userSettings, err)
	default:
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("read your Gemini settings %s: want a JSON object (Legion does not read comments in it): %w", userSettings, err)
		}
	}
	table := func(parent map[string]any, key string) map[string]any {
		t, _ := parent[key].(map[string]any)
		if t == nil {
			t = map[string]any{}
			parent[key] = t
		}
		return t
	}
	auth := table(table(cfg, "security"), "auth")
	if _, ok := auth["selectedType"].(string); !ok {
		auth["selectedType"] = "gemini-api-key"
	}
	general := table(cfg, "general")
	general["disableAutoUpdate"], general["disableUpdateNag"] = true, true
	table(cfg, "privacy")["usageStatisticsEnabled"] = false
	hook := map[string]any{"type": "command", "command": shellquote.Quote(legion) + " hook", "name": "legion"}
	hooks := map[string]any{}
	for _, ev := range HookEvents {
		hooks[ev] = []any{map[string]any{"hooks": []any{hook}}}
	}
	cfg["hooks"] = hooks
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cfg); err != nil {
		return nil, fmt.Errorf("encode Gemini settings: %w", err)
	}
	return b.Bytes(), nil
}

// New is the kind for the team's agent table a.
func New(a config.Agent) agent.Kind { return &Kind{Config: a} }

// LimitWindow is a day: the Gemini API's quotas are per minute and per
// day, the longest Legion backs off at a limit whose reset time it does
// not learn.
func (*Kind) LimitWindow() time.Duration { return 24 * time.Hour }
