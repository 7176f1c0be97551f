package claudetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// HookLog is a hook command for Settings.Hook that records every hook
// payload the CLI sends it, and answers a PermissionRequest for a tool
// with what the test put there (Answer). It stands in for `legion hook`
// where a test looks at the CLI alone.
type HookLog struct {
	Command string // the shell command for Settings.Hook
	dir     string
}

// NewHookLog writes the hook command into a new directory of the test.
func NewHookLog(t testing.TB) *HookLog {
	t.Helper()
	dir := t.TempDir()
	h := &HookLog{Command: filepath.Join(dir, "hook"), dir: dir}
	// One payload a line (the CLI sends compact JSON); then, for a
	// PermissionRequest, the answer file of its tool if there is one.
	script := `#!/bin/sh
in=$(cat)
printf '%s\n' "$in" >> '` + h.logPath() + `'
case $in in
*'"hook_event_name":"PermissionRequest"'*)
	tool=${in#*'"tool_name":"'}; tool=${tool%%'"'*}
	[ -f '` + dir + `'/"answer-$tool" ] && cat '` + dir + `'/"answer-$tool"
	;;
esac
exit 0
`
	if err := os.WriteFile(h.Command, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *HookLog) logPath() string { return filepath.Join(h.dir, "hooks.jsonl") }

// Answer makes the hook print decision (the hook's JSON output) for every
// later PermissionRequest of tool.
func (h *HookLog) Answer(t testing.TB, tool string, decision any) {
	t.Helper()
	data, err := json.Marshal(decision)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "answer-"+tool), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Event is a hook payload: the fields every one has, and all of it.
type Event struct {
	Name      string `json:"hook_event_name"`
	SessionID string `json:"session_id"`
	Raw       map[string]any
}

// Events returns the payloads recorded so far, oldest first.
func (h *HookLog) Events() ([]Event, error) {
	data, err := os.ReadFile(h.logPath())
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read hook log: %w", err)
	}
	var out []Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("hook log %s: a payload is not JSON: %v", h.logPath(), err)
		}
		if err := json.Unmarshal(sc.Bytes(), &e.Raw); err != nil {
			return nil, fmt.Errorf("hook log %s: %v", h.logPath(), err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Find returns the first recorded payload of hook event name, or false.
func (h *HookLog) Find(name string) (Event, bool) {
	events, _ := h.Events()
	for _, e := range events {
		if e.Name == name {
			return e, true
		}
	}
	return Event{}, false
}
