package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestAddTeamNewFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "legion", "legion.toml")
	ws := t.TempDir()
	tm, err := AddTeam(path, "demo", ws, "")
	if err != nil {
		t.Fatalf("AddTeam: %v", err)
	}
	if tm.Name != "demo" || tm.Workspace != ws || tm.ID.Version() != 4 || tm.WIPLimit != 1 {
		t.Errorf("AddTeam = %+v; want team demo in %s with a random id and defaults", tm, ws)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "[teams.demo]\nid = \"" + tm.ID.String() + "\"\nworkspace = " + quoteString(ws) + "\n"
	if string(data) != want {
		t.Errorf("file = %q; want %q", data, want)
	}
	for p, mode := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("mode of %s = %v; want %v", p, got, mode)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("config dir holds %d entries; want only legion.toml (no temp files left)", len(entries))
	}
}

func TestAddTeamKeepsExistingText(t *testing.T) {
	existing := "# my settings, keep me\n[defaults]\nwip_limit = 2 # two at a time\n\n[teams.first]  # the first\nid = \"" + demoID + "\"\nworkspace = \"@WS@\"\n# trailing comment, no newline"
	path, ws := writeConfig(t, existing)
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	name := "my team/ü \"quoted\" \\ back"
	tm, err := AddTeam(path, name, ws+"/../"+filepath.Base(ws), "")
	if err != nil {
		t.Fatalf("AddTeam: %v", err)
	}
	after, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(after), string(before)) {
		t.Errorf("AddTeam changed the existing text:\nbefore %q\nafter  %q", before, after)
	}
	added := string(after[len(before):])
	wantAdded := "\n\n[teams.\"my team/ü \\\"quoted\\\" \\\\ back\"]\nid = \"" + tm.ID.String() + "\"\nworkspace = " + quoteString(ws) + "\n"
	if added != wantAdded {
		t.Errorf("appended %q; want %q", added, wantAdded)
	}
	if tm.WIPLimit != 2 || tm.Workspace != ws {
		t.Errorf("AddTeam = %+v; want [defaults] applied and the workspace made clean and absolute", tm)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode after AddTeam = %v; want the file's 0640 kept", fi.Mode().Perm())
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load after AddTeam: %v", err)
	}
	if len(cfg.Teams) != 2 {
		t.Errorf("Load after AddTeam has %d teams; want 2", len(cfg.Teams))
	}
	if got, ok := cfg.Team(name); !ok || got.ID != tm.ID {
		t.Errorf("Team(%q) = %v, %v; want id %v", name, got.ID, ok, tm.ID)
	}
}

func TestAddTeamRefuses(t *testing.T) {
	path, ws := writeConfig(t, team)
	broken, _ := writeConfig(t, "[teams.x]\nid = 5\n")
	tests := []struct {
		name, path, team, ws string
		want                 string // substring of the error
		is                   error
	}{
		{name: "duplicate", path: path, team: "demo", ws: ws, want: `add team "demo" to ` + path + `: team already exists`, is: ErrTeamExists},
		{name: "empty name", path: path, team: "", ws: ws, want: "add team: invalid team name: expected a non-empty name"},
		{name: "control character", path: path, team: "a\nb", ws: ws, want: `add team: invalid team name "a\nb": expected no control characters`},
		{name: "too long", path: path, team: strings.Repeat("x", 57), ws: ws, want: "57 bytes, expected at most 56"},
		{name: "missing workspace", path: path, team: "new", ws: ws + "/nope", want: `add team "new": workspace: directory ` + ws + `/nope does not exist`},
		{name: "broken file", path: broken, team: "new", ws: ws, want: broken + ":2: teams.x.id: expected a string, got integer 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := os.ReadFile(tt.path)
			_, err := AddTeam(tt.path, tt.team, tt.ws, "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AddTeam(%q) = %v; want an error containing %q", tt.team, err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("AddTeam(%q) = %v; want errors.Is %v", tt.team, err, tt.is)
			}
			after, _ := os.ReadFile(tt.path)
			if string(before) != string(after) {
				t.Errorf("AddTeam(%q) failed but changed the file", tt.team)
			}
		})
	}
}

func TestAddTeamFollowsSymlink(t *testing.T) {
	real, ws := writeConfig(t, "# real file\n")
	link := filepath.Join(t.TempDir(), "legion.toml")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := AddTeam(link, "demo", ws, ""); err != nil {
		t.Fatalf("AddTeam via symlink: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("AddTeam replaced the symlink %s with a file", link)
	}
	if data, _ := os.ReadFile(real); !strings.Contains(string(data), "[teams.demo]") {
		t.Errorf("AddTeam did not write through the symlink: %q", data)
	}
}

func TestAddTeamConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "legion.toml")
	ws := t.TempDir()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() { // ends when AddTeam returns
			defer wg.Done()
			_, errs[i] = AddTeam(path, "team"+string(rune('a'+i)), ws, "")
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("AddTeam #%d: %v", i, err)
		}
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Teams) != n {
		t.Errorf("after %d concurrent AddTeams the file has %d teams; want %d", n, len(cfg.Teams), n)
	}
}

func TestQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b", `back\slash`, "tab\tnl\ncr\r", "\x00\x1f\x7f", "ü €  😀", "my team/x.y"} {
		text := "[t." + quoteKey(s) + "]\nv = " + quoteString(s) + "\n"
		var v map[string]map[string]map[string]string
		if _, err := toml.Decode(text, &v); err != nil {
			t.Errorf("quoting %q gives invalid TOML %q: %v", s, text, err)
			continue
		}
		if got := v["t"][s]["v"]; got != s {
			t.Errorf("round trip of %q = %q", s, got)
		}
	}
}

// TestAddTeamAgentPath: given the agent program's absolute path, the team's
// agent.new and agent.resume are the defaults with that program; a path
// with quotes and spaces survives TOML.
func TestAddTeamAgentPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "legion.toml")
	agent := `/home/a b/.local/bin/"claude"`
	tm, err := AddTeam(path, "demo", t.TempDir(), agent)
	if err != nil {
		t.Fatalf("AddTeam: %v", err)
	}
	wantNew := append([]string{agent}, defaultAgentNew[1:]...)
	wantResume := append([]string{agent}, defaultAgentResume[1:]...)
	if !slices.Equal(tm.Agent.New, wantNew) || !slices.Equal(tm.Agent.Resume, wantResume) {
		t.Errorf("AddTeam(agent %q): agent.new = %q, agent.resume = %q; want %q, %q", agent, tm.Agent.New, tm.Agent.Resume, wantNew, wantResume)
	}
	if _, err := AddTeam(path, "other", t.TempDir(), "claude"); err == nil || !strings.Contains(err.Error(), "want an absolute") {
		t.Errorf(`AddTeam(agent "claude") = %v; want an error asking for an absolute path`, err)
	}
}

func TestAddTeamOfKind(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(t.TempDir(), "legion.toml")
	tm, err := AddTeamOfKind(path, "api", ws, AgentCodex, "/opt/codex/bin/codex")
	if err != nil {
		t.Fatal(err)
	}
	if tm.Agent.Kind != AgentCodex || !slices.Equal(tm.Agent.New, []string{"/opt/codex/bin/codex", "{prompt}"}) || tm.Agent.Resume[0] != "/opt/codex/bin/codex" {
		t.Errorf("AddTeamOfKind(codex) = %+v; want kind codex with codex's argv and the program's path", tm.Agent)
	}
	if _, err := AddTeamOfKind(path, "x", ws, "aider", ""); err == nil || !strings.Contains(err.Error(), "agent kind") {
		t.Errorf("AddTeamOfKind(aider) = %v; want an error naming the kinds", err)
	}
}

// TestAddTeamGitHub: --github writes a team whose tracker, and so whose
// review source, is the repository's; a malformed repository is refused
// and nothing written.
func TestAddTeamGitHub(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(t.TempDir(), "legion.toml")
	tm, err := AddTeamWith(path, NewTeam{Name: "web", Workspace: ws, GitHub: "acme/web"})
	if err != nil {
		t.Fatal(err)
	}
	if tm.Tracker != TrackerGitHub || tm.Review != ReviewGitHub || tm.GitHub.Repo != "acme/web" || tm.GitHub.Label != "legion" || tm.GitHub.StatusRetro != "legion:retro" {
		t.Errorf("AddTeamWith(--github acme/web) = tracker %s, review %s, github %+v; want GitHub's issues, reviews on its pull requests, the default labels", tm.Tracker, tm.Review, tm.GitHub)
	}
	for _, bad := range []string{"acme", "acme/", "/web", "acme/web/x", "acme/we b"} {
		if _, err := AddTeamWith(path, NewTeam{Name: "x", Workspace: ws, GitHub: bad}); err == nil || !strings.Contains(err.Error(), "want owner/name") {
			t.Errorf("AddTeamWith(--github %q) = %v; want a refusal asking for owner/name", bad, err)
		}
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Team("x"); ok {
		t.Errorf("a refused team was written")
	}
}
