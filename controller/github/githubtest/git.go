package githubtest

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ServeGit makes the fake a git host too: the repository, cloned bare from
// the repository at from (its branches as they are), is served over
// git's smart HTTP protocol at URL/OWNER/REPO.git by git-http-backend(1),
// with GitHub's authentication (HTTP basic, any user name, the token as
// password). Pull requests then need their branches there, and a merge
// through the API merges in it. It returns the bare repository's path.
func (s *Server) ServeGit(t testing.TB, from string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, s.Owner, s.Repo+".git")
	if out, err := exec.Command("git", "clone", "-q", "--bare", from, dir).CombinedOutput(); err != nil {
		t.Fatalf("githubtest: clone %s: %v\n%s", from, err, out)
	}
	s.mu.Lock()
	s.git = dir
	s.mu.Unlock()
	return dir
}

// serveGit serves git's smart HTTP protocol for the repository.
func (s *Server) serveGit(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	dir, token := s.git, s.Token
	s.mu.Unlock()
	if dir == "" {
		http.NotFound(w, r)
		return
	}
	user, pass, ok := r.BasicAuth()
	if !ok || pass != token {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(w, "Invalid username or token. Password authentication is not supported for Git operations.", http.StatusUnauthorized)
		return
	}
	git, err := exec.LookPath("git")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		Dir:  dir,
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(filepath.Dir(dir)),
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=" + user, // enables receive-pack
			"HOME=" + os.Getenv("HOME"),
		},
	}
	s.mu.Lock() // one git process at a time, as a merge through the API
	defer s.mu.Unlock()
	h.ServeHTTP(w, r)
}

// gitIn runs git in the bare repository.
func (s *Server) gitIn(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = s.git
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=GitHub", "GIT_AUTHOR_EMAIL=noreply@github.com",
		"GIT_COMMITTER_NAME=GitHub", "GIT_COMMITTER_EMAIL=noreply@github.com")
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// checkRefs is GitHub's refusal of a pull request from head into base,
// or "" (always "" without ServeGit).
func (s *Server) checkRefs(base, head string) string {
	if s.git == "" {
		return ""
	}
	for _, b := range []string{base, head} {
		if _, err := s.gitIn("rev-parse", "--verify", "-q", "refs/heads/"+b); err != nil {
			return fmt.Sprintf("Head sha can't be blank, Base sha can't be blank, No commits between %s and %s, Head ref must be a branch", base, head)
		}
	}
	if n, _ := s.gitIn("rev-list", "--count", base+".."+head); n == "0" {
		return fmt.Sprintf("No commits between %s and %s", base, head)
	}
	return ""
}

// mergeGit merges pr's branch into its base in the served repository
// with method, as GitHub does: MERGE makes a merge commit, SQUASH one
// commit of the branch's changes on the base, REBASE replays the branch's
// commits on it. A conflict is GitHub's refusal. Without ServeGit, or for
// a pull request with no base (AddPR), it does nothing.
func (s *Server) mergeGit(pr *PR, method string) string {
	if s.git == "" || pr.Base == "" {
		return ""
	}
	base, head := "refs/heads/"+pr.Base, "refs/heads/"+pr.Branch
	conflict := func() string {
		pr.Mergeable = "CONFLICTING"
		return "Pull Request is not mergeable: merge conflict between base and head"
	}
	var commit string
	if method == "REBASE" {
		var msg string
		if commit, msg = s.rebase(base, head); msg != "" {
			return msg
		}
		if commit == "" {
			return conflict()
		}
	} else {
		tree, err := s.gitIn("merge-tree", "--write-tree", base, head)
		if err != nil {
			return conflict()
		}
		tree, _, _ = strings.Cut(tree, "\n")
		args := []string{"commit-tree", tree, "-p", base, "-p", head, "-m", fmt.Sprintf("Merge pull request #%d from %s/%s\n\n%s", pr.Number, s.Owner, pr.Branch, pr.Title)}
		if method == "SQUASH" {
			args = []string{"commit-tree", tree, "-p", base, "-m", fmt.Sprintf("%s (#%d)", pr.Title, pr.Number)}
		}
		if commit, err = s.gitIn(args...); err != nil {
			return "merge: " + err.Error()
		}
	}
	if _, err := s.gitIn("update-ref", base, commit); err != nil {
		return "merge: " + err.Error()
	}
	return ""
}

// rebase replays the commits of head not in base on base, in a
// temporary worktree of the served repository, and returns the last
// commit: "" on a conflict, msg on any other failure.
func (s *Server) rebase(base, head string) (commit, msg string) {
	dir, err := os.MkdirTemp("", "githubtest-rebase-")
	if err != nil {
		return "", "rebase: " + err.Error()
	}
	defer os.RemoveAll(dir)
	tree := filepath.Join(dir, "tree")
	if _, err := s.gitIn("worktree", "add", "-q", "--detach", tree, base); err != nil {
		return "", "rebase: " + err.Error()
	}
	defer s.gitIn("worktree", "remove", "--force", tree)
	commits, err := s.gitIn("rev-list", "--reverse", "--no-merges", base+".."+head)
	if err != nil {
		return "", "rebase: " + err.Error()
	}
	for _, c := range strings.Fields(commits) {
		if _, err := s.gitIn("-C", tree, "cherry-pick", "--allow-empty", "--keep-redundant-commits", c); err != nil {
			return "", ""
		}
	}
	if commit, err = s.gitIn("-C", tree, "rev-parse", "HEAD"); err != nil {
		return "", "rebase: " + err.Error()
	}
	return commit, ""
}

// GitLog is `git log --format=%s REF` in the served repository.
func (s *Server) GitLog(ref string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gitIn("log", "--format=%s", ref)
}

// PR returns a copy of the pull request of branch (the newest), and
// whether there is one.
func (s *Server) PR(branch string) (PR, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.PRs) - 1; i >= 0; i-- {
		if s.PRs[i].Branch == branch {
			pr := *s.PRs[i]
			pr.Labels = append([]Label(nil), pr.Labels...)
			return pr, true
		}
	}
	return PR{}, false
}
