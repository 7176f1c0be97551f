package proto

import (
	"bytes"
	"encoding/json"
)

// EnvHookDialect names, in an agent's environment, the [HookDialect] its
// hook payloads are written in, for `legion hook` to translate them
// before it forwards them; unset for Claude Code's own (and Codex's and
// opencode's, which send Claude Code's payloads). An agent kind sets it
// in its launch's environment.
const EnvHookDialect = "LEGION_HOOK_DIALECT"

// HookDialect says how an agent CLI's hook payloads differ from Claude
// Code's, which the worker reads: event, tool and notification names and
// renamed fields. It is data an agent kind gives (agent/gemini), so that
// `legion hook` translates without knowing any kind. Names a dialect does
// not list pass unchanged.
type HookDialect struct {
	// Events are the CLI's event names that Claude Code names otherwise
	// (the CLI's name → Claude Code's).
	Events map[string]string
	// Notifications are notification_type values of the CLI's
	// Notification events that Claude Code names otherwise.
	Notifications map[string]string
	// Fields are payload fields that Claude Code names otherwise, by
	// Claude Code's event name (the CLI's field → Claude Code's).
	Fields map[string]map[string]string
	// Tools are the CLI's tools with a Claude Code twin (the CLI's name →
	// the twin's), so that the state and an escalation read the same.
	Tools map[string]string
}

// Translate returns payload as Claude Code would have sent it when it is
// one of the dialect's own events (an event in Events, or a Notification
// whose notification_type is in Notifications), else payload itself: the
// event, its fields and its tool get Claude Code's names.
func (d HookDialect) Translate(payload []byte) []byte {
	var p map[string]json.RawMessage
	if json.Unmarshal(payload, &p) != nil {
		return payload
	}
	var name, ntype string
	if json.Unmarshal(p["hook_event_name"], &name) != nil {
		return payload
	}
	claude, ok := d.Events[name]
	switch {
	case ok:
	case name == "Notification" && json.Unmarshal(p["notification_type"], &ntype) == nil && d.Notifications[ntype] != "":
		claude = name
		p["notification_type"], _ = json.Marshal(d.Notifications[ntype])
	default:
		return payload
	}
	p["hook_event_name"], _ = json.Marshal(claude)
	for from, to := range d.Fields[claude] {
		if v, ok := p[from]; ok {
			p[to] = v
			delete(p, from)
		}
	}
	var tool string
	if json.Unmarshal(p["tool_name"], &tool) == nil {
		if twin, ok := d.Tools[tool]; ok {
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
