package gemini

import "github.com/legion-dev/legion/ptyworker/proto"

// HookDialect is the Gemini CLI's hooks as Claude Code's (G9, G10): its
// events BeforeAgent (a turn begins), AfterAgent (the turn ended, its
// prompt_response the last message), BeforeTool, AfterTool and a
// Notification ToolPermission (its approval dialog opened) get Claude
// Code's names, and its tools with a Claude Code twin the twin's.
// SessionStart and SessionEnd have the same names and fields.
var HookDialect = proto.HookDialect{
	Events: map[string]string{
		"BeforeAgent": "UserPromptSubmit",
		"AfterAgent":  "Stop",
		"BeforeTool":  "PreToolUse",
		"AfterTool":   "PostToolUse",
	},
	Notifications: map[string]string{"ToolPermission": "permission_prompt"},
	Fields:        map[string]map[string]string{"Stop": {"prompt_response": "last_assistant_message"}},
	Tools: map[string]string{
		"run_shell_command": "Bash",
		"write_file":        "Write",
		"replace":           "Edit",
		"read_file":         "Read",
		"web_fetch":         "WebFetch",
	},
}

// HookDialect is [HookDialect]: `legion hook` translates the payloads of
// an agent whose environment names it (proto.EnvHookDialect, which
// Prepare sets).
func (*Kind) HookDialect() proto.HookDialect { return HookDialect }

// DialogMarker is on the screen while the Gemini CLI's approval dialog is
// open ("3. No, suggest changes (esc)", G10), which no hook answers: its
// "1. Allow once" allows and Esc declines, as in Claude Code's, so the
// worker answers it (for Legion's own commands at once, for a person's
// approval when it comes).
const DialogMarker = "suggest changes (esc)"
