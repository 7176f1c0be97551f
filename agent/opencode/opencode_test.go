package opencode

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/config"
)

// TestOpencodePrepare: the conversation's opencode home gets Legion's
// opencode.json (the plugin, the policy's permissions) and the plugin
// (naming the legion binary and the home's files), the resumed start's
// prompt; the environment points opencode at them and keeps it off the
// network; the bypass policy adds --auto after the program; the
// implementer and its retro share the home; no key is written anywhere.
func TestOpencodePrepare(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	argvNew, argvResume, _ := config.KindArgv(config.AgentOpencode)
	k := New(config.Agent{Kind: config.AgentOpencode, New: argvNew, Resume: argvResume, Permissions: config.PermissionsAllowlist,
		PermissionsByMode: map[string]config.PermissionPolicy{"finish": config.PermissionsBypass}, Allow: []string{"Bash(make test)", "Bash(go test:*)", "Read(x)"}})
	legion := "/opt/my legion/legion"
	prepare := func(mode, dirName string) (agent.Session, agent.Launch) {
		s := agent.Session{
			ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: mode, Cwd: filepath.Join(root, "wt"), Repo: filepath.Join(root, "repo"),
			Home: home, Dir: filepath.Join(root, "state", "agents", dirName), Legion: legion,
			Env: []string{"OPENAI_API_KEY=sk-secret-key"},
		}
		s.Vars = config.Vars{SessionID: s.ID.String(), Prompt: "do it " + mode}
		return s, agenttest.Prepared(t, k, s)
	}
	s, l := prepare("implement", "w1")
	ocHome := Home(s.Dir, s.ID)
	if l.Agent != "claude" || l.SessionFile != filepath.Join(ocHome, SessionFileName) {
		t.Errorf("launch agent %q, session file %q; want claude, %s", l.Agent, l.SessionFile, filepath.Join(ocHome, SessionFileName))
	}
	if want := []string{"opencode", "--prompt", "do it implement"}; !slices.Equal(l.ArgvNew, want) {
		t.Errorf("ArgvNew = %q; want %q", l.ArgvNew, want)
	}
	for _, kv := range []string{"OPENCODE_CONFIG=" + filepath.Join(ocHome, "opencode.json"), "OPENCODE_DB=" + filepath.Join(ocHome, "opencode.db"), "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1"} {
		if !slices.Contains(l.Env, kv) {
			t.Errorf("Env %q lacks %s", l.Env, kv)
		}
	}
	var cfg struct {
		Plugin     []string       `json:"plugin"`
		Permission map[string]any `json:"permission"`
	}
	b, err := os.ReadFile(filepath.Join(ocHome, "opencode.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("opencode.json: %v\n%s", err, b)
	}
	if want := "file://" + filepath.Join(ocHome, "legion.js"); !slices.Equal(cfg.Plugin, []string{want}) {
		t.Errorf("plugin = %q; want [%s]", cfg.Plugin, want)
	}
	bash, _ := cfg.Permission["bash"].(map[string]any)
	for pat, want := range map[string]string{"*": "ask", "git *": "allow", legion + " issue *": "allow", "legion worktree finish *": "allow", "make test": "allow", "go test *": "allow"} {
		if bash[pat] != want {
			t.Errorf("permission.bash[%q] = %v; want %s (all: %v)", pat, bash[pat], want, bash)
		}
	}
	if cfg.Permission["external_directory"] != "ask" || cfg.Permission["edit"] != "allow" {
		t.Errorf("permission = %v; want edits allowed, outside directories asked", cfg.Permission)
	}
	plugin, err := os.ReadFile(filepath.Join(ocHome, "legion.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`const LEGION = "/opt/my legion/legion"`, `const SESSION_FILE = "` + filepath.Join(ocHome, SessionFileName) + `"`, `const USAGE_FILE = "` + filepath.Join(ocHome, UsageFile) + `"`, "permission.asked"} {
		if !strings.Contains(string(plugin), want) {
			t.Errorf("plugin lacks %q", want)
		}
	}
	if p, err := os.ReadFile(filepath.Join(ocHome, "resume-prompt")); err != nil || string(p) != "do it implement" {
		t.Errorf("resume-prompt = %q, %v; want the resume argv's prompt", p, err)
	}
	if node, err := exec.LookPath("node"); err == nil {
		// The plugin must at least parse as an ES module.
		mjs := filepath.Join(root, "plugin.mjs")
		if err := os.WriteFile(mjs, plugin, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(node, "--check", mjs).CombinedOutput(); err != nil {
			t.Errorf("node --check the plugin: %v\n%s", err, out)
		}
	}

	_, l = prepare("finish", "w2")
	if want := []string{"opencode", agent.Physical(filepath.Join(root, "repo")), "--auto", "--continue", "--prompt", "do it finish"}; !slices.Equal(l.ArgvResume, want) {
		t.Errorf("the finisher's (bypass) ArgvResume = %q; want %q", l.ArgvResume, want)
	}
	if _, l2 := prepare("retro", "w3"); !slices.Contains(l2.Env, "OPENCODE_DB="+filepath.Join(ocHome, "opencode.db")) {
		t.Errorf("the retro's env %q: want the implementer's opencode home %s", l2.Env, ocHome)
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "sk-secret-key") {
				t.Errorf("%s holds the API key", p)
			}
		}
		return nil
	})
}

// TestOpencodePolicies: ask allows only legion issue; bypass allows all.
func TestOpencodePolicies(t *testing.T) {
	b, err := ConfigFor("/p/legion.js", "/bin/legion", config.PermissionsAsk, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Permission map[string]any `json:"permission"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	bash := cfg.Permission["bash"].(map[string]any)
	if bash["/bin/legion issue *"] != "allow" || bash["git *"] != nil || cfg.Permission["edit"] != "ask" {
		t.Errorf("ask policy: %v", cfg.Permission)
	}
	if b, err = ConfigFor("/p/legion.js", "/bin/legion", config.PermissionsBypass, nil); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Permission["bash"] != "allow" || cfg.Permission["*"] != "allow" {
		t.Errorf("bypass policy: %v", cfg.Permission)
	}
	// The question tool is denied under every policy, by a rule after "*"
	// (opencode applies the last rule that matches a tool), and by
	// "question*", which comes after every key of the user's own config
	// (TestRealOpencodeUserQuestionRule).
	for _, p := range []config.PermissionPolicy{config.PermissionsAsk, config.PermissionsAllowlist, config.PermissionsBypass} {
		b, err := ConfigFor("/p/legion.js", "/bin/legion", p, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Permission = nil
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		star, q := bytes.Index(b, []byte(`"*":`)), bytes.Index(b, []byte(`"question": "deny"`))
		if cfg.Permission["question"] != "deny" || q < 0 || star > q || cfg.Permission["question*"] != "deny" {
			t.Errorf("%s policy: permission %v; want question and question* denied, after any \"*\" rule", p, cfg.Permission)
		}
	}
}

// TestRemoveStaleOpencodeLocks: a lock of this host whose pid is gone is
// removed; one whose pid runs, of another host, or unreadable, stays.
func TestRemoveStaleOpencodeLocks(t *testing.T) {
	dir := t.TempDir()
	host, _ := os.Hostname()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	locks := map[string]string{
		"gone.lock":  `{"token":"t","pid":` + itoa(gone.Process.Pid) + `,"hostname":"` + host + `","createdAt":"2026-11-25T00:00:00Z"}`,
		"alive.lock": `{"token":"t","pid":` + itoa(os.Getpid()) + `,"hostname":"` + host + `"}`,
		"other.lock": `{"token":"t","pid":` + itoa(gone.Process.Pid) + `,"hostname":"elsewhere"}`,
		"bad.lock":   `{"pid":`,
	}
	for name, meta := range locks {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "meta.json"), []byte(meta), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveStaleLocks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "gone.lock")}; !slices.Equal(removed, want) {
		t.Errorf("removed %q; want %q", removed, want)
	}
	for _, name := range []string{"alive.lock", "other.lock", "bad.lock"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v; want it kept", name, err)
		}
	}
	if r, err := RemoveStaleLocks(filepath.Join(dir, "none")); err != nil || r != nil {
		t.Errorf("a missing locks dir: %q, %v; want nothing, no error", r, err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// FuzzParseOpencodeLock: any meta.json is read without a panic, and only
// a positive pid with a hostname counts.
func FuzzParseOpencodeLock(f *testing.F) {
	f.Add([]byte(`{"token":"t","pid":12,"hostname":"h","createdAt":"2026-11-25T00:00:00Z"}`))
	f.Add([]byte(`{"pid":-1,"hostname":"h"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ok := parseOpencodeLock(b)
		if ok && (m.PID <= 0 || m.Hostname == "") {
			t.Errorf("parseOpencodeLock(%q) = %+v, ok", b, m)
		}
	})
}

// TestBashPattern: Claude Code's Bash rules as opencode's patterns.
func TestBashPattern(t *testing.T) {
	for rule, want := range map[string]string{"Bash(make test)": "make test", "Bash(go test:*)": "go test *", "Read(x)": "", "Bash()": "", "Bash(x": ""} {
		if got, _ := bashPattern(rule); got != want {
			t.Errorf("bashPattern(%q) = %q; want %q", rule, got, want)
		}
	}
}
