package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/legion-dev/legion/agent"
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
// policy ([agent.AllowRules]); bypass also pre-answers bypass mode's warning.
func SettingsFor(policy config.PermissionPolicy, legion, cwd string, allow []string) ([]byte, error) {
	rules, err := agent.AllowRules(policy, legion, cwd, allow)
	if err != nil {
		return nil, err
	}
	f := settingsFile{Hooks: map[string][]hookMatcher{}}
	command := shellquote.Quote(legion) + " hook"
	for _, ev := range HookEvents {
		h := hookCommand{Type: "command", Command: command}
		if ev == "PermissionRequest" {
			h.Timeout = int(agent.PermissionHookTimeout / time.Second)
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
