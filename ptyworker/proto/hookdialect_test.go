package proto

import (
	"encoding/json"
	"testing"
)

// TestHookDialect: a dialect renames its own events, notification types,
// fields (by Claude Code's event name) and tools; what it does not list,
// and what is not a JSON object with an event name, passes unchanged.
func TestHookDialect(t *testing.T) {
	d := HookDialect{
		Events:        map[string]string{"TurnEnd": "Stop", "ToolBefore": "PreToolUse"},
		Notifications: map[string]string{"Approve": "permission_prompt"},
		Fields:        map[string]map[string]string{"Stop": {"answer": "last_assistant_message"}},
		Tools:         map[string]string{"shell": "Bash"},
	}
	for _, c := range []struct{ in, want string }{
		{`{"hook_event_name":"TurnEnd","answer":"a <b>"}`, `{"hook_event_name":"Stop","last_assistant_message":"a <b>"}`},
		{`{"hook_event_name":"ToolBefore","tool_name":"shell","answer":"x"}`, `{"answer":"x","hook_event_name":"PreToolUse","tool_name":"Bash"}`},
		{`{"hook_event_name":"Notification","notification_type":"Approve"}`, `{"hook_event_name":"Notification","notification_type":"permission_prompt"}`},
	} {
		got := d.Translate([]byte(c.in))
		var g, w any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(c.want), &w) != nil || string(mustJSON(g)) != string(mustJSON(w)) {
			t.Errorf("Translate(%s) = %s; want %s", c.in, got, c.want)
		}
	}
	for _, in := range []string{`{"hook_event_name":"Stop","answer":"x"}`, `{"hook_event_name":"Notification","notification_type":"idle_prompt"}`, `[1]`, `{"hook_event_name":7}`, `not json`} {
		if got := string(d.Translate([]byte(in))); got != in {
			t.Errorf("Translate(%s) = %s; want it unchanged", in, got)
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
