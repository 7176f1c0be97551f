package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// breakWorktrees makes, next to the usable worktree DEMO-1, the broken
// directories a user ends up with under the team's worktree directory, and
// returns their issues with a part of git's complaint about each.
func breakWorktrees(t *testing.T, m *Manager) map[string]string {
	t.Helper()
	ctx := t.Context()
	if _, err := m.Ensure(ctx, "DEMO-1"); err != nil {
		t.Fatal(err)
	}
	// Its repository's record of it removed (rm -rf .git/worktrees/DEMO-2).
	if _, err := m.Ensure(ctx, "DEMO-2"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(m.Repo, ".git", "worktrees", "DEMO-2")); err != nil {
		t.Fatal(err)
	}
	// A plain directory, copied in or left by an interrupted clean-up.
	write(t, mkdir(t, m.Path("DEMO-3")), "notes.txt", "hello\n")
	// A .git file pointing nowhere (its repository moved).
	write(t, mkdir(t, m.Path("DEMO-4")), ".git", "gitdir: /nonexistent/.git/worktrees/DEMO-4\n")
	return map[string]string{
		"DEMO-2": filepath.Join(m.Repo, ".git", "worktrees", "DEMO-2"),
		"DEMO-3": "not a git repository",
		"DEMO-4": "/nonexistent/.git/worktrees/DEMO-4",
	}
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestListReportsBrokenWorktrees: a directory under the worktree directory
// that is not a usable worktree is listed with what is wrong and what to
// do, and the usable ones are still listed. List failed on the first one
// with git status's error.
func TestListReportsBrokenWorktrees(t *testing.T) {
	m := newRepo(t)
	// Worktrees kept inside another repository (a home directory kept in
	// git): git must not take a broken one for part of it.
	run(t, filepath.Dir(m.Dir), "init", "-q")
	broken := breakWorktrees(t, m)

	list, err := m.List(t.Context())
	if err != nil {
		t.Fatalf("List = %v; want the broken worktrees listed with their problem", err)
	}
	if len(list) != 4 {
		t.Fatalf("List = %+v; want DEMO-1 to DEMO-4", list)
	}
	for _, wt := range list {
		want, isBroken := broken[wt.Issue]
		if !isBroken {
			if wt.Problem != "" || wt.PortOffset == 0 {
				t.Errorf("usable worktree %s = %+v; want no problem and its port offset", wt.Issue, wt)
			}
			continue
		}
		for _, part := range []string{wt.Path, want, "worktree prune", "git -C " + m.Repo} {
			if !strings.Contains(wt.Problem, part) {
				t.Errorf("%s: Problem = %q; want it to say %q", wt.Issue, wt.Problem, part)
			}
		}
		if wt.Path != m.Path(wt.Issue) || wt.Branch != Branch(wt.Issue) {
			t.Errorf("broken worktree = %+v; want its path and branch", wt)
		}
	}
}
