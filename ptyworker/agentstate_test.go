package ptyworker

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// realHooks reads testdata/claude-hooks.jsonl: every hook payload of a
// real Claude Code 2.1.330 session (allowed Bash, a Bash permission
// prompt approved in the TUI, an AskUserQuestion answered, a background
// subagent, 60 s idle, /exit), one {"time","event","stdin"} per line.
func realHooks(t testing.TB) []json.RawMessage {
	t.Helper()
	f, err := os.Open("testdata/claude-hooks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Stdin json.RawMessage `json:"stdin"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("testdata/claude-hooks.jsonl line %d: %v", len(out)+1, err)
		}
		out = append(out, l.Stdin)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// agentView is what the table checks of an agent's state.
type agentView struct {
	State     api.AgentState
	Tool      string
	Command   string
	Questions []api.Question
	LastMsg   string
	Tasks     int
	Error     string
}

func viewOf(a *api.Agent) agentView {
	if a == nil {
		return agentView{}
	}
	return agentView{a.State, a.Tool, a.Command, a.Questions, a.LastMessage, a.BackgroundTasks, a.Error}
}

// TestAgentStateRealSession replays a real session's hook payloads and
// checks the state after each one.
func TestAgentStateRealSession(t *testing.T) {
	hooks := realHooks(t)
	proceed := []api.Question{{Question: "Proceed?", Header: "Go", Options: []string{"Yes", "No"}}}
	touch := "touch /home/dev/probe/not-allowed-file"
	want := []struct {
		event   string
		view    agentView
		changed bool
	}{
		{"SessionStart", agentView{State: api.AgentStarting}, true},
		{"UserPromptSubmit", agentView{State: api.AgentWorking}, true},
		{"PreToolUse Bash", agentView{State: api.AgentWorking, Tool: "Bash"}, true},
		{"PostToolUse Bash", agentView{State: api.AgentWorking, Tool: "Bash"}, false},
		{"Stop", agentView{State: api.AgentIdle, LastMsg: "Labelled."}, true},
		{"UserPromptSubmit", agentView{State: api.AgentWorking}, true},
		{"PreToolUse Bash", agentView{State: api.AgentWorking, Tool: "Bash"}, true},
		{"PermissionRequest Bash", agentView{State: api.AgentWaitingPermission, Tool: "Bash", Command: touch}, true},
		{"Notification permission_prompt", agentView{State: api.AgentWaitingPermission, Tool: "Bash", Command: touch}, false},
		{"PostToolUse Bash", agentView{State: api.AgentWorking, Tool: "Bash"}, true},
		{"Stop", agentView{State: api.AgentIdle, LastMsg: "Touched."}, true},
		{"UserPromptSubmit", agentView{State: api.AgentWorking}, true},
		{"PreToolUse AskUserQuestion", agentView{State: api.AgentWorking, Tool: "AskUserQuestion"}, true},
		{"PermissionRequest AskUserQuestion", agentView{State: api.AgentWaitingAnswer, Questions: proceed}, true},
		{"Notification permission_prompt", agentView{State: api.AgentWaitingAnswer, Questions: proceed}, false},
		{"PostToolUse AskUserQuestion", agentView{State: api.AgentWorking, Tool: "AskUserQuestion"}, true},
		{"Stop", agentView{State: api.AgentIdle, LastMsg: "Thanks."}, true},
		{"UserPromptSubmit", agentView{State: api.AgentWorking}, true},
		{"PreToolUse Agent", agentView{State: api.AgentWorking, Tool: "Agent"}, true},
		{"SubagentStart", agentView{State: api.AgentWorking}, true},
		{"PostToolUse Agent", agentView{State: api.AgentWorking, Tool: "Agent"}, true},
		{"Stop, a subagent still running", agentView{State: api.AgentIdle, LastMsg: "Waiting for the subagent.", Tasks: 1}, true},
		{"the subagent's PreToolUse Bash", agentView{State: api.AgentIdle, LastMsg: "Waiting for the subagent.", Tasks: 1}, false},
		{"the subagent's PostToolUse Bash", agentView{State: api.AgentIdle, LastMsg: "Waiting for the subagent.", Tasks: 1}, false},
		{"SubagentStop", agentView{State: api.AgentIdle, LastMsg: "Waiting for the subagent."}, true},
		{"UserPromptSubmit (the subagent's report)", agentView{State: api.AgentWorking}, true},
		{"Stop", agentView{State: api.AgentIdle, LastMsg: "Subagent done."}, true},
		{"Notification idle_prompt", agentView{State: api.AgentIdle, LastMsg: "Subagent done."}, false},
		{"SessionEnd", agentView{State: api.AgentEnded}, true},
	}
	if len(hooks) != len(want) {
		t.Fatalf("testdata has %d payloads; the table %d", len(hooks), len(want))
	}
	var m agentMachine
	t0 := time.Date(2026, 11, 24, 7, 41, 41, 0, time.UTC)
	var since time.Time
	for i, raw := range hooks {
		now := t0.Add(time.Duration(i) * time.Second)
		ev, err := parseHook(raw, now)
		if err != nil {
			t.Fatalf("payload %d (%s): parseHook: %v", i, want[i].event, err)
		}
		prev := m.state()
		changed := m.apply(ev, now)
		got := m.state()
		if diff := cmp.Diff(want[i].view, viewOf(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("after payload %d (%s): state mismatch (-want +got):\n%s", i, want[i].event, diff)
		}
		if changed != want[i].changed {
			t.Errorf("after payload %d (%s): changed = %v; want %v", i, want[i].event, changed, want[i].changed)
		}
		if !got.LastEvent.Equal(now) || got.Event != ev.Name {
			t.Errorf("after payload %d: LastEvent, Event = %v, %q; want %v, %q", i, got.LastEvent, got.Event, now, ev.Name)
		}
		if prev == nil || prev.State != got.State {
			since = now
		}
		if !got.Since.Equal(since) {
			t.Errorf("after payload %d (%s): Since = %v; want %v (when it entered %s)", i, want[i].event, got.Since, since, got.State)
		}
	}
}

// TestAgentStateEvents covers what the real session did not: API
// failures, a permission prompt seen only as a notification, payload
// shapes.
func TestAgentStateEvents(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	reset := now.Add(90 * time.Second)
	fixedReset := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	msReset := fixedReset.Add(118 * time.Millisecond)
	tests := []struct {
		name   string
		events []string
		want   agentView
		reset  *time.Time
	}{
		{"StopFailure of Claude Code 2.1.330 after a 429", []string{
			`{"session_id":"8500aa60-77f7-478e-aefa-c472a47051fa","cwd":"/w","prompt_id":"p1","effort":{"level":"medium"},"hook_event_name":"StopFailure","error":"rate_limit","last_assistant_message":"API Error: Request rejected (429) · Usage limit reached."}`,
		}, agentView{State: api.AgentAPIError, Error: "rate_limit: API Error: Request rejected (429) · Usage limit reached."}, nil},
		{"StopFailure of Claude Code 2.1.330 after a 401", []string{
			`{"hook_event_name":"StopFailure","error":"authentication_failed","last_assistant_message":"Not logged in · Please run /login"}`,
		}, agentView{State: api.AgentAPIError, Error: "authentication_failed: Not logged in · Please run /login"}, nil},
		{"StopFailure with an error object and retry_after", []string{
			`{"hook_event_name":"UserPromptSubmit"}`,
			`{"hook_event_name":"StopFailure","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit"},"retry_after":90}`,
		}, agentView{State: api.AgentAPIError, Error: "rate_limit_error: This request would exceed the rate limit"}, &reset},
		{"StopFailure with text and reset_at", []string{
			`{"hook_event_name":"StopFailure","error":"authentication_failed","reset_at":"2026-11-24T13:00:00Z"}`,
		}, agentView{State: api.AgentAPIError, Error: "authentication_failed"}, &fixedReset},
		{"StopFailure of Codex 0.169.0 at a ChatGPT plan's usage limit, as codex.HookDialect translates its PostModelRequest", []string{
			`{"session_id":"s","turn_id":"t","cwd":"/w","model":"fake-model","hook_event_name":"StopFailure","status":"failed","token_usage":null,"error":"rate_limit","error_message":"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 1:00 PM.","reset_at":"2026-11-24T13:00:00Z"}`,
		}, agentView{State: api.AgentAPIError, Error: "rate_limit: You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 1:00 PM."}, &fixedReset},
		{"StopFailure of opencode 1.18.33's plugin at a retried 429", []string{
			`{"session_id":"ses_x","cwd":"/w","hook_event_name":"StopFailure","error":"rate_limit","error_message":"Rate limit reached for m. Please try again in 40s.","attempt":1,"reset_at":"2026-11-24T13:00:00.118Z"}`,
		}, agentView{State: api.AgentAPIError, Error: "rate_limit: Rate limit reached for m. Please try again in 40s."}, &msReset},
		{"StopFailure with nothing said", []string{`{"hook_event_name":"StopFailure"}`},
			agentView{State: api.AgentAPIError, Error: "the turn failed at the API (no detail given)"}, nil},
		{"a new turn clears the API error", []string{
			`{"hook_event_name":"StopFailure","error":"overloaded"}`, `{"hook_event_name":"UserPromptSubmit"}`,
		}, agentView{State: api.AgentWorking}, nil},
		{"permission prompt seen only as a notification", []string{
			`{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"/w/a.go","content":"package a"}}`,
			`{"hook_event_name":"Notification","notification_type":"permission_prompt","message":"Claude needs your permission"}`,
		}, agentView{State: api.AgentWaitingPermission, Tool: "Write", Command: "/w/a.go"}, nil},
		{"background_tasks as a count", []string{`{"hook_event_name":"Stop","background_tasks":2}`},
			agentView{State: api.AgentIdle, Tasks: 2}, nil},
		{"SubagentStop never goes below zero", []string{`{"hook_event_name":"Stop","background_tasks":[]}`, `{"hook_event_name":"SubagentStop","agent_id":"a1"}`},
			agentView{State: api.AgentIdle}, nil},
		{"unknown events and fields are ignored", []string{
			`{"hook_event_name":"UserPromptSubmit","novel":{"x":[1,2]}}`, `{"hook_event_name":"PreCompact","trigger":"auto"}`,
		}, agentView{State: api.AgentWorking}, nil},
		{"an unknown event first says nothing", []string{`{"hook_event_name":"PreCompact"}`}, agentView{}, nil},
		{"questions with string options, several", []string{
			`{"hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion","tool_input":{"questions":[{"question":"A?","options":["x","y"],"multiSelect":true},{"question":"B?","options":[{"label":"z"}]}]}}`,
		}, agentView{State: api.AgentWaitingAnswer, Questions: []api.Question{
			{Question: "A?", Options: []string{"x", "y"}, MultiSelect: true}, {Question: "B?", Options: []string{"z"}},
		}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m agentMachine
			for i, e := range tt.events {
				ev, err := parseHook([]byte(e), now)
				if err != nil {
					t.Fatalf("event %d: parseHook(%s): %v", i, e, err)
				}
				m.apply(ev, now)
			}
			got := m.state()
			if diff := cmp.Diff(tt.want, viewOf(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("state mismatch (-want +got):\n%s", diff)
			}
			var gotReset *time.Time
			if got != nil {
				gotReset = got.ResetAt
			}
			if (gotReset == nil) != (tt.reset == nil) || (gotReset != nil && !gotReset.Equal(*tt.reset)) {
				t.Errorf("ResetAt = %v; want %v", gotReset, tt.reset)
			}
		})
	}
}

// TestParseHookRefusesMalformed: a malformed payload is an error naming
// what is wrong, and changes nothing (the worker applies only what
// parsed).
func TestParseHookRefusesMalformed(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"not JSON", `hello`, "want a JSON object"},
		{"an array", `[1]`, "want a JSON object"},
		{"no event name", `{"tool_name":"Bash"}`, "hook_event_name: missing"},
		{"event name not a string", `{"hook_event_name":7}`, "field hook_event_name: want a string"},
		{"control characters in the name", `{"hook_event_name":"Stop\n"}`, "is not an event name"},
		{"tool_input not an object", `{"hook_event_name":"PreToolUse","tool_input":"rm"}`, "field tool_input: want an object"},
		{"background_tasks of the wrong type", `{"hook_event_name":"Stop","background_tasks":"two"}`, "field background_tasks"},
		{"bad reset time", `{"hook_event_name":"StopFailure","reset_at":"soon"}`, "field reset_at"},
		{"trailing data", `{"hook_event_name":"Stop"} {}`, "trailing data"},
		{"truncated", `{"hook_event_name":"Stop"`, "bad hook payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseHook([]byte(tt.in), time.Now())
			if !errors.Is(err, errHookPayload) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseHook(%s) = %v; want a bad hook payload error holding %q", tt.in, err, tt.want)
			}
		})
	}
}

// TestHookPayloadBounds: what a payload leaves in the state stays small
// enough for a control frame, however big the payload.
func TestHookPayloadBounds(t *testing.T) {
	big := strings.Repeat("é", 300<<10)
	in, err := json.Marshal(map[string]any{
		"hook_event_name": "PermissionRequest", "tool_name": "Write",
		"tool_input":    map[string]any{"file_path": "/w/" + big, "content": big},
		"tool_response": big,
	})
	if err != nil {
		t.Fatal(err)
	}
	small := ShrinkHookPayload(in)
	if len(small) > maxHookParams {
		t.Fatalf("ShrinkHookPayload left %d bytes; want at most %d", len(small), maxHookParams)
	}
	if f, err := proto.EncodeControl(&proto.Message{ID: 1, Method: proto.MethodHook, Params: small}); err != nil || len(f) > proto.MaxControlFrame+proto.HeaderLen {
		t.Fatalf("the hook call of the shrunk payload: %d bytes, %v; want a control frame", len(f), err)
	}
	angles := ShrinkHookPayload([]byte(`{"hook_event_name":"PostToolUse","tool_input":{"content":"` + strings.Repeat("<&>", 20<<10) + `"}}`))
	if f, err := proto.EncodeControl(&proto.Message{ID: 1, Method: proto.MethodHook, Params: angles}); err != nil {
		t.Fatalf("the hook call of a payload of <, & and > (escaped to 6 bytes each): %d bytes, %v; want a control frame", len(f), err)
	}
	ev, err := parseHook(small, time.Now())
	if err != nil {
		t.Fatalf("parseHook(shrunk payload): %v", err)
	}
	var m agentMachine
	m.apply(ev, time.Now())
	a := m.state()
	if a.State != api.AgentWaitingPermission || len(a.Command) > maxCommand || len(a.ToolInput) > maxToolInput || !strings.HasPrefix(a.Command, "/w/") {
		t.Errorf("state = %s, command of %d bytes (%.20q), tool input of %d; want waiting_permission within the limits", a.State, len(a.Command), a.Command, len(a.ToolInput))
	}
	f, err := eventFrame(proto.EventState, &proto.StateEventData{Agent: a})
	if err != nil || len(f) > proto.MaxControlFrame {
		t.Errorf("state event of %d bytes, %v; want it to fit a control frame", len(f), err)
	}
}

// FuzzParseHook: any payload either parses or is refused with
// errHookPayload; what parses applies without panics and keeps the state
// within its bounds.
func FuzzParseHook(f *testing.F) {
	for _, raw := range realHooks(f) {
		f.Add([]byte(raw))
	}
	f.Add([]byte(`{"hook_event_name":"StopFailure","error":{"type":"x","status":429},"retry_after":"12"}`))
	f.Add([]byte(`{"hook_event_name":"Stop","background_tasks":3}`))
	f.Add([]byte(`{"hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion","tool_input":{"questions":[{"options":[1,{"label":2}]}]}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		ev, err := parseHook(in, time.Now())
		if err != nil {
			if !errors.Is(err, errHookPayload) {
				t.Fatalf("parseHook error %v does not wrap errHookPayload", err)
			}
			return
		}
		var m agentMachine
		m.apply(ev, time.Now())
		m.apply(ev, time.Now())
		if a := m.state(); a != nil {
			if len(a.Command) > maxCommand || len(a.ToolInput) > maxToolInput || len(a.LastMessage) > maxLastMessage || len(a.Error) > maxErrorText || len(a.Questions) > maxQuestions {
				t.Fatalf("state over its bounds: %+v", a)
			}
			if _, err := eventFrame(proto.EventState, &proto.StateEventData{Agent: a}); err != nil {
				t.Fatalf("state event: %v", err)
			}
		}
		if out := ShrinkHookPayload(in); fitsHookParams(in) && string(out) != string(in) {
			t.Fatalf("ShrinkHookPayload changed a payload that fits")
		}
	})
}
