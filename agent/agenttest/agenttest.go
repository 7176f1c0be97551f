// Package agenttest holds what the tests of the agent kinds share: a
// session of a demo issue in a temp dir, the launch a kind plans and
// prepares for it, file mode checks. Only tests link it.
package agenttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
)

// TeamID is the team of the tests' sessions.
var TeamID = uuid.MustParse("6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f")

// Prepared is the launch of s by k, planned and prepared as the
// controller would (Kind.Plan, then Kind.Prepare).
func Prepared(tb testing.TB, k agent.Kind, s agent.Session) agent.Launch {
	tb.Helper()
	l, err := k.Plan(s)
	if err != nil {
		tb.Fatal(err)
	}
	if l, err = k.Prepare(tb.Context(), s, l); err != nil {
		tb.Fatal(err)
	}
	return l
}

// Session is a session of DEMO-1 in mode, with every directory in a
// temp dir of its own.
func Session(t *testing.T, k agent.Kind, mode string) agent.Session {
	t.Helper()
	root := t.TempDir()
	s := agent.Session{
		ID:     k.SessionID(TeamID, "DEMO-1", mode),
		Mode:   mode,
		Cwd:    filepath.Join(root, "worktrees", "DEMO-1"),
		Repo:   filepath.Join(root, "repo"),
		Home:   filepath.Join(root, "home"),
		Dir:    filepath.Join(root, "state", "agents", "w1"),
		Legion: "/usr/local/bin/legion",
		Env:    []string{"LEGION_ISSUE=DEMO-1"},
		LookupEnv: func(string) (string, bool) {
			return "", false
		},
	}
	for _, d := range []string{s.Cwd, s.Repo, s.Home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s.Vars = config.Vars{SessionID: s.ID.String(), Prompt: "do it", Issue: "DEMO-1", Mode: mode, Workspace: s.Cwd}
	return s
}

// FileMode fails t unless path (not followed) has mode want.
func FileMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (os.ModeType | os.ModePerm); got != want {
		t.Errorf("%s has mode %v; want %v", path, got, want)
	}
}

// GitWorktree makes a temp dir, root, with a git repository in it (branch
// main, one commit) and its worktree worktrees/X-1 on branch legion/X-1,
// as Legion lays out an issue's worktree, and names a home beside them
// (not made).
func GitWorktree(tb testing.TB) (root, repo, wt, home string) {
	tb.Helper()
	root = tb.TempDir()
	repo, wt, home = filepath.Join(root, "repo"), filepath.Join(root, "worktrees", "X-1"), filepath.Join(root, "home")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", repo},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
		{"-C", repo, "worktree", "add", "-q", "-b", "legion/X-1", wt},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			tb.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return root, repo, wt, home
}

// OutsideTmp points the test's temp dirs (TMPDIR) below ~/.cache instead
// of /tmp, which a sandboxed agent may write: what a sandbox test checks
// is refused must not lie there.
func OutsideTmp(t *testing.T) {
	t.Helper()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(home, ".cache", "legion-test")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(scratch) }) // once empty: the last test to end removes it
	t.Setenv("TMPDIR", scratch)
}

// ExpectCheck fails t unless c has status, a detail containing detail
// and a fix containing fix, and a fix at all when it is not OK.
func ExpectCheck(t *testing.T, c agent.Check, status agent.CheckStatus, detail, fix string) {
	t.Helper()
	if c.Status != status {
		t.Errorf("status = %s; want %s (detail: %s)", c.Status, status, c.Detail)
	}
	if !strings.Contains(c.Detail, detail) {
		t.Errorf("detail = %q; want it to contain %q", c.Detail, detail)
	}
	if !strings.Contains(c.Fix, fix) {
		t.Errorf("fix = %q; want it to contain %q", c.Fix, fix)
	}
	if status != agent.CheckOK && c.Fix == "" {
		t.Errorf("status %s without a fix", c.Status)
	}
}
