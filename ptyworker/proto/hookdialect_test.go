package proto

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

// TestHookDialectFailure: an event in Failures whose When matches becomes
// a StopFailure with the error kind its text names, the text as
// error_message and the reset time the text says (the end of the minute
// shown; a time of day is the next one); one whose When does not match
// passes unchanged.
func TestHookDialectFailure(t *testing.T) {
	d := HookDialect{Failures: map[string]Failure{"ModelDone": {
		When:         map[string]string{"status": "failed"},
		Message:      "error",
		Errors:       []ErrorText{{Contains: "usage limit", Error: "rate_limit"}, {Contains: "Quota", Error: "billing_error"}},
		ResetAfter:   "try again at ",
		ResetLayouts: []string{"Jan 2, 2006 3:04 PM", "3:04 PM"},
	}}}
	loc := time.FixedZone("X", 3600)
	now := time.Date(2026, 11, 29, 13, 30, 10, 0, loc)
	for _, c := range []struct {
		name, in string
		want     map[string]any
	}{
		{"today", `{"hook_event_name":"ModelDone","status":"failed","error":"You hit your usage limit. Upgrade or try again at 2:12 PM.","turn_id":"t"}`,
			map[string]any{"hook_event_name": "StopFailure", "status": "failed", "turn_id": "t", "error": "rate_limit",
				"error_message": "You hit your usage limit. Upgrade or try again at 2:12 PM.", "reset_at": "2026-11-29T14:13:00+01:00"}},
		{"tomorrow", `{"hook_event_name":"ModelDone","status":"failed","error":"usage limit; try again at 9:05 AM."}`,
			map[string]any{"hook_event_name": "StopFailure", "status": "failed", "error": "rate_limit",
				"error_message": "usage limit; try again at 9:05 AM.", "reset_at": "2026-11-30T09:06:00+01:00"}},
		{"this minute", `{"hook_event_name":"ModelDone","status":"failed","error":"usage limit; try again at 1:30 PM."}`,
			map[string]any{"hook_event_name": "StopFailure", "status": "failed", "error": "rate_limit",
				"error_message": "usage limit; try again at 1:30 PM.", "reset_at": "2026-11-29T13:31:00+01:00"}},
		{"date", `{"hook_event_name":"ModelDone","status":"failed","error":"usage limit, or try again at Dec 1st, 2026 2:43 PM."}`,
			map[string]any{"hook_event_name": "StopFailure", "status": "failed", "error": "rate_limit",
				"error_message": "usage limit, or try again at Dec 1st, 2026 2:43 PM.", "reset_at": "2026-12-01T14:44:00+01:00"}},
		{"no reset", `{"hook_event_name":"ModelDone","status":"failed","error":"Quota exceeded."}`,
			map[string]any{"hook_event_name": "StopFailure", "status": "failed", "error": "billing_error", "error_message": "Quota exceeded."}},
		{"unknown kind, bad time", `{"hook_event_name":"ModelDone","status":"failed","error":"boom; try again at teatime."}`,
			map[string]any{"hook_event_name": "StopFailure", "status": "failed", "error": "unknown", "error_message": "boom; try again at teatime."}},
		{"completed", `{"hook_event_name":"ModelDone","status":"completed","error":null}`,
			map[string]any{"hook_event_name": "ModelDone", "status": "completed", "error": nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got map[string]any
			out := d.TranslateAt([]byte(c.in), now)
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("TranslateAt(%s) = %s: %v", c.in, out, err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("TranslateAt(%s) (-want +got):\n%s", c.in, diff)
			}
		})
	}
}

// FuzzHookDialectTranslate: Translate of any input returns JSON when
// given JSON, and never panics.
func FuzzHookDialectTranslate(f *testing.F) {
	d := HookDialect{
		Events: map[string]string{"TurnEnd": "Stop"},
		Failures: map[string]Failure{"ModelDone": {
			When: map[string]string{"status": "failed"}, Message: "error",
			Errors:     []ErrorText{{Contains: "limit", Error: "rate_limit"}},
			ResetAfter: "at ", ResetLayouts: []string{"Jan 2, 2006 3:04 PM", "3:04 PM"},
		}},
	}
	f.Add(`{"hook_event_name":"ModelDone","status":"failed","error":"limit; at 2:12 PM."}`)
	f.Add(`{"hook_event_name":"ModelDone","status":"failed","error":"limit at Dec 31st, 2026 11:59 PM"}`)
	f.Add(`{"hook_event_name":"ModelDone","status":"failed","error":7}`)
	f.Add(`{"hook_event_name":"TurnEnd"}`)
	f.Fuzz(func(t *testing.T, in string) {
		out := d.TranslateAt([]byte(in), time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
		if json.Valid([]byte(in)) && !json.Valid(out) {
			t.Errorf("TranslateAt(%q) = %q: not JSON", in, out)
		}
	})
}
