package ptyworker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/gemini"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestOwnCommand: the commands Legion's instructions name, for the
// session's own team and issue, in the forms a model writes them, are
// Legion's own; anything else is left to a person.
func TestOwnCommand(t *testing.T) {
	dir := t.TempDir()
	legion := filepath.Join(dir, "bin", "legion")
	if err := os.MkdirAll(filepath.Dir(legion), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legion, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "legion-link")
	if err := os.Symlink(legion, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	all := []string{api.OwnIssue, api.OwnState, api.OwnWorktreeFinish}
	spec := func(groups ...string) *proto.Spec {
		return &proto.Spec{Team: "web", Issue: "DEMO-1", Mode: "plan", OwnCommands: groups, Legion: legion,
			Env: []string{"LEGION_TEAM=web", "LEGION_ISSUE=DEMO-1", "LEGION_MODE=plan", "HOME=/root"}}
	}
	tests := []struct {
		name    string
		groups  []string
		command string
		want    bool
	}{
		{"literal comment", all, `legion issue comment web DEMO-1 "Plan: x"`, true},
		{"variables", all, `legion issue comment $LEGION_TEAM $LEGION_ISSUE "Plan: x"`, true},
		{"quoted variables", all, `legion issue comment "$LEGION_TEAM" "$LEGION_ISSUE" 'Plan: x'`, true},
		{"braced variables", all, `legion issue label ${LEGION_TEAM} "${LEGION_ISSUE}" worker-done`, true},
		{"mode in text", all, `legion issue comment web DEMO-1 "done with $LEGION_MODE"`, true},
		{"multi-line text", all, "legion issue comment web DEMO-1 \"Plan:\n- a\n- b\"", true},
		{"here-document text", all, "legion issue comment $LEGION_TEAM $LEGION_ISSUE \"$(cat <<'EOF'\nPlan:\n1) write it; 2) test it\nEOF\n)\"", true},
		{"here-document with expansion", all, "legion issue comment web DEMO-1 \"$(cat <<EOF\n$(id)\nEOF\n)\"", false},
		{"show", all, `legion issue show web DEMO-1`, true},
		{"show json", all, `legion issue show $LEGION_TEAM $LEGION_ISSUE --json`, true},
		{"unlabel", all, `legion issue unlabel web DEMO-1 worker-done`, true},
		{"move", all, `legion issue move web DEMO-1 "Needs Review"`, true},
		{"pull request", all, `legion issue pr $LEGION_TEAM $LEGION_ISSUE "DEMO-1: greet" "Adds a greeting; go test passes"`, true},
		{"pull request without body", all, `legion issue pr web DEMO-1 "DEMO-1: greet"`, true},
		{"state", all, `legion state $LEGION_TEAM`, true},
		{"state json", all, `legion state web --json`, true},
		{"finish", all, `legion worktree finish "$LEGION_TEAM" "$LEGION_ISSUE"`, true},
		{"absolute path", all, legion + ` issue label web DEMO-1 worker-done`, true},
		{"same file by another path", all, link + ` issue label $LEGION_TEAM $LEGION_ISSUE worker-done`, true},
		{"ask policy: issue", []string{api.OwnIssue}, `legion issue comment web DEMO-1 x`, true},

		{"no groups", nil, `legion issue comment web DEMO-1 x`, false},
		{"ask policy: state", []string{api.OwnIssue}, `legion state web`, false},
		{"ask policy: finish", []string{api.OwnIssue}, `legion worktree finish web DEMO-1`, false},
		{"other issue", all, `legion issue comment web DEMO-2 x`, false},
		{"other team", all, `legion issue comment api DEMO-1 x`, false},
		{"other team's state", all, `legion state api`, false},
		{"other issue finished", all, `legion worktree finish web DEMO-2`, false},
		{"compound", all, `legion issue label web DEMO-1 worker-done && touch x`, false},
		{"sequence", all, `legion issue label web DEMO-1 worker-done; rm -rf /`, false},
		{"pipe", all, `legion issue show web DEMO-1 | sh`, false},
		{"substitution", all, `legion issue comment web DEMO-1 "$(cat ~/.ssh/id_rsa)"`, false},
		{"backticks", all, "legion issue comment web DEMO-1 `id`", false},
		{"redirection", all, `legion issue show web DEMO-1 > /etc/x`, false},
		{"other variable", all, `legion issue comment web DEMO-1 "$HOME"`, false},
		{"unknown subcommand", all, `legion issue add web "new issue"`, false},
		{"issue list", all, `legion issue list web`, false},
		{"other legion command", all, `legion sessions kill DEMO-1-plan`, false},
		{"spawn", all, `legion spawn web DEMO-1 -- sh`, false},
		{"state apply", all, `legion state web --apply`, false},
		{"finish keep-open", all, `legion worktree finish web DEMO-1 --keep-open`, false},
		{"config flag", all, `legion issue comment web DEMO-1 x --config /tmp/l.toml`, false},
		{"flag as text", all, `legion issue comment web DEMO-1 --config=/tmp/l.toml`, false},
		{"author flag", all, `legion issue comment web DEMO-1 --author=ana`, false},
		{"pull request flag", all, `legion issue pr web DEMO-1 title --json`, false},
		{"pull request extra word", all, `legion issue pr web DEMO-1 title body x`, false},
		{"extra word", all, `legion issue label web DEMO-1 worker-done x`, false},
		{"missing word", all, `legion issue label web DEMO-1`, false},
		{"another program", all, `/usr/bin/legionx issue show web DEMO-1`, false},
		{"another file", all, other + ` issue show web DEMO-1`, false},
		{"relative path", all, `./legion issue show web DEMO-1`, false},
		{"assignment", all, `LEGION_CONFIG=/tmp/l.toml legion issue show web DEMO-1`, false},
		{"env wrapper", all, `env legion issue show web DEMO-1`, false},
		{"git", all, `git status`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ownCommand(spec(tt.groups...), tt.command); got != tt.want {
				t.Errorf("ownCommand(%q) with %q = %v; want %v", tt.command, tt.groups, got, tt.want)
			}
		})
	}

	t.Run("no issue", func(t *testing.T) {
		s := &proto.Spec{Team: "web", OwnCommands: all, Legion: legion}
		for cmd, want := range map[string]bool{
			`legion state $LEGION_TEAM`:           true,
			`legion issue show web DEMO-1`:        false,
			`legion issue show web $LEGION_ISSUE`: false,
			`legion worktree finish web ""`:       false,
			`legion issue comment web "" x`:       false,
		} {
			if got := ownCommand(s, cmd); got != want {
				t.Errorf("ownCommand(%q) without an issue = %v; want %v", cmd, got, want)
			}
		}
	})
	t.Run("no legion path", func(t *testing.T) {
		s := spec(all...)
		s.Legion = ""
		if ownCommand(s, legion+` issue show web DEMO-1`) {
			t.Errorf("ownCommand by an absolute path with no Legion in the spec = true; want false")
		}
		if !ownCommand(s, `legion issue show web DEMO-1`) {
			t.Errorf("ownCommand by name with no Legion in the spec = false; want true")
		}
	})
	t.Run("env wins", func(t *testing.T) {
		// The agent's LEGION_ISSUE is its spec's env's: a value there
		// that is not the session's issue is not its own.
		s := spec(all...)
		s.Env = append(s.Env, "LEGION_ISSUE=DEMO-9")
		if ownCommand(s, `legion issue comment web $LEGION_ISSUE x`) {
			t.Errorf("ownCommand with LEGION_ISSUE=DEMO-9 in the env allowed DEMO-9's comment")
		}
	})
}

// TestOwnCommandAllowedAtOnce: the worker answers a permission request for
// one of Legion's own commands with allow at once, and the agent never
// waits; a request for another issue's command is held for a person.
func TestOwnCommandAllowedAtOnce(t *testing.T) {
	log, _ := bufferLogger(t)
	spec := hookSpec(t, "LEGION_TEAM=testteam", "LEGION_ISSUE=ENG-1")
	spec.OwnCommands = []string{api.OwnIssue}
	tw := startWorker(t, spec, Options{Logger: log})
	c := tw.dial()
	agentIn(t, c, api.AgentStarting)
	tok := hookToken(t, c)
	hook := func(payload map[string]any) *rawConn {
		h := tw.raw()
		h.request(1, proto.MethodHello, proto.HelloParams{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, Token: tok})
		if m := h.next(); m == nil || m.Error != nil {
			t.Fatalf("hook hello: %+v", m)
		}
		h.request(2, proto.MethodHook, payload)
		return h
	}
	perm := func(command string) map[string]any {
		return map[string]any{"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": map[string]string{"command": command}}
	}
	h := hook(map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": map[string]string{"command": "legion issue comment"}})
	h.next()
	agentIn(t, c, api.AgentWorking)

	own := `legion issue comment $LEGION_TEAM "$LEGION_ISSUE" "Plan: x"`
	m := hook(perm(own)).next()
	if m == nil || m.Error != nil {
		t.Fatalf("hook reply to %q: %+v", own, m)
	}
	var res proto.HookResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	want := `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`
	if string(res.Output) != want {
		t.Errorf("hook output for %q = %s; want %s", own, res.Output, want)
	}
	if in, err := c.Info(ctxT(t)); err != nil || in.Agent == nil || in.Agent.State != api.AgentWorking || in.Waiting {
		t.Errorf("agent after its own command was allowed = %+v (waiting %v), %v; want working, not waiting", in.Agent, in.Waiting, err)
	}

	hook(perm(`legion issue comment testteam ENG-2 "Plan: x"`))
	if a := agentIn(t, c, api.AgentWaitingPermission); a.Command != `legion issue comment testteam ENG-2 "Plan: x"` {
		t.Errorf("waiting for %q; want the other issue's comment", a.Command)
	}
}

// TestOwnCommandDialogAllowedByKeys: a dialog no hook answers (the Gemini
// CLI's, seen as a permission_prompt notification after the tool's
// PreToolUse) for one of Legion's own commands is answered with its key
// 1 by the worker; the agent never waits for a person.
func TestOwnCommandDialogAllowedByKeys(t *testing.T) {
	spec := hookSpec(t, "LEGION_TEAM=testteam", "LEGION_ISSUE=ENG-1")
	spec.OwnCommands = []string{api.OwnIssue}
	spec.DialogMarkers = []string{gemini.DialogMarker}
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "agent-ready")
	if err := c.Input(ctxT(t), []byte("gemini-own\r")); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "answered-option:1")
	if in, err := c.Info(ctxT(t)); err != nil || in.Agent == nil || in.Agent.State != api.AgentWorking || in.Waiting {
		t.Errorf("agent after its own command's dialog was answered = %+v (waiting %v), %v; want working, not waiting", in.Agent, in.Waiting, err)
	}
}

// TestOwnCommandDialogNeedsMarker: the worker answers by keys only the
// dialogs its spec names (Spec.DialogMarkers, which the Gemini kind
// gives); without them the same dialog for one of Legion's own commands
// waits for a person, as any permission prompt.
func TestOwnCommandDialogNeedsMarker(t *testing.T) {
	spec := hookSpec(t, "LEGION_TEAM=testteam", "LEGION_ISSUE=ENG-1")
	spec.OwnCommands = []string{api.OwnIssue}
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "agent-ready")
	if err := c.Input(ctxT(t), []byte("gemini-own\r")); err != nil {
		t.Fatal(err)
	}
	agentIn(t, c, api.AgentWaitingPermission)
}
