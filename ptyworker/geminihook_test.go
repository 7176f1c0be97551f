package ptyworker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/legion-dev/legion/agent/gemini"
)

// TestFromGemini: the Gemini CLI's events, as 0.61.0 sends them (gemini
// FACTS G9, G10), read as Claude Code's; others pass unchanged.
func TestFromGemini(t *testing.T) {
	for _, c := range []struct {
		in, event, ntype, tool, last string
	}{
		{in: `{"session_id":"s","hook_event_name":"BeforeAgent","prompt":"go"}`, event: HookUserPromptSubmit},
		{in: `{"hook_event_name":"AfterAgent","prompt":"go","prompt_response":"Done <ok>.","stop_hook_active":false}`, event: HookStop, last: "Done <ok>."},
		{in: `{"hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"ls"}}`, event: HookPreToolUse, tool: "Bash"},
		{in: `{"hook_event_name":"AfterTool","tool_name":"glob","tool_input":{}}`, event: HookPostToolUse, tool: "glob"},
		{in: `{"hook_event_name":"Notification","notification_type":"ToolPermission","message":"Tool Confirm Shell Command requires execution","details":{"type":"exec"}}`, event: HookNotification, ntype: "permission_prompt"},
		{in: `{"hook_event_name":"Notification","notification_type":"idle_prompt"}`, event: HookNotification, ntype: "idle_prompt"},
		{in: `{"hook_event_name":"SessionEnd","reason":"exit"}`, event: HookSessionEnd},
		{in: `{"hook_event_name":"Stop","last_assistant_message":"x"}`, event: HookStop, last: "x"},
	} {
		ev, err := parseHook(gemini.HookDialect.Translate([]byte(c.in)), time.Now())
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if ev.Name != c.event || ev.NotificationType != c.ntype || ev.ToolName != c.tool || ev.LastMessage != c.last {
			t.Errorf("%s read as %+v; want event %s, notification %q, tool %q, last message %q", c.in, ev, c.event, c.ntype, c.tool, c.last)
		}
	}
	for _, in := range []string{`[1]`, `{"hook_event_name":7}`, `{"hook_event_name":"Stop"}`, `not json`} {
		if got := string(gemini.HookDialect.Translate([]byte(in))); got != in {
			t.Errorf("gemini.HookDialect.Translate(%s) = %s; want it unchanged", in, got)
		}
	}
}

// FuzzFromGemini: any payload comes out unchanged or as a JSON object
// with a hook_event_name, and never panics.
func FuzzFromGemini(f *testing.F) {
	f.Add([]byte(`{"hook_event_name":"AfterAgent","prompt_response":"x","tool_name":"replace"}`))
	f.Add([]byte(`{"hook_event_name":"Notification","notification_type":"ToolPermission"}`))
	f.Add([]byte(`{"hook_event_name":"BeforeTool","tool_name":5}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := gemini.HookDialect.Translate(in)
		if string(out) == string(in) {
			return
		}
		var p map[string]json.RawMessage
		if err := json.Unmarshal(out, &p); err != nil || p["hook_event_name"] == nil {
			t.Fatalf("gemini.HookDialect.Translate(%q) = %q: not an event", in, out)
		}
	})
}
