package kinds

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude"
	"github.com/legion-dev/legion/config"
)

// podSession is a Claude Code session with its paths under root, as a
// pod's would be under /.
func podSession(t *testing.T, root string) (config.Agent, agent.Session) {
	t.Helper()
	a := config.Agent{Kind: config.AgentClaude, New: []string{"claude", "--session-id", "{session_id}", "{prompt}"}, Resume: []string{"claude", "--resume", "{session_id}"}, Permissions: config.PermissionsSandbox}
	id := uuid.New()
	s := agent.Session{
		ID: id, Mode: "implement", Vars: config.Vars{SessionID: id.String(), Issue: "ENG-7", Mode: "implement", Prompt: "do it"},
		Cwd: filepath.Join(root, "work", "ENG-7"), Repo: filepath.Join(root, "repo"), Home: filepath.Join(root, "home"),
		Dir: filepath.Join(root, "state", "agents", id.String()), Legion: "/opt/legion/legion",
		Env: []string{"LEGION_ISSUE=ENG-7"}, Pod: true,
	}
	for _, d := range []string{s.Cwd, s.Repo, s.Home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return a, s
}

// TestPreparePod: the controller's plan for a pod writes nothing, and the
// pod's `legion agent prepare` on it writes the kind's files (Claude
// Code's settings with its hooks, 0600, the dialog answers in
// ~/.claude.json, merged with what is there) and checks the launch is
// the planned one; a plan whose launch the pod would not give fails,
// naming the file.
func TestPreparePod(t *testing.T) {
	root := t.TempDir()
	a, s := podSession(t, root)
	kind, err := For(a)
	if err != nil {
		t.Fatal(err)
	}
	planned, err := kind.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	l, data, err := agent.PlanForPod(t.Context(), kind, a, s, planned)
	if err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(s.Dir, claude.SettingsFileName)
	if _, err := os.Stat(s.Dir); err == nil {
		t.Fatalf("PlanForPod made %s: want nothing written where the controller plans", s.Dir)
	}
	if !slices.Contains(l.ArgvNew, settings) || !slices.Contains(l.ArgvNew, "manual") || l.Sandbox != nil || slices.Contains(l.Env, "IS_SANDBOX=1") {
		t.Errorf("launch argv %q env %q sandbox %v; want --settings %s, the sandbox policy as allowlist (manual) and no sandbox in a pod", l.ArgvNew, l.Env, l.Sandbox, settings)
	}
	// What the agent wrote into ~/.claude.json before stays.
	cj := filepath.Join(s.Home, ".claude.json")
	if err := os.WriteFile(cj, []byte(`{"numStartups": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, agent.PodPrepareFile)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := PreparePod(t.Context(), file); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(settings)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("settings %s: %v, %v; want a 0600 file", settings, fi, err)
	}
	b, err := os.ReadFile(settings)
	if err != nil || !strings.Contains(string(b), "/opt/legion/legion hook") {
		t.Errorf("settings %s: %v\n%s; want hooks running /opt/legion/legion hook", settings, err, b)
	}
	var doc map[string]any
	b, err = os.ReadFile(cj)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	projects, _ := doc["projects"].(map[string]any)
	if doc["numStartups"] != float64(7) || projects[s.Repo] == nil {
		t.Errorf("~/.claude.json = %s; want the agent's numStartups kept and the dialog answers of %s", b, s.Repo)
	}

	// A plan whose wanted launch is not what the pod prepares.
	var p agent.PodPrepare
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	p.Want.ArgvNew = append(p.Want.ArgvNew, "--other")
	bad, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := PreparePod(t.Context(), file); err == nil || !strings.Contains(err.Error(), "is not the controller's") {
		t.Errorf("PreparePod of a plan with another launch: %v; want the two launches named", err)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"not json", "settings", "want the JSON the controller writes"},
		{"unknown field", `{"agent":{},"bogus":1}`, "unknown field"},
		{"not for a pod", `{"session":{"Cwd":"/a","Repo":"/b","Home":"/c","Dir":"/d"}}`, "want a session for a pod"},
		{"relative", `{"session":{"Pod":true,"Cwd":"a","Repo":"/b","Home":"/c","Dir":"/d"}}`, "want an absolute path"},
		{"two", `{"session":{"Pod":true,"Cwd":"/a","Repo":"/b","Home":"/c","Dir":"/d"}} {}`, "found more after it"},
		{"home outside", `{"session":{"Pod":true,"Cwd":"/a","Repo":"/b","Home":"/c","Dir":"/d"},"home":{"../etc/passwd":""}}`, "want a path under the pod's home"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := agent.DecodePodPrepare([]byte(tc.data), file); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
				t.Errorf("DecodePodPrepare(%s) = %v; want an error naming %s and saying %q", tc.data, err, file, tc.want)
			}
		})
	}
}

// FuzzDecodePodPrepare: any bytes decode to a pod's plan with absolute
// paths, or to an error naming the file.
func FuzzDecodePodPrepare(f *testing.F) {
	f.Add([]byte(`{"session":{"Pod":true,"Cwd":"/a","Repo":"/b","Home":"/c","Dir":"/d"}}`))
	f.Add([]byte(`{"agent":{"Kind":"claude"},"session":{"Pod":true},"planned":{},"want":{}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := agent.DecodePodPrepare(data, "/run/legion-spec/agent-prepare.json")
		if err != nil {
			if !strings.Contains(err.Error(), "/run/legion-spec/agent-prepare.json") {
				t.Errorf("error %v does not name the file", err)
			}
			return
		}
		s := p.Session
		if !s.Pod || s.PlanOnly || !filepath.IsAbs(s.Cwd) || !filepath.IsAbs(s.Repo) || !filepath.IsAbs(s.Home) || !filepath.IsAbs(s.Dir) {
			t.Errorf("DecodePodPrepare(%q) = %+v, nil; want a pod's session with absolute paths", data, s)
		}
		for rel := range p.Home {
			if !filepath.IsLocal(rel) {
				t.Errorf("DecodePodPrepare(%q) has the user's file %q; want only paths under the pod's home", data, rel)
			}
		}
	})
}

// TestPreparePodKinds: Codex, Gemini CLI and opencode as TestPreparePod
// has Claude Code: the controller's plan for a pod writes nothing (each
// kind's Prepare wrote its home where the controller planned, a path of
// the pod's, before PlanOnly held for them), and the pod's `legion agent
// prepare`, run in the agent's environment (which holds what the launch
// adds, Codex's CODEX_HOME), makes the kind's files from the user's own
// config: read from CODEX_HOME, Codex's config.toml had no model
// provider and Codex showed its sign-in dialog in the pod (TestKubeKinds
// found both). The user's config is the one on the controller's machine
// (its HOME), shipped in the plan (agent.UserConfiger): the pod's home
// starts empty, as a new issue's volume does, and gets the user's file
// (0600) before the kind's files are made from it.
func TestPreparePodKinds(t *testing.T) {
	for _, tc := range []struct {
		kind        config.AgentKind
		user, value string // a user's config file under home and what of it the session's must hold
		made        string // a file of the session's home ("": only the user's file in the pod's home)
	}{
		{config.AgentCodex, ".codex/config.toml", `model_provider = "fake"`, "config.toml"},
		{config.AgentGemini, ".gemini/settings.json", `"name":"fake-model"`, ".gemini/settings.json"},
		{config.AgentOpencode, ".config/opencode/opencode.json", `"name":"fake-provider"`, ""},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			root := t.TempDir()
			_, s := podSession(t, root)
			argv, resume, _ := config.KindArgv(tc.kind)
			a := config.Agent{Kind: tc.kind, New: argv, Resume: resume, Permissions: config.PermissionsAllowlist}
			userHome := t.TempDir() // the controller's machine's
			t.Setenv("HOME", userHome)
			t.Setenv("XDG_CONFIG_HOME", "")
			t.Setenv("CODEX_HOME", "")
			{
				user := filepath.Join(userHome, tc.user)
				if err := os.MkdirAll(filepath.Dir(user), 0o700); err != nil {
					t.Fatal(err)
				}
				data := tc.value + "\n"
				if strings.HasSuffix(user, ".json") {
					data = `{"model":{` + tc.value + `}}`
				}
				if err := os.WriteFile(user, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			kind, err := For(a)
			if err != nil {
				t.Fatal(err)
			}
			planned, err := kind.Plan(s)
			if err != nil {
				t.Fatal(err)
			}
			l, data, err := agent.PlanForPod(t.Context(), kind, a, s, planned)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Dir(s.Dir)); err == nil {
				t.Fatalf("PlanForPod made %s: want nothing written where the controller plans", filepath.Dir(s.Dir))
			}
			file := filepath.Join(root, agent.PodPrepareFile)
			if err := os.WriteFile(file, data, 0o600); err != nil {
				t.Fatal(err)
			}
			// The prepare command's environment: the agent's.
			for _, kv := range l.Env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			if err := PreparePod(t.Context(), file); err != nil {
				t.Fatal(err)
			}
			shipped := filepath.Join(s.Home, tc.user)
			fi, err := os.Stat(shipped)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("the user's %s in the pod's home: %v, %v; want it shipped, 0600", tc.user, fi, err)
			}
			if tc.made == "" {
				return
			}
			entries, err := os.ReadDir(filepath.Dir(s.Dir))
			if err != nil || len(entries) != 1 {
				t.Fatalf("the pod's agents directory: %v, %v; want the conversation's home", entries, err)
			}
			b, err := os.ReadFile(filepath.Join(filepath.Dir(s.Dir), entries[0].Name(), tc.made))
			if err != nil || !strings.Contains(strings.ReplaceAll(string(b), " ", ""), strings.ReplaceAll(tc.value, " ", "")) {
				t.Errorf("the session's %s: %v\n%s\nwant it made in the pod from the user's config (%q)", tc.made, err, b, tc.value)
			}
		})
	}
}
