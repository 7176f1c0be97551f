package proto

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"time"
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
	// Failures are the CLI's events that may report a failed model
	// request (by the CLI's event name); one that does is sent as Claude
	// Code's StopFailure (see [Failure]).
	Failures map[string]Failure
}

// Failure says when a CLI's event reports a failed model request and how
// to read it as Claude Code's StopFailure: "error" is the Error of the
// first of Errors whose Contains the failure's text contains ("unknown"
// when none does), "error_message" the text, and "reset_at" (RFC 3339)
// when the limit lifts, where the text says it (ResetAfter, ResetLayouts).
type Failure struct {
	// When are fields and the string values they must have for the event
	// to be a failure (e.g. "status": "failed").
	When map[string]string
	// Message is the field that holds the failure's text.
	Message string
	// Errors are StopFailure error kinds ("rate_limit", "billing_error",
	// "server_error", "authentication_failed", …) by text.
	Errors []ErrorText
	// ResetAfter is the words in the text after which the reset time
	// follows, up to the end of the sentence; ResetLayouts are the time
	// layouts it may have (package time's), in the local zone. An ordinal
	// day ("Dec 1st") is read as a plain one ("Dec 1"). A layout without a
	// date is the next such time from now. The CLI shows minutes, so the
	// reset is taken at the end of the minute shown.
	ResetAfter   string
	ResetLayouts []string
}

// ErrorText is an error kind by the text of a failure.
type ErrorText struct {
	Contains string
	Error    string
}

// Translate returns payload as Claude Code would have sent it when it is
// one of the dialect's own events (an event in Events, or a Notification
// whose notification_type is in Notifications), else payload itself: the
// event, its fields and its tool get Claude Code's names.
func (d HookDialect) Translate(payload []byte) []byte {
	return d.TranslateAt(payload, time.Now())
}

// TranslateAt is Translate at the time now, which a failure's reset time
// without a date is read against; a failure (in Failures, its When
// matching) becomes Claude Code's StopFailure.
func (d HookDialect) TranslateAt(payload []byte, now time.Time) []byte {
	var p map[string]json.RawMessage
	if json.Unmarshal(payload, &p) != nil {
		return payload
	}
	var name, ntype string
	if json.Unmarshal(p["hook_event_name"], &name) != nil {
		return payload
	}
	claude, ok := d.Events[name]
	f, failure := d.Failures[name]
	if failure && f.matches(p) {
		claude, ok = "StopFailure", true
		f.translate(p, now)
	}
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

// matches reports whether payload p is a failure.
func (f Failure) matches(p map[string]json.RawMessage) bool {
	for field, want := range f.When {
		var v string
		if json.Unmarshal(p[field], &v) != nil || v != want {
			return false
		}
	}
	return true
}

// translate sets p's StopFailure fields: error, error_message, reset_at.
func (f Failure) translate(p map[string]json.RawMessage, now time.Time) {
	var text string
	json.Unmarshal(p[f.Message], &text)
	delete(p, f.Message)
	kind := "unknown"
	for _, e := range f.Errors {
		if e.Contains != "" && strings.Contains(text, e.Contains) {
			kind = e.Error
			break
		}
	}
	p["error"], _ = json.Marshal(kind)
	p["error_message"], _ = json.Marshal(text)
	if t, ok := f.reset(text, now); ok {
		p["reset_at"], _ = json.Marshal(t.Format(time.RFC3339))
	}
}

var ordinalDay = regexp.MustCompile(`\b(\d{1,2})(st|nd|rd|th)\b`)

// reset reads the reset time in text, if it says one.
func (f Failure) reset(text string, now time.Time) (time.Time, bool) {
	if f.ResetAfter == "" {
		return time.Time{}, false
	}
	_, s, ok := strings.Cut(text, f.ResetAfter)
	if !ok {
		return time.Time{}, false
	}
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i]
	}
	s = ordinalDay.ReplaceAllString(strings.TrimSuffix(s, "."), "$1")
	loc := now.Location()
	for _, layout := range f.ResetLayouts {
		t, err := time.ParseInLocation(layout, s, loc)
		if err != nil {
			continue
		}
		if t.Year() == 0 { // a time of day: the next one from now
			y, m, d := now.Date()
			t = time.Date(y, m, d, t.Hour(), t.Minute(), 0, 0, loc)
			if t.Add(time.Minute).Before(now) {
				t = t.AddDate(0, 0, 1)
			}
		}
		return t.Add(time.Minute), true
	}
	return time.Time{}, false
}
