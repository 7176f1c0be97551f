package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiff: an issue's diff is its branch's commits against the default
// branch; a change on both sides of the same line is a would-be conflict
// with git's markers; computing it touches neither the main workspace nor
// the issue's worktree (their HEADs, indexes and files stay as they were).
func TestDiff(t *testing.T) {
	m := newRepo(t)
	ctx := t.Context()
	wt, err := m.Ensure(ctx, "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt.Path, "README", "hello from the branch\n")
	write(t, wt.Path, "new.txt", "a new file\n")
	run(t, wt.Path, "add", "README", "new.txt")
	run(t, wt.Path, "commit", "-q", "-m", "branch work")

	d, err := m.Diff(ctx, "DEMO-1")
	if err != nil {
		t.Fatalf("Diff = %v", err)
	}
	if d.Base != "main" || d.Branch != "legion/DEMO-1" || d.Ahead != 1 || d.Behind != 0 || d.Dirty {
		t.Errorf("Diff = base %q branch %q ahead %d behind %d dirty %v; want main, legion/DEMO-1, 1, 0, false", d.Base, d.Branch, d.Ahead, d.Behind, d.Dirty)
	}
	for _, want := range []string{"diff --git a/README b/README", "+hello from the branch", "-hello", "+++ b/new.txt"} {
		if !strings.Contains(d.Patch, want) {
			t.Errorf("Diff patch lacks %q:\n%s", want, d.Patch)
		}
	}
	if len(d.Conflicts) != 0 || d.ConflictsUnknown != "" {
		t.Errorf("Diff conflicts = %+v (%q); want none", d.Conflicts, d.ConflictsUnknown)
	}

	// The default branch changes the same line; the worktree gets an
	// uncommitted change.
	write(t, m.Repo, "README", "hello from main\n")
	run(t, m.Repo, "commit", "-q", "-am", "main work")
	write(t, wt.Path, "wip.txt", "not committed\n")
	before := snapshot(t, m.Repo, wt.Path)

	d, err = m.Diff(ctx, "DEMO-1")
	if err != nil {
		t.Fatalf("Diff = %v", err)
	}
	if d.Behind != 1 || !d.Dirty {
		t.Errorf("Diff behind %d dirty %v; want 1, true", d.Behind, d.Dirty)
	}
	if len(d.Conflicts) != 1 || d.Conflicts[0].Path != "README" {
		t.Fatalf("Diff conflicts = %+v; want README", d.Conflicts)
	}
	for _, want := range []string{"<<<<<<< main", "hello from main", "=======", "hello from the branch", ">>>>>>> legion/DEMO-1"} {
		if !strings.Contains(d.Conflicts[0].Text, want) {
			t.Errorf("conflict text lacks %q:\n%s", want, d.Conflicts[0].Text)
		}
	}
	if after := snapshot(t, m.Repo, wt.Path); after != before {
		t.Errorf("Diff touched a worktree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// snapshot is what Diff must not change in the given worktrees: HEAD, the
// status, and the files' text.
func snapshot(t *testing.T, dirs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, dir := range dirs {
		b.WriteString(dir + " " + run(t, dir, "rev-parse", "HEAD") + "\n" + run(t, dir, "status", "--porcelain") + "\n")
		for _, f := range []string{"README", "new.txt", "wip.txt"} {
			data, _ := os.ReadFile(filepath.Join(dir, f))
			b.WriteString(f + ": " + string(data))
		}
	}
	return b.String()
}

// TestDiffNoBranch: an issue without a branch is ErrNoBranch, naming it;
// a bad identifier is refused before git runs.
func TestDiffNoBranch(t *testing.T) {
	m := newRepo(t)
	_, err := m.Diff(t.Context(), "DEMO-9")
	if !errors.Is(err, ErrNoBranch) || !strings.Contains(err.Error(), "legion/DEMO-9") {
		t.Errorf("Diff(DEMO-9) = %v; want ErrNoBranch naming legion/DEMO-9", err)
	}
	if _, err := m.Diff(t.Context(), "../x"); !errors.Is(err, ErrBadIssue) {
		t.Errorf("Diff(../x) = %v; want the identifier refused", err)
	}
}

// TestMergeTreeVersion: git versions before 2.38 lack merge-tree
// --write-tree, and Diff says so instead of guessing.
func TestMergeTreeVersion(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want bool // usable
	}{
		{"git version 2.39.5", true},
		{"git version 2.38.0", true},
		{"git version 3.0.0", true},
		{"git version 2.37.1 (Apple Git-136)", false},
		{"git version 1.9.1", false},
	} {
		v := gitVersion.FindStringSubmatch(tc.out)
		if v == nil {
			t.Fatalf("gitVersion does not match %q", tc.out)
		}
		if got := versionUsable(v[1], v[2]); got != tc.want {
			t.Errorf("versionUsable(%q) = %v; want %v", tc.out, got, tc.want)
		}
	}
}
