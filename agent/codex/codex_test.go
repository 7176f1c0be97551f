package codex

import (
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

// TestCodexPrepare: the Codex home of the conversation gets the user's
// config.toml with Legion's hooks instead of the user's, the workspace
// trusted besides the user's own projects, and a link to the user's
// auth.json; the argvs get Legion's flags after the program, the finisher
// --cd to the main checkout; the implementer and its retro share the home.
func TestCodexPrepare(t *testing.T) {
	root := t.TempDir()
	home, repo := filepath.Join(root, "home"), filepath.Join(root, "repo")
	for _, d := range []string{filepath.Join(home, ".codex"), repo} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	user := `model = "o9"
notify = ["/bin/true"]

[projects."/elsewhere"]
trust_level = "trusted"

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "/usr/bin/my-own-hook"
`
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".codex", "auth.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	argvNew, argvResume, _ := config.KindArgv(config.AgentCodex)
	k := New(config.Agent{Kind: config.AgentCodex, New: argvNew, Resume: argvResume, Permissions: config.PermissionsAllowlist,
		PermissionsByMode: map[string]config.PermissionPolicy{"finish": config.PermissionsBypass}})
	legion := "/opt/my legion/legion"
	prepare := func(mode, dirName string) (agent.Session, agent.Launch) {
		s := agent.Session{
			ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: mode, Cwd: filepath.Join(root, "wt"), Repo: repo, Home: home,
			Dir: filepath.Join(root, "state", "agents", dirName), Legion: legion,
		}
		s.Vars = config.Vars{SessionID: s.ID.String(), Prompt: "do it"}
		return s, agenttest.Prepared(t, k, s)
	}
	s, l := prepare("implement", "w-impl")
	codexHome := Home(s.Dir, s.ID)
	if want := []string{"codex", "--no-daemon", "--dangerously-bypass-hook-trust", "do it"}; !slices.Equal(l.ArgvNew, want) {
		t.Errorf("ArgvNew = %q; want %q", l.ArgvNew, want)
	}
	if want := []string{"codex", "--no-daemon", "--dangerously-bypass-hook-trust", "resume", "--last", "do it"}; !slices.Equal(l.ArgvResume, want) {
		t.Errorf("ArgvResume = %q; want %q", l.ArgvResume, want)
	}
	if !slices.Contains(l.Env, "CODEX_HOME="+codexHome) || l.Agent != "claude" || l.SessionFile != filepath.Join(codexHome, "history.jsonl") {
		t.Errorf("launch = %+v; want CODEX_HOME=%s, agent claude, session file its history.jsonl", l, codexHome)
	}
	agenttest.FileMode(t, codexHome, os.ModeDir|0o700)
	agenttest.FileMode(t, filepath.Join(codexHome, "config.toml"), 0o600)
	if target, err := os.Readlink(filepath.Join(codexHome, "auth.json")); err != nil || target != filepath.Join(home, ".codex", "auth.json") {
		t.Errorf("auth.json link = %q, %v; want the user's", target, err)
	}

	var cfg struct {
		Model    string
		Notify   []string
		Projects map[string]struct {
			TrustLevel string `toml:"trust_level"`
		}
		Hooks map[string][]struct {
			Hooks []struct {
				Type, Command string
				Timeout       int64
			}
		}
	}
	if _, err := toml.DecodeFile(filepath.Join(codexHome, "config.toml"), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Model != "o9" || len(cfg.Notify) != 1 || cfg.Projects["/elsewhere"].TrustLevel != "trusted" {
		t.Errorf("the user's settings are not kept: %+v", cfg)
	}
	if cfg.Projects[agent.Physical(repo)].TrustLevel != "trusted" {
		t.Errorf("projects = %+v; want %s trusted", cfg.Projects, repo)
	}
	if len(cfg.Hooks) != len(HookEvents) {
		t.Errorf("hooks for %d events; want %d", len(cfg.Hooks), len(HookEvents))
	}
	for _, ev := range HookEvents {
		hs := cfg.Hooks[ev]
		if len(hs) != 1 || len(hs[0].Hooks) != 1 || hs[0].Hooks[0].Command != "'/opt/my legion/legion' hook" || hs[0].Hooks[0].Type != "command" {
			t.Errorf("hooks.%s = %+v; want one running legion hook (and not the user's)", ev, hs)
		}
	}
	if got := cfg.Hooks["PermissionRequest"][0].Hooks[0].Timeout; got != 86400 {
		t.Errorf("PermissionRequest hook timeout = %d; want 86400", got)
	}

	retro, lr := prepare("retro", "w-retro")
	if Home(retro.Dir, retro.ID) != codexHome || lr.SessionFile != l.SessionFile {
		t.Errorf("the retro's Codex home is %s; want the implementer's %s", Home(retro.Dir, retro.ID), codexHome)
	}
	_, lf := prepare("finish", "w-finish")
	if want := []string{"codex", "--no-daemon", "--dangerously-bypass-hook-trust", "--cd", agent.Physical(repo), "--dangerously-bypass-approvals-and-sandbox", "do it"}; !slices.Equal(lf.ArgvNew, want) {
		t.Errorf("finisher ArgvNew = %q; want %q", lf.ArgvNew, want)
	}

	// Without the user's auth.json the link left from before goes.
	if err := os.Remove(filepath.Join(home, ".codex", "auth.json")); err != nil {
		t.Fatal(err)
	}
	prepare("implement", "w-impl")
	if _, err := os.Lstat(filepath.Join(codexHome, "auth.json")); !os.IsNotExist(err) {
		t.Errorf("auth.json link after the user's went: %v; want none", err)
	}

	// A config.toml Codex cannot read either is an error naming it.
	bad := filepath.Join(home, ".codex", "config.toml")
	if err := os.WriteFile(bad, []byte("model = \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Vars.Prompt = "x"
	if _, err := k.Prepare(t.Context(), s, l); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Prepare with a broken %s: %v; want an error naming it", bad, err)
	}
}

// TestCodexPrepareInPod: in a pod Codex runs with --sandbox
// danger-full-access and no workspace-write settings: its own sandbox
// cannot be drawn there (X38), and the pod confines it. On a machine it
// keeps its sandbox; the bypass policy is the same in both.
func TestCodexPrepareInPod(t *testing.T) {
	root := t.TempDir()
	argvNew, argvResume, _ := config.KindArgv(config.AgentCodex)
	for _, tc := range []struct {
		pod    bool
		policy config.PermissionPolicy
		full   bool
	}{
		{false, config.PermissionsAllowlist, false},
		{true, config.PermissionsAllowlist, true},
		{true, config.PermissionsAsk, true},
		{true, config.PermissionsBypass, false},
	} {
		k := New(config.Agent{Kind: config.AgentCodex, New: argvNew, Resume: argvResume, Permissions: tc.policy})
		s := agent.Session{
			ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: "implement", Cwd: filepath.Join(root, "wt"), Repo: filepath.Join(root, "repo"),
			Home: filepath.Join(root, "home"), Dir: filepath.Join(root, "state", "agents", "w"), Legion: "/bin/legion", Pod: tc.pod,
		}
		s.Vars = config.Vars{SessionID: s.ID.String(), Prompt: "do it"}
		l := agenttest.Prepared(t, k, s)
		full := slices.Contains(l.ArgvNew, "danger-full-access") && slices.Contains(l.ArgvResume, "danger-full-access")
		b, err := os.ReadFile(filepath.Join(Home(s.Dir, s.ID), "config.toml"))
		if err != nil {
			t.Fatal(err)
		}
		ww := strings.Contains(string(b), "sandbox_workspace_write")
		if full != tc.full || ww != (tc.policy != config.PermissionsBypass && !tc.full) {
			t.Errorf("pod %t, %s: argv %q, workspace-write settings %t; want danger-full-access %t", tc.pod, tc.policy, l.ArgvNew, ww, tc.full)
		}
	}
}
