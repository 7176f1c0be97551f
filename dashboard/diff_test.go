package dashboard

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/controller/workspace"
)

// git runs real git in dir.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestDiffEndpoint: GET /api/issues/{team}/{id}/diff of a configured
// team's issue shows its branch's change against the default branch and
// the file a merge would leave in conflict, with git's markers, and moves
// nothing (the main workspace's HEAD and files stay); an unknown team, an
// issue without a branch and a bad identifier are refused naming them.
func TestDiffEndpoint(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is required (apt-get install git)")
		}
		t.Skip("git not installed")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
	for _, kv := range []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	repo := filepath.Join(home, "src", "web")
	if err := os.MkdirAll(repo, 0o700); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "app.txt"), []byte("version 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "app.txt")
	git(t, repo, "commit", "-q", "-m", "first")

	cfgPath := filepath.Join(home, "legion.toml")
	tm, err := config.AddTeam(cfgPath, "web", repo, "")
	if err != nil {
		t.Fatal(err)
	}
	state, err := config.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	wt, err := team.Worktrees(tm, state).Ensure(t.Context(), "WEB-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt.Path, "app.txt"), []byte("version 2 from WEB-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, wt.Path, "commit", "-q", "-am", "WEB-1's change")
	if err := os.WriteFile(filepath.Join(repo, "app.txt"), []byte("version 2 from main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "commit", "-q", "-am", "main's change")
	head := git(t, repo, "rev-parse", "HEAD")

	s, err := New(Options{Token: testToken, ConfigPath: cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string, out any) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var e errorBody
			json.NewDecoder(resp.Body).Decode(&e)
			return resp.StatusCode, e.Error
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, ""
	}

	var d workspace.Diff
	if code, msg := get("/api/issues/web/WEB-1/diff", &d); code != http.StatusOK {
		t.Fatalf("GET diff = %d %s", code, msg)
	}
	if d.Base != "main" || d.Branch != "legion/WEB-1" || d.Ahead != 1 || d.Behind != 1 {
		t.Errorf("diff = base %s branch %s ahead %d behind %d; want main, legion/WEB-1, 1, 1", d.Base, d.Branch, d.Ahead, d.Behind)
	}
	if !strings.Contains(d.Patch, "+version 2 from WEB-1") {
		t.Errorf("patch lacks the branch's change:\n%s", d.Patch)
	}
	if len(d.Conflicts) != 1 || d.Conflicts[0].Path != "app.txt" || !strings.Contains(d.Conflicts[0].Text, "<<<<<<< main") {
		t.Errorf("conflicts = %+v; want app.txt with markers", d.Conflicts)
	}
	if got := git(t, repo, "rev-parse", "HEAD"); got != head {
		t.Errorf("main's HEAD moved from %s to %s", head, got)
	}
	if st := git(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("main workspace not clean after the diff:\n%s", st)
	}

	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/api/issues/nosuch/WEB-1/diff", http.StatusNotFound, `team "nosuch"`},
		{"/api/issues/web/WEB-9/diff", http.StatusNotFound, "legion/WEB-9"},
		{"/api/issues/web/-x/diff", http.StatusBadRequest, `"-x"`},
	} {
		if code, msg := get(tc.path, nil); code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("GET %s = %d %q; want %d naming %s", tc.path, code, msg, tc.code, tc.want)
		}
	}
}
