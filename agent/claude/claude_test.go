package claude

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
)

func defaultAgent() config.Agent {
	return config.Agent{
		Kind:        config.AgentClaude,
		New:         []string{"claude", "--session-id", "{session_id}", "{prompt}"},
		Resume:      []string{"claude", "--resume", "{session_id}", "{prompt}"},
		Permissions: config.PermissionsAllowlist,
	}
}

func TestClaudePrepare(t *testing.T) {
	a := defaultAgent()
	a.PermissionsByMode = map[string]config.PermissionPolicy{"finish": config.PermissionsBypass}
	a.Allow = []string{"Bash(make test)"}
	k := New(a)
	for _, tt := range []struct {
		mode, permissionMode string
		bypass               bool
	}{
		{"implement", "manual", false},
		{"finish", "bypassPermissions", true},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			s := agenttest.Session(t, k, tt.mode)
			s.Env = append(s.Env, "ANTHROPIC_API_KEY=sk-ant-api03-0123456789abcdefghijKLMNOPQRSTUVWXYZ")
			l, err := k.Plan(s)
			if err != nil {
				t.Fatal(err)
			}
			if want := claudecode.SessionFile(s.Home, s.Cwd, s.ID); l.SessionFile != want || l.Agent != "claude" {
				t.Errorf("Plan = %+v; want agent claude, session file %s", l, want)
			}
			if _, err := os.Stat(s.Dir); err == nil {
				t.Errorf("Plan created %s; want nothing written", s.Dir)
			}
			l, err = k.Prepare(t.Context(), s, l)
			if err != nil {
				t.Fatal(err)
			}
			settings := filepath.Join(s.Dir, "settings.json")
			id := s.ID.String()
			wantNew := []string{"claude", "--settings", settings, "--permission-mode", tt.permissionMode, "--session-id", id, "do it"}
			wantResume := []string{"claude", "--settings", settings, "--permission-mode", tt.permissionMode, "--resume", id, "do it"}
			if diff := cmp.Diff(wantNew, l.ArgvNew); diff != "" {
				t.Errorf("ArgvNew (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantResume, l.ArgvResume); diff != "" {
				t.Errorf("ArgvResume (-want +got):\n%s", diff)
			}
			if !slices.Contains(l.Env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1") {
				t.Errorf("Env = %q; want CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", l.Env)
			}
			if got, want := slices.Contains(l.Env, "IS_SANDBOX=1"), tt.bypass && os.Geteuid() == 0; got != want {
				t.Errorf("Env = %q: IS_SANDBOX=1 %v; want %v (bypass as root)", l.Env, got, want)
			}
			for _, e := range l.Env {
				if strings.Contains(e, "sk-ant") {
					t.Errorf("Env has the API key: %q", e)
				}
			}

			agenttest.FileMode(t, s.Dir, os.ModeDir|0o700)
			agenttest.FileMode(t, settings, 0o600)
			data, err := os.ReadFile(settings)
			if err != nil {
				t.Fatal(err)
			}
			st := parseSettings(t, data)
			if len(st.Hooks) != len(HookEvents) || st.SkipDangerousModePermissionPrompt != tt.bypass {
				t.Errorf("settings file has %d hook events, skipDangerousModePermissionPrompt %v; want %d, %v",
					len(st.Hooks), st.SkipDangerousModePermissionPrompt, len(HookEvents), tt.bypass)
			}
			if !tt.bypass && !slices.Contains(st.Permissions.Allow, "Bash(make test)") {
				t.Errorf("permissions.allow = %q; want agent.allow's Bash(make test) in it", st.Permissions.Allow)
			}

			want := map[string]any{
				"hasCompletedOnboarding": true, "hasSeenAutoDefaultNotice": true, "hasSeenAutoDefaultNudge": true,
				"projects":              map[string]any{agent.Physical(s.Repo): map[string]any{"hasTrustDialogAccepted": true}},
				"customApiKeyResponses": map[string]any{"approved": []any{"ghijKLMNOPQRSTUVWXYZ"}, "rejected": []any{}},
			}
			if diff := cmp.Diff(want, readClaudeJSON(t, s.Home)); diff != "" {
				t.Errorf("~/.claude.json (-want +got):\n%s", diff)
			}
			agenttest.FileMode(t, JSONPath(s.Home), 0o600)
		})
	}
}

// TestClaudeArgvWithWrapper: Legion's arguments go before the session
// flag, so a wrapper in front of the agent keeps its own arguments.
func TestClaudeArgvWithWrapper(t *testing.T) {
	a := defaultAgent()
	a.New = []string{"/usr/bin/env", "LEGION_SCRIPT_FILE=/s", "/bin/legion", "scripted-agent", "--session-id", "{session_id}", "{prompt}"}
	a.Resume = []string{"/usr/bin/env", "LEGION_SCRIPT_FILE=/s", "/bin/legion", "scripted-agent", "--resume={session_id}", "{prompt}"}
	a.Permissions = config.PermissionsAsk
	k := New(a)
	s := agenttest.Session(t, k, "plan")
	l := agenttest.Prepared(t, k, s)
	settings := filepath.Join(s.Dir, SettingsFileName)
	id := s.ID.String()
	wantNew := []string{"/usr/bin/env", "LEGION_SCRIPT_FILE=/s", "/bin/legion", "scripted-agent", "--settings", settings, "--permission-mode", "manual", "--session-id", id, "do it"}
	wantResume := []string{"/usr/bin/env", "LEGION_SCRIPT_FILE=/s", "/bin/legion", "scripted-agent", "--settings", settings, "--permission-mode", "manual", "--resume=" + id, "do it"}
	if diff := cmp.Diff(wantNew, l.ArgvNew); diff != "" {
		t.Errorf("ArgvNew (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantResume, l.ArgvResume); diff != "" {
		t.Errorf("ArgvResume (-want +got):\n%s", diff)
	}
}

func TestInsertArgs(t *testing.T) {
	tests := []struct {
		name string
		tmpl []string
		want []string // with X for the inserted args, S the session, P the prompt
	}{
		{"default new", []string{"claude", "--session-id", "{session_id}", "{prompt}"}, []string{"claude", "X", "--session-id", "S", "P"}},
		{"flag=value", []string{"claude", "--model", "opus", "--resume={session_id}", "{prompt}"}, []string{"claude", "--model", "opus", "X", "--resume=S", "P"}},
		{"no session", []string{"claude", "{prompt}"}, []string{"claude", "X", "P"}},
		{"literal braces", []string{"claude", "{{session_id}}", "--session-id", "{session_id}"}, []string{"claude", "{session_id}", "X", "--session-id", "S"}},
		{"session in the prompt", []string{"agent", "go", "work on {session_id}"}, []string{"agent", "go", "X", "work on S"}},
		{"program alone", []string{"claude"}, []string{"claude", "X"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv, err := config.Expand(tt.tmpl, config.Vars{SessionID: "S", Prompt: "P"})
			if err != nil {
				t.Fatal(err)
			}
			if got := agent.InsertArgs(tt.tmpl, argv, "X"); !slices.Equal(got, tt.want) {
				t.Errorf("InsertArgs(%q) = %q; want %q", tt.tmpl, got, tt.want)
			}
		})
	}
}

func TestClaudePrepareNeedsLegion(t *testing.T) {
	k := New(defaultAgent())
	s := agenttest.Session(t, k, "plan")
	s.Legion = ""
	l, err := k.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Prepare(t.Context(), s, l); err == nil || !strings.Contains(err.Error(), "legion binary") {
		t.Errorf("Prepare without the legion binary = %v; want an error saying the hooks need it", err)
	}
}

func readClaudeJSON(t *testing.T, home string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(JSONPath(home))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v\n%s", JSONPath(home), err, data)
	}
	return m
}
