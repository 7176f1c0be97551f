package ptyworker

// The hook payloads of Claude Code, as `legion hook` forwards them: what
// the agent state machine (agentstate.go) reads of them, and how they are
// kept small enough for a control frame and a state event.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// Hook event names (hook_event_name) the state machine acts on. Others
// are accepted and ignored.
const (
	HookSessionStart       = "SessionStart"
	HookUserPromptSubmit   = "UserPromptSubmit"
	HookPreToolUse         = "PreToolUse"
	HookPostToolUse        = "PostToolUse"
	HookPostToolUseFailure = "PostToolUseFailure"
	HookPermissionRequest  = "PermissionRequest"
	HookNotification       = "Notification"
	HookStop               = "Stop"
	HookStopFailure        = "StopFailure"
	HookSubagentStart      = "SubagentStart"
	HookSubagentStop       = "SubagentStop"
	HookSessionEnd         = "SessionEnd"
)

// toolAskUserQuestion is the tool whose PermissionRequest opens a question
// to the human rather than a permission dialog.
const toolAskUserQuestion = "AskUserQuestion"

// Limits on what a payload leaves in the agent's state: the state goes
// into info results and state events, control frames of at most
// MaxControlFrame bytes.
const (
	maxHookEventName = 64
	maxToolName      = 128
	maxCommand       = 2 << 10 // Agent.Command
	maxToolInput     = 8 << 10 // Agent.ToolInput, once its strings are clipped
	maxToolString    = 1 << 10 // a string inside Agent.ToolInput
	maxLastMessage   = 4 << 10 // Agent.LastMessage
	maxErrorText     = 1 << 10 // Agent.Error
	maxQuestions     = 8
	maxOptions       = 16
	maxQuestionText  = 1 << 10
	maxOptionText    = 256
	// MaxHookPayload is the most `legion hook` reads from its stdin.
	MaxHookPayload = 4 << 20
	// maxHookParams is the most a hook call's params may take: what is
	// left of a control frame after the request's envelope.
	maxHookParams = proto.MaxControlFrame - 1<<10
)

// hookEvent is what the state machine reads of one hook payload.
type hookEvent struct {
	Name      string          // hook_event_name
	AgentID   string          // agent_id: set when a subagent fired it
	ToolName  string          // tool_name
	ToolInput json.RawMessage // tool_input (an object), as sent
	// NotificationType is a Notification's notification_type
	// ("permission_prompt", "idle_prompt", ...).
	NotificationType string
	LastMessage      string     // Stop: last_assistant_message
	BackgroundTasks  int        // Stop: len(background_tasks), or its count
	Error            string     // StopFailure: what failed
	ResetAt          *time.Time // StopFailure: when a rate limit lifts, if said
}

// hookFields are the payload's fields, each decoded only if present and
// checked for its type by parseHook.
type hookFields struct {
	HookEventName        json.RawMessage `json:"hook_event_name"`
	AgentID              json.RawMessage `json:"agent_id"`
	ToolName             json.RawMessage `json:"tool_name"`
	ToolInput            json.RawMessage `json:"tool_input"`
	NotificationType     json.RawMessage `json:"notification_type"`
	LastAssistantMessage json.RawMessage `json:"last_assistant_message"`
	BackgroundTasks      json.RawMessage `json:"background_tasks"`
	Error                json.RawMessage `json:"error"`
	ErrorType            json.RawMessage `json:"error_type"`
	ErrorMessage         json.RawMessage `json:"error_message"`
	Message              json.RawMessage `json:"message"`
	ResetAt              json.RawMessage `json:"reset_at"`
	ResetsAt             json.RawMessage `json:"resets_at"`
	RetryAfter           json.RawMessage `json:"retry_after"`
}

// errHookPayload wraps every error of parseHook.
var errHookPayload = errors.New("bad hook payload")

// parseHook reads a hook payload: one JSON object with a non-empty
// hook_event_name. Unknown fields are ignored; a known field of the wrong
// type is an error naming it. now resolves a relative retry_after.
func parseHook(raw []byte, now time.Time) (*hookEvent, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errHookPayload, fmt.Sprintf(format, args...))
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, bad("want a JSON object (Claude Code's hook input), got %s", describeJSON(raw))
	}
	var f hookFields
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&f); err != nil {
		return nil, bad("%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, bad("trailing data after the JSON object")
	}
	ev := &hookEvent{}
	var err error
	str := func(field string, v json.RawMessage, max int) string {
		if err != nil || isNull(v) {
			return ""
		}
		var s string
		if e := json.Unmarshal(v, &s); e != nil {
			err = bad("field %s: want a string, got %s", field, describeJSON(v))
			return ""
		}
		return clipText(s, max)
	}
	ev.Name = str("hook_event_name", f.HookEventName, maxHookEventName+1)
	ev.AgentID = str("agent_id", f.AgentID, 256)
	ev.ToolName = str("tool_name", f.ToolName, maxToolName)
	ev.NotificationType = str("notification_type", f.NotificationType, 64)
	ev.LastMessage = str("last_assistant_message", f.LastAssistantMessage, maxLastMessage)
	if err != nil {
		return nil, err
	}
	switch {
	case ev.Name == "":
		return nil, bad("field hook_event_name: missing or empty (want e.g. %q)", HookStop)
	case len(ev.Name) > maxHookEventName || proto.HasCtl(ev.Name):
		return nil, bad("field hook_event_name: %q is not an event name", clip(ev.Name, maxHookEventName))
	}
	if !isNull(f.ToolInput) {
		if bytes.TrimSpace(f.ToolInput)[0] != '{' {
			return nil, bad("field tool_input: want an object, got %s", describeJSON(f.ToolInput))
		}
		ev.ToolInput = f.ToolInput
	}
	if ev.BackgroundTasks, err = countField("background_tasks", f.BackgroundTasks); err != nil {
		return nil, bad("%v", err)
	}
	if ev.Name == HookStopFailure {
		ev.Error = stopFailureText(&f)
		if ev.ResetAt, err = resetTime(&f, now); err != nil {
			return nil, bad("%v", err)
		}
	}
	return ev, nil
}

// countField is a count given as an array (its length) or a number.
func countField(field string, v json.RawMessage) (int, error) {
	if isNull(v) {
		return 0, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(v, &list) == nil {
		return len(list), nil
	}
	var n int
	if json.Unmarshal(v, &n) == nil && n >= 0 {
		return n, nil
	}
	return 0, fmt.Errorf("field %s: want an array or a count, got %s", field, describeJSON(v))
}

// stopFailureText is what a StopFailure says failed: its error (a string
// such as Claude Code 2.1.330's "rate_limit", "server_error",
// "authentication_failed", or an object with a type and a message), its
// error_type, error_message or message, and its last assistant message
// (the API's own words), joined with ": ".
func stopFailureText(f *hookFields) string {
	var parts []string
	add := func(v json.RawMessage) {
		if isNull(v) {
			return
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			if s != "" {
				parts = append(parts, s)
			}
			return
		}
		var o struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Status  int    `json:"status"`
		}
		if json.Unmarshal(v, &o) == nil {
			for _, p := range []string{o.Type, o.Message} {
				if p != "" {
					parts = append(parts, p)
				}
			}
			if o.Status != 0 {
				parts = append(parts, "HTTP "+strconv.Itoa(o.Status))
			}
			return
		}
		parts = append(parts, string(v))
	}
	add(f.Error)
	add(f.ErrorType)
	add(f.ErrorMessage)
	add(f.Message)
	add(f.LastAssistantMessage) // Claude Code 2.1.330: "API Error: Request rejected (429) · ..."
	if len(parts) == 0 {
		return "the turn failed at the API (no detail given)"
	}
	return clipText(strings.Join(dedupe(parts), ": "), maxErrorText)
}

func dedupe(ss []string) []string {
	var out []string
	for _, s := range ss {
		dup := false
		for _, o := range out {
			if o == s {
				dup = true
			}
		}
		if !dup {
			out = append(out, s)
		}
	}
	return out
}

// resetTime is when a rate limit lifts: reset_at or resets_at (RFC 3339
// text, or Unix seconds), or now + retry_after seconds; nil when none is
// given, as Claude Code 2.1.330 never does (its StopFailure has no reset
// time, whatever the API's headers said).
func resetTime(f *hookFields, now time.Time) (*time.Time, error) {
	for _, c := range []struct {
		field string
		v     json.RawMessage
	}{{"reset_at", f.ResetAt}, {"resets_at", f.ResetsAt}} {
		if isNull(c.v) {
			continue
		}
		var s string
		if json.Unmarshal(c.v, &s) == nil {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return nil, fmt.Errorf("field %s: %q is not an RFC 3339 time", c.field, clip(s, 64))
			}
			return &t, nil
		}
		var secs float64
		if json.Unmarshal(c.v, &secs) == nil && secs > 0 && secs < 1e11 {
			t := time.Unix(int64(secs), 0)
			return &t, nil
		}
		return nil, fmt.Errorf("field %s: want an RFC 3339 time or Unix seconds, got %s", c.field, describeJSON(c.v))
	}
	if !isNull(f.RetryAfter) {
		var secs float64
		if json.Unmarshal(f.RetryAfter, &secs) != nil || secs < 0 || secs > 1e9 {
			var s string
			if json.Unmarshal(f.RetryAfter, &s) != nil {
				return nil, fmt.Errorf("field retry_after: want seconds, got %s", describeJSON(f.RetryAfter))
			}
			n, err := strconv.ParseFloat(s, 64)
			if err != nil || n < 0 || n > 1e9 {
				return nil, fmt.Errorf("field retry_after: want seconds, got %s", describeJSON(f.RetryAfter))
			}
			secs = n
		}
		t := now.Add(time.Duration(secs * float64(time.Second))).Truncate(time.Second)
		return &t, nil
	}
	return nil, nil
}

// toolCommand is what a tool would do, for a person to judge: Bash's
// command, a file tool's path, a fetch's URL, a search's pattern.
func toolCommand(input json.RawMessage) string {
	if len(input) == 0 {
		return ""
	}
	var in map[string]json.RawMessage
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	for _, k := range []string{"command", "file_path", "notebook_path", "path", "url", "pattern"} {
		var s string
		if v, ok := in[k]; ok && json.Unmarshal(v, &s) == nil && s != "" {
			return clipText(s, maxCommand)
		}
	}
	return ""
}

// toolQuestions reads AskUserQuestion's questions from its input:
// {"questions":[{"question","header","options":[{"label","description"}],"multiSelect"}]}.
// An option may also be a plain string.
func toolQuestions(input json.RawMessage) []api.Question {
	var in struct {
		Questions []struct {
			Question    string            `json:"question"`
			Header      string            `json:"header"`
			Options     []json.RawMessage `json:"options"`
			MultiSelect bool              `json:"multiSelect"`
		} `json:"questions"`
	}
	if len(input) == 0 || json.Unmarshal(input, &in) != nil {
		return nil
	}
	var qs []api.Question
	for _, q := range in.Questions {
		if len(qs) == maxQuestions {
			break
		}
		aq := api.Question{Question: clipText(q.Question, maxQuestionText), Header: clipText(q.Header, maxOptionText), MultiSelect: q.MultiSelect}
		for _, o := range q.Options {
			if len(aq.Options) == maxOptions {
				break
			}
			var label string
			if json.Unmarshal(o, &label) != nil {
				var lo struct {
					Label string `json:"label"`
				}
				json.Unmarshal(o, &lo) // a malformed option has no label
				label = lo.Label
			}
			aq.Options = append(aq.Options, clipText(label, maxOptionText))
		}
		qs = append(qs, aq)
	}
	return qs
}

// boundToolInput is a tool input small enough for the agent's state: its
// long strings clipped, and nil when even that is over maxToolInput.
func boundToolInput(input json.RawMessage) json.RawMessage {
	if len(input) == 0 {
		return nil
	}
	if len(input) <= maxToolInput {
		return input
	}
	for _, n := range []int{maxToolString, 128} {
		if out, err := clipJSONStrings(input, n); err == nil && len(out) <= maxToolInput {
			return out
		}
	}
	return nil
}

// clipJSONStrings re-encodes a JSON value with every string longer than n
// bytes clipped (see clipText). Numbers keep their text.
func clipJSONStrings(raw json.RawMessage, n int) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return clipText(x, n)
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		}
		return v
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(walk(v)); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// ShrinkHookPayload makes a hook payload fit a hook call's params: it
// drops tool_response (the state machine never reads it, and a Read's
// holds a whole file), then clips long strings until it fits. A payload
// that is not a JSON object is returned as it is, for the worker to
// refuse with a clear error.
func ShrinkHookPayload(raw []byte) []byte {
	if fitsHookParams(raw) {
		return raw
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw
	}
	delete(obj, "tool_response")
	out, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	for _, n := range []int{4 << 10, 512, 64} {
		if fitsHookParams(out) {
			break
		}
		if c, err := clipJSONStrings(out, n); err == nil {
			out = c
		}
	}
	return out
}

// fitsHookParams reports whether a payload fits a hook call's params
// once encoded into the request: encoding/json writes <, > and & as
// \u003c (six bytes), and U+2028 and U+2029 (three bytes) likewise.
func fitsHookParams(raw []byte) bool {
	n := len(raw) + 5*(bytes.Count(raw, []byte("<"))+bytes.Count(raw, []byte(">"))+bytes.Count(raw, []byte("&"))) +
		3*(bytes.Count(raw, []byte("\u2028"))+bytes.Count(raw, []byte("\u2029")))
	return n <= maxHookParams
}

// clipText cuts s to at most n bytes, on a character boundary, saying how
// much was cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := fmt.Sprintf(" ... [%d bytes more]", len(s))
	cut := max(n-len(note), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" ... [%d bytes more]", len(s)-cut)
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// describeJSON names a JSON value's kind for an error message, with a
// short excerpt.
func describeJSON(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	kind := "a number"
	switch v[0] {
	case '{':
		kind = "an object"
	case '[':
		kind = "an array"
	case '"':
		kind = "a string"
	case 't', 'f':
		kind = "a boolean"
	case 'n':
		kind = "null"
	}
	if !json.Valid(v) {
		kind = "text that is not JSON"
	}
	return fmt.Sprintf("%s (%q)", kind, clip(string(v), 40))
}
