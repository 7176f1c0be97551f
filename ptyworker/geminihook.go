package ptyworker

// The Gemini CLI's hook payloads, read as Claude Code's (agent kind
// gemini, which its worker runs as kind claude): `legion hook` translates
// them before it forwards them (agent/gemini/FACTS.md G9, G10).

import (
	"bytes"
	"encoding/json"
)

// geminiEvents are Gemini's hook events that Claude Code names otherwise.
// SessionStart and SessionEnd have the same names and fields.
var geminiEvents = map[string]string{
	"BeforeAgent": HookUserPromptSubmit, // a turn begins
	"AfterAgent":  HookStop,             // the turn ended
	"BeforeTool":  HookPreToolUse,
	"AfterTool":   HookPostToolUse,
}

// geminiTools are Gemini's tools that have a Claude Code twin, by the
// twin's name, so that the state and an escalation read the same.
var geminiTools = map[string]string{
	"run_shell_command": "Bash",
	"write_file":        "Write",
	"replace":           "Edit",
	"read_file":         "Read",
	"web_fetch":         "WebFetch",
}

// geminiPermission is the notification_type of Gemini's Notification when
// a tool's approval dialog opens (G10).
const geminiPermission = "ToolPermission"

// fromGemini returns payload as Claude Code would have sent it when it is
// one of the Gemini CLI's own events, else payload itself:
// BeforeAgent, AfterAgent (prompt_response as last_assistant_message),
// BeforeTool, AfterTool and Notification ToolPermission (as
// permission_prompt) get Claude Code's names, and the tools their twins'.
func fromGemini(payload []byte) []byte {
	var p map[string]json.RawMessage
	if json.Unmarshal(payload, &p) != nil {
		return payload
	}
	var name, ntype string
	if json.Unmarshal(p["hook_event_name"], &name) != nil {
		return payload
	}
	claude, ok := geminiEvents[name]
	switch {
	case ok:
	case name == HookNotification && json.Unmarshal(p["notification_type"], &ntype) == nil && ntype == geminiPermission:
		claude = HookNotification
		p["notification_type"] = json.RawMessage(`"permission_prompt"`)
	default:
		return payload
	}
	p["hook_event_name"], _ = json.Marshal(claude)
	if claude == HookStop {
		if r, ok := p["prompt_response"]; ok {
			p["last_assistant_message"] = r
			delete(p, "prompt_response")
		}
	}
	var tool string
	if json.Unmarshal(p["tool_name"], &tool) == nil {
		if twin, ok := geminiTools[tool]; ok {
			p["tool_name"], _ = json.Marshal(twin)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(p) != nil {
		return payload
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}
