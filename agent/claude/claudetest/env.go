package claudetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/internal/atomicfile"
)

// Token is the credential the CLI sends the fake API (as
// ANTHROPIC_AUTH_TOKEN, a Bearer token) and the only one the API accepts.
const Token = "sk-ant-claudetest-00000000000000000000"

// Options are the choices of New.
type Options struct {
	// Home is the CLI's HOME; "" makes a new one under t.TempDir().
	Home string
	// Trusted are the directories ~/.claude.json marks as trusted: the main
	// checkouts of the repositories the CLI runs in (a git worktree is
	// trusted through its main checkout). Ignored with NoClaudeJSON.
	Trusted []string
	// NoClaudeJSON leaves ~/.claude.json to the caller (Legion's agent
	// package writes it in the tests of that code).
	NoClaudeJSON bool
}

// Env is a fake API and a HOME for running the real CLI.
type Env struct {
	Binary string                // the claude binary (Binary)
	API    *anthropictest.Server // the fake API; closed when the test ends
	Home   string                // the CLI's HOME
}

// New finds the CLI (skipping the test without it, see Binary), starts a
// fake API that accepts only Token, and prepares a HOME.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	e := &Env{Binary: Binary(t), API: anthropictest.NewServer(t), Home: opts.Home}
	e.API.Key = Token
	if e.Home == "" {
		e.Home = filepath.Join(t.TempDir(), "home")
		if err := os.Mkdir(e.Home, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if !opts.NoClaudeJSON {
		if err := WriteClaudeJSON(filepath.Join(e.Home, ".claude.json"), opts.Trusted...); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// Environ is the environment to run the CLI with: the test process's
// environment without what would make the CLI use anything but the fake
// API or behave otherwise than under Legion (ANTHROPIC_*, CLAUDE*, CI,
// TMUX, NO_COLOR), with HOME, ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN,
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 and TERM=xterm-256color,
// then extra ("KEY=value"; later wins). Useful extras:
// CLAUDE_CODE_MAX_RETRIES=0 (an API error ends the turn at once instead of
// after ten retries over about three minutes), and IS_SANDBOX=1 for
// bypassPermissions mode as root (without it the CLI exits 1).
func (e *Env) Environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "CLAUDE") ||
			k == "CI" || k == "HOME" || k == "TERM" || k == "TMUX" || k == "NO_COLOR" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"HOME="+e.Home,
		"ANTHROPIC_BASE_URL="+e.API.URL,
		"ANTHROPIC_AUTH_TOKEN="+Token,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"TERM=xterm-256color",
	)
	return append(env, extra...)
}

// SessionFile is where the CLI writes session id's file when it runs in
// dir (symlinks resolved, as the CLI records the physical path).
func (e *Env) SessionFile(dir string, id uuid.UUID) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return claudecode.SessionFile(e.Home, dir, id)
}

// WriteClaudeJSON writes path (a ~/.claude.json) with the entries that
// let the CLI start in a new worktree of a trusted repository with no
// dialog: onboarding done, the auto-mode notices seen, and trust for each
// of trusted (absolute paths of main checkouts).
func WriteClaudeJSON(path string, trusted ...string) error {
	projects := map[string]any{}
	for _, dir := range trusted {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("write %s: trusted directory %q is not absolute", path, dir)
		}
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		projects[dir] = map[string]any{"hasTrustDialogAccepted": true}
	}
	data, err := json.MarshalIndent(map[string]any{
		"hasCompletedOnboarding":   true,
		"hasSeenAutoDefaultNotice": true,
		"hasSeenAutoDefaultNudge":  true,
		"projects":                 projects,
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, data, 0o600)
}

// Settings is what WriteSettings puts in a settings file for --settings.
type Settings struct {
	// Allow are permission rules that let tools run with no prompt, e.g.
	// "Bash(legion issue:*)".
	Allow []string
	// Hook, if set, is a shell command run for every hook event with the
	// event's JSON on stdin (as Legion's `legion hook`), with a timeout of
	// a day, so that a PermissionRequest can be held.
	Hook string
}

// HookEvents are the hook events WriteSettings hooks.
var HookEvents = []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest",
	"Notification", "Stop", "StopFailure", "SubagentStart", "SubagentStop", "SessionEnd"}

// hookTimeout is the hook timeout in seconds (the CLI kills a hook that
// runs longer).
const hookTimeout = 86400

// WriteSettings writes s to path as Claude Code settings JSON.
func WriteSettings(path string, s Settings) error {
	settings := map[string]any{}
	if len(s.Allow) > 0 {
		settings["permissions"] = map[string]any{"allow": s.Allow}
	}
	if s.Hook != "" {
		hooks := map[string]any{}
		for _, ev := range HookEvents {
			hooks[ev] = []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": s.Hook, "timeout": hookTimeout}}}}
		}
		settings["hooks"] = hooks
	}
	data, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, data, 0o600)
}
