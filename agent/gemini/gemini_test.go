package gemini

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/config"
)

// TestGeminiPrepare: the Gemini home of the conversation gets the user's
// settings.json with Legion's hooks instead of the user's, the API key's
// auth type, no update nag, the allowlist's commands, the worktree trusted
// and named; the argvs get --approval-mode yolo for bypass only; the
// implementer and its retro share the home; the key is never written.
func TestGeminiPrepare(t *testing.T) {
	root := t.TempDir()
	home, repo, wt := filepath.Join(root, "home"), filepath.Join(root, "repo"), filepath.Join(root, "wt")
	for _, d := range []string{filepath.Join(home, ".gemini"), repo, wt} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	user := `{"model": {"name": "gemini-9"}, "ui": {"theme": "Dracula"},
  "tools": {"allowed": ["run_shell_command(make)"]},
  "hooks": {"AfterAgent": [{"hooks": [{"type": "command", "command": "/usr/bin/my-own-hook"}]}]}}`
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "oauth_creds.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	argvNew, argvResume, _ := config.KindArgv(config.AgentGemini)
	k := New(config.Agent{Kind: config.AgentGemini, New: argvNew, Resume: argvResume, Permissions: config.PermissionsAllowlist,
		PermissionsByMode: map[string]config.PermissionPolicy{"finish": config.PermissionsBypass}})
	legion := "/opt/my legion/legion"
	prepare := func(mode, dirName string) (agent.Session, agent.Launch) {
		s := agent.Session{
			ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: mode, Cwd: wt, Repo: repo, Home: home,
			Dir: filepath.Join(root, "state", "agents", dirName), Legion: legion,
			Env: []string{"GEMINI_API_KEY=secret-key-value"},
		}
		s.Vars = config.Vars{SessionID: s.ID.String(), Prompt: "do it"}
		return s, agenttest.Prepared(t, k, s)
	}
	s, l := prepare("implement", "w-impl")
	gh := Home(s.Dir, s.ID)
	id := s.ID.String()
	if want := []string{"gemini", "--session-id", id, "do it"}; !slices.Equal(l.ArgvNew, want) {
		t.Errorf("ArgvNew = %q; want %q", l.ArgvNew, want)
	}
	if want := []string{"gemini", "--resume", id, "do it"}; !slices.Equal(l.ArgvResume, want) {
		t.Errorf("ArgvResume = %q; want %q", l.ArgvResume, want)
	}
	if !slices.Contains(l.Env, "GEMINI_CLI_HOME="+gh) || !slices.Contains(l.Env, "GEMINI_CLI_NO_RELAUNCH=true") || l.Agent != "claude" ||
		l.SessionFile != filepath.Join(gh, ".gemini", "tmp", "legion", "logs.json") {
		t.Errorf("launch = %+v; want GEMINI_CLI_HOME=%s, no relaunch, agent claude, session file its logs.json", l, gh)
	}
	agenttest.FileMode(t, gh, os.ModeDir|0o700)
	agenttest.FileMode(t, filepath.Join(gh, ".gemini"), os.ModeDir|0o700)
	agenttest.FileMode(t, filepath.Join(gh, ".gemini", "settings.json"), 0o600)
	if target, err := os.Readlink(filepath.Join(gh, ".gemini", "oauth_creds.json")); err != nil || target != filepath.Join(home, ".gemini", "oauth_creds.json") {
		t.Errorf("oauth_creds.json link = %q, %v; want the user's", target, err)
	}
	filepath.WalkDir(gh, func(p string, d os.DirEntry, err error) error {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), "secret-key-value") {
			t.Errorf("%s holds the API key", p)
		}
		return nil
	})

	var cfg struct {
		Model    struct{ Name string }
		UI       struct{ Theme string }
		Security struct{ Auth struct{ SelectedType string } }
		General  struct{ DisableAutoUpdate, DisableUpdateNag bool }
		Privacy  struct{ UsageStatisticsEnabled *bool }
		Tools    struct{ Allowed []string }
		Hooks    map[string][]struct {
			Hooks []struct{ Type, Command string }
		}
	}
	readJSON(t, filepath.Join(gh, ".gemini", "settings.json"), &cfg)
	if cfg.Model.Name != "gemini-9" || cfg.UI.Theme != "Dracula" {
		t.Errorf("the user's settings are not kept: %+v", cfg)
	}
	if cfg.Security.Auth.SelectedType != "gemini-api-key" || !cfg.General.DisableAutoUpdate || !cfg.General.DisableUpdateNag ||
		cfg.Privacy.UsageStatisticsEnabled == nil || *cfg.Privacy.UsageStatisticsEnabled {
		t.Errorf("settings = %+v; want the API key's auth, no update, no statistics", cfg)
	}
	if want := []string{"run_shell_command(make)"}; !slices.Equal(cfg.Tools.Allowed, want) {
		t.Errorf("tools.allowed = %q; want the user's own %q", cfg.Tools.Allowed, want)
	}
	var rules struct {
		Rule []struct {
			ToolName, Decision string
			CommandPrefix      []string
			Priority           int
		}
	}
	if _, err := toml.DecodeFile(filepath.Join(gh, ".gemini", "policies", "legion.toml"), &rules); err != nil {
		t.Fatal(err)
	}
	if len(rules.Rule) != 4 || rules.Rule[0].ToolName != "ask_user" || rules.Rule[0].Decision != "deny" ||
		rules.Rule[1].ToolName != "run_shell_command" || rules.Rule[1].Decision != "allow" ||
		!slices.Equal(rules.Rule[1].CommandPrefix, []string{legion + " issue", "legion issue", legion + " state", "legion state", legion + " worktree finish", "legion worktree finish", "git"}) ||
		rules.Rule[2].ToolName != "write_file" || rules.Rule[3].ToolName != "replace" || rules.Rule[3].Decision != "allow" {
		t.Errorf("policy rules = %+v; want ask_user denied, legion and git allowed, and the file tools", rules)
	}
	agenttest.FileMode(t, filepath.Join(gh, ".gemini", "policies", "legion.toml"), 0o600)
	if len(cfg.Hooks) != len(HookEvents) {
		t.Errorf("hooks for %d events; want %d", len(cfg.Hooks), len(HookEvents))
	}
	for _, ev := range HookEvents {
		hs := cfg.Hooks[ev]
		if len(hs) != 1 || len(hs[0].Hooks) != 1 || hs[0].Hooks[0].Command != "'/opt/my legion/legion' hook" || hs[0].Hooks[0].Type != "command" {
			t.Errorf("hooks.%s = %+v; want one running legion hook (and not the user's)", ev, hs)
		}
	}
	var trust map[string]string
	readJSON(t, filepath.Join(gh, ".gemini", "trustedFolders.json"), &trust)
	if trust[agent.Physical(wt)] != "TRUST_FOLDER" {
		t.Errorf("trustedFolders.json = %v; want %s trusted", trust, wt)
	}
	var projects struct{ Projects map[string]string }
	readJSON(t, filepath.Join(gh, ".gemini", "projects.json"), &projects)
	if projects.Projects[agent.Physical(wt)] != "legion" {
		t.Errorf("projects.json = %v; want %s named legion", projects, wt)
	}

	retro, lr := prepare("retro", "w-retro")
	if Home(retro.Dir, retro.ID) != gh || lr.SessionFile != l.SessionFile {
		t.Errorf("the retro's Gemini home is %s; want the implementer's %s", Home(retro.Dir, retro.ID), gh)
	}
	_, lf := prepare("finish", "w-finish")
	rules.Rule = nil
	if _, err := toml.DecodeFile(filepath.Join(gh, ".gemini", "policies", "legion.toml"), &rules); err != nil {
		t.Fatal(err)
	}
	if len(rules.Rule) != 1 || rules.Rule[0].ToolName != "ask_user" || rules.Rule[0].Decision != "deny" {
		t.Errorf("policy rules after a bypass start = %+v; want only ask_user denied (yolo allows the rest)", rules)
	}
	if want := []string{"/usr/bin/env", "-C", agent.Physical(repo), "gemini", "--approval-mode", "yolo", "--session-id", id, "do it"}; !slices.Equal(lf.ArgvNew, want) {
		t.Errorf("finisher ArgvNew = %q; want %q", lf.ArgvNew, want)
	}

	// Settings the CLI could read but Legion cannot are an error naming them.
	bad := filepath.Join(home, ".gemini", "settings.json")
	if err := os.WriteFile(bad, []byte("{ // a comment\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Prepare(t.Context(), s, l); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Prepare with a commented %s: %v; want an error naming it", bad, err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
