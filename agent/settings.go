package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/shellquote"
)

// HookEvents are the Claude Code hook events a session's settings file
// sends to its worker through `legion hook`: all of those that tell the
// agent's state.
var HookEvents = []string{
	"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest",
	"Notification", "Stop", "StopFailure", "SubagentStart", "SubagentStop", "SessionEnd",
}

// PermissionHookTimeout is the timeout of the PermissionRequest hook: the
// worker holds that hook's call until a person allows or denies the tool,
// which may take a night. The other hooks keep Claude Code's default; the
// worker answers them at once.
const PermissionHookTimeout = 24 * time.Hour

// settingsFile is the part of Claude Code's settings schema Legion writes.
type settingsFile struct {
	Hooks       map[string][]hookMatcher `json:"hooks"`
	Permissions *settingsPermissions     `json:"permissions,omitempty"`
	// SkipDangerousModePermissionPrompt pre-answers the warning of bypass
	// mode, whose default is "No, exit".
	SkipDangerousModePermissionPrompt bool `json:"skipDangerousModePermissionPrompt,omitempty"`
}

// hookMatcher has no matcher: every tool, source or notification type.
type hookMatcher struct {
	Hooks []hookCommand `json:"hooks"`
}

type hookCommand struct {
	Type    string `json:"type"` // "command"
	Command string `json:"command"`
	Timeout int    `json:"timeout,omitempty"` // seconds
}

type settingsPermissions struct {
	Allow []string `json:"allow"`
}

// SettingsFor is the settings file of a session whose agent runs in the
// worktree cwd under policy: hooks for every one of HookEvents running
// `<legion> hook` (legion shell-quoted), and the allow rules of the
// policy ([AllowRules]); bypass also pre-answers bypass mode's warning.
func SettingsFor(policy config.PermissionPolicy, legion, cwd string, allow []string) ([]byte, error) {
	rules, err := AllowRules(policy, legion, cwd, allow)
	if err != nil {
		return nil, err
	}
	f := settingsFile{Hooks: map[string][]hookMatcher{}}
	command := shellquote.Quote(legion) + " hook"
	for _, ev := range HookEvents {
		h := hookCommand{Type: "command", Command: command}
		if ev == "PermissionRequest" {
			h.Timeout = int(PermissionHookTimeout / time.Second)
		}
		f.Hooks[ev] = []hookMatcher{{Hooks: []hookCommand{h}}}
	}
	if len(rules) > 0 {
		f.Permissions = &settingsPermissions{Allow: rules}
	}
	f.SkipDangerousModePermissionPrompt = policy == config.PermissionsBypass
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("encode settings: %w", err)
	}
	return b.Bytes(), nil
}

// OwnCommands are the groups of Legion's own commands (api.OwnIssue,
// api.OwnState, api.OwnWorktreeFinish) whose permission requests the
// worker of an agent under policy allows at once, for the session's own
// team and issue, in whatever form the model writes them (a variable
// such as $LEGION_ISSUE defeats a CLI's own rules, which read text):
// under allowlist all three, as [AllowRules]; under ask Legion's reports
// (legion issue); under bypass none, since nothing asks.
func OwnCommands(policy config.PermissionPolicy) []string {
	switch policy {
	case config.PermissionsAllowlist, "":
		return []string{api.OwnIssue, api.OwnState, api.OwnWorktreeFinish}
	case config.PermissionsAsk:
		return []string{api.OwnIssue}
	}
	return nil
}

// AllowRules are the permission rules, in Claude Code's syntax, that let
// an agent of policy in the worktree cwd act without asking:
//
//   - allowlist: Legion's own commands of the worker skill (legion issue,
//     legion state, legion worktree finish), by name and by legion's path;
//     git, any subcommand (a rule matches the command, not the directory it
//     acts on); Read, Edit and Write below cwd (as "//" + the absolute path,
//     the physical one too when cwd has symlinks); then allow, the team's
//     agent.allow;
//   - ask: legion issue only, so the agent can report; every other tool
//     waits for a person;
//   - bypass: none (nothing is asked).
func AllowRules(policy config.PermissionPolicy, legion, cwd string, allow []string) ([]string, error) {
	legionCmds := func(subs ...string) []string {
		var r []string
		for _, sub := range subs {
			r = append(r, "Bash(legion "+sub+":*)")
			if legion != "" && legion != "legion" {
				r = append(r, "Bash("+legion+" "+sub+":*)")
			}
		}
		return r
	}
	switch policy {
	case config.PermissionsBypass:
		return nil, nil
	case config.PermissionsAsk:
		return legionCmds("issue"), nil
	case config.PermissionsAllowlist, "":
	default:
		return nil, fmt.Errorf("unknown permission policy %q", policy)
	}
	rules := legionCmds("issue", "state", "worktree finish")
	rules = append(rules, "Bash(git:*)")
	dirs := []string{filepath.Clean(cwd)}
	if p := physical(cwd); p != dirs[0] {
		dirs = append(dirs, p)
	}
	for _, tool := range []string{"Read", "Edit", "Write"} {
		for _, d := range dirs {
			rules = append(rules, tool+"(/"+d+"/**)")
		}
	}
	for _, r := range allow {
		if !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	return rules, nil
}
