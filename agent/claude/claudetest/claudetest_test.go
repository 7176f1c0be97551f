package claudetest_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent/claude/claudetest"
)

func TestWriteClaudeJSON(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "repo")
	link := filepath.Join(dir, "link")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ".claude.json")
	if err := claudetest.WriteClaudeJSON(path, link, "/not/there"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"hasCompletedOnboarding": true, "hasSeenAutoDefaultNotice": true, "hasSeenAutoDefaultNudge": true,
		"projects": map[string]any{
			real:         map[string]any{"hasTrustDialogAccepted": true}, // the physical path, as the CLI looks it up
			"/not/there": map[string]any{"hasTrustDialogAccepted": true},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("~/.claude.json (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if err := claudetest.WriteClaudeJSON(path, "relative/dir"); err == nil || !strings.Contains(err.Error(), `"relative/dir" is not absolute`) {
		t.Errorf("relative trusted dir: error %v; want one naming it", err)
	}
}

func TestWriteSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := claudetest.WriteSettings(path, claudetest.Settings{Allow: []string{"Bash(legion issue:*)"}, Hook: "'/usr/bin/legion' hook"}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Permissions struct{ Allow []string }
		Hooks       map[string][]struct {
			Matcher *string
			Hooks   []struct {
				Type, Command string
				Timeout       int
			}
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Bash(legion issue:*)"}, got.Permissions.Allow); diff != "" {
		t.Errorf("allow rules (-want +got):\n%s", diff)
	}
	if len(got.Hooks) != len(claudetest.HookEvents) {
		t.Errorf("%d hook events; want %d", len(got.Hooks), len(claudetest.HookEvents))
	}
	for _, ev := range claudetest.HookEvents {
		h := got.Hooks[ev]
		if len(h) != 1 || h[0].Matcher != nil || len(h[0].Hooks) != 1 ||
			h[0].Hooks[0] != (struct {
				Type, Command string
				Timeout       int
			}{"command", "'/usr/bin/legion' hook", 86400}) {
			t.Errorf("hooks of %s: %+v; want one command hook, no matcher, timeout 86400", ev, h)
		}
	}
}

func TestReadSession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	lines := []string{
		`{"type":"user","uuid":"u1","message":{"role":"user","content":"say hello"}}`,
		`{"type":"attachment","uuid":"a1"}`,
		`{"type":"assistant","uuid":"a2","message":{"role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"Hi."},{"type":"tool_use","id":"toolu_q","name":"AskUserQuestion","input":{"questions":[]}}]}}`,
		`not json`,
		`{"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":"The user answered: \"Q\"=\"mine\"."}]},"toolUseResult":{"answers":{"Q":"mine"}}}`,
		`{"type":"user","uuid":"u3","message":{"role":"user","content":[{"type":"text","text":"next"}]}}`,
		`{"type":"assistant","uuid":"a3","message":{"role":"ass`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := claudetest.ReadSession(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 5 {
		t.Fatalf("%d lines; want 5 (the malformed and the half-written one skipped)", len(s))
	}
	if diff := cmp.Diff([]string{"say hello", "next"}, s.Prompts()); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Hi."}, s.AssistantTexts()); diff != "" {
		t.Errorf("assistant texts (-want +got):\n%s", diff)
	}
	if uses := s.ToolUses(); len(uses) != 1 || uses[0].Name != "AskUserQuestion" || uses[0].ID != "toolu_q" {
		t.Errorf("tool uses %+v; want the question", uses)
	}
	b, l, ok := s.ToolResult("toolu_q")
	if !ok || b.ResultText() != `The user answered: "Q"="mine".` || l.UUID != "u2" {
		t.Errorf("ToolResult = %+v, %q, %v; want the answer of line u2", b, l.UUID, ok)
	}
	if diff := cmp.Diff(map[string]string{"Q": "mine"}, l.Answers()); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if _, _, ok := s.ToolResult("toolu_other"); ok {
		t.Error("ToolResult of an unknown id found one")
	}
	if _, err := claudetest.ReadSession(filepath.Join(t.TempDir(), "missing.jsonl")); !os.IsNotExist(err) && !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: error %v; want not-exist", err)
	}
}

func FuzzReadSession(f *testing.F) {
	f.Add([]byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"a"}]}]},"toolUseResult":{"answers":{"Q":"A"}}}`))
	f.Add([]byte(`{"type":"assistant","message":{"content":"s"}}` + "\n" + `{"type":"user","message":{"content":7}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := claudetest.ReadSession(path)
		if err != nil {
			return
		}
		s.Prompts()
		s.AssistantTexts()
		for _, u := range s.ToolUses() {
			s.ToolResult(u.ID)
		}
		for _, l := range s {
			l.Answers()
			for _, b := range l.Blocks() {
				b.ResultText()
			}
		}
	})
}

// TestTerminal runs a shell in the PTY: its screen, typing into it, and
// its exit code.
func TestTerminal(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `printf 'ready\302\240now\n'; read line; echo "got:$line"; trap 'exit 7' INT; echo armed; while :; do sleep 0.05; done`)
	term := claudetest.StartCommand(t, cmd)
	term.WaitScreen(t, "ready now") // a no-break space reads as a space
	term.Type(t, "héllo wörld\r")
	term.WaitScreen(t, "got:héllo wörld", "armed")
	term.Signal(t, syscall.SIGINT)
	if code := term.ExitCode(t); code != 7 {
		t.Errorf("exit code %d; want 7\n%s", code, term)
	}
}

func TestHookLog(t *testing.T) {
	h := claudetest.NewHookLog(t)
	decision := map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": "PermissionRequest", "decision": map[string]any{"behavior": "allow"}}}
	h.Answer(t, "Bash", decision)
	run := func(payload string) string {
		cmd := exec.Command("/bin/sh", "-c", h.Command)
		cmd.Stdin = strings.NewReader(payload)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hook with %s: %v", payload, err)
		}
		return string(out)
	}
	if out := run(`{"session_id":"s1","hook_event_name":"Stop","last_assistant_message":"it's done"}`); out != "" {
		t.Errorf("Stop hook printed %q; want nothing", out)
	}
	if out := run(`{"session_id":"s1","hook_event_name":"PermissionRequest","tool_name":"Write","tool_input":{}}`); out != "" {
		t.Errorf("PermissionRequest for Write printed %q; want nothing (no answer for it)", out)
	}
	out := run(`{"session_id":"s1","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"ls"}}`)
	var got any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("PermissionRequest for Bash printed %q: %v", out, err)
	}
	if diff := cmp.Diff(any(decision), got); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
	events, err := h.Events()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range events {
		names = append(names, e.Name+"/"+e.SessionID)
	}
	if diff := cmp.Diff([]string{"Stop/s1", "PermissionRequest/s1", "PermissionRequest/s1"}, names); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if e, ok := h.Find("Stop"); !ok || e.Raw["last_assistant_message"] != "it's done" {
		t.Errorf("Find(Stop) = %+v, %v", e, ok)
	}
}
