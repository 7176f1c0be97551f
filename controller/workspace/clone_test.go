package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newOrigin makes a bare repository with one commit on main: the team's
// repository that each issue's pod clones.
func newOrigin(t *testing.T) string {
	t.Helper()
	src := newRepo(t)
	bare := filepath.Join(t.TempDir(), "origin.git")
	run(t, src.Repo, "clone", "-q", "--bare", src.Repo, bare)
	return bare
}

// podClone is one issue's volume: a Clone of origin and its worktrees.
func podClone(t *testing.T, origin string) *Manager {
	t.Helper()
	vol := t.TempDir()
	m := &Manager{Repo: filepath.Join(vol, "repo"), Dir: filepath.Join(vol, "work")}
	if err := Clone(t.Context(), origin, m.Repo); err != nil {
		t.Fatal(err)
	}
	return m
}

// commitIn commits file name with text in issue's worktree of m.
func commitIn(t *testing.T, m *Manager, issue, name, text string) {
	t.Helper()
	wt, err := m.Ensure(t.Context(), issue)
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt.Path, name, text)
	run(t, wt.Path, "add", name)
	run(t, wt.Path, "commit", "-q", "-m", issue)
}

// Two issues' pods, each with its own clone, finish one after the other:
// the second's push is refused (origin moved on), so it merges again on
// origin's new branch, and origin ends with both.
func TestMergeAndPublish(t *testing.T) {
	origin := newOrigin(t)
	ctx := t.Context()
	a, b := podClone(t, origin), podClone(t, origin)
	commitIn(t, a, "ENG-1", "one.txt", "one\n")
	commitIn(t, b, "ENG-2", "two.txt", "two\n")
	if !a.IsClone(ctx) {
		t.Fatal("IsClone of a Clone = false")
	}
	for _, c := range []struct {
		m     *Manager
		issue string
	}{{a, "ENG-1"}, {b, "ENG-2"}} {
		res, err := c.m.MergeAndPublish(ctx, c.issue)
		if err != nil || !res.Merged {
			t.Fatalf("MergeAndPublish %s = %+v, %v", c.issue, res, err)
		}
	}
	files := run(t, origin, "ls-tree", "--name-only", "main")
	for _, f := range []string{"README", "one.txt", "two.txt"} {
		if !strings.Contains(files, f) {
			t.Errorf("origin's main has %q; want %s in it", files, f)
		}
	}
	log := run(t, origin, "log", "--format=%s", "main")
	if n := strings.Count(log, "Merge legion/"); n != 2 {
		t.Errorf("origin's main has %d merges; want 2 (one per issue, none twice):\n%s", n, log)
	}

	// Clone again into a's directory: a pod of a later phase. It fetches
	// and its main is origin's, with both issues.
	if err := Clone(ctx, origin, a.Repo); err != nil {
		t.Fatal(err)
	}
	if got, want := run(t, a.Repo, "rev-parse", "main"), run(t, origin, "rev-parse", "main"); got != want {
		t.Errorf("after Clone again, main is %s; want origin's %s", got, want)
	}

	// A conflict is reported with its file; origin is untouched.
	commitIn(t, a, "ENG-3", "one.txt", "three\n")
	commitIn(t, b, "ENG-4", "one.txt", "four\n")
	if _, err := a.MergeAndPublish(ctx, "ENG-3"); err != nil {
		t.Fatal(err)
	}
	before := run(t, origin, "rev-parse", "main")
	res, err := b.MergeAndPublish(ctx, "ENG-4")
	if !errors.Is(err, ErrConflict) || len(res.Conflicts) != 1 || res.Conflicts[0] != "one.txt" {
		t.Errorf("MergeAndPublish of a conflicting branch = %+v, %v; want ErrConflict in one.txt", res, err)
	}
	if after := run(t, origin, "rev-parse", "main"); after != before {
		t.Errorf("a conflicting finish moved origin's main from %s to %s", before, after)
	}
}

func TestCloneRefuses(t *testing.T) {
	origin := newOrigin(t)
	ctx := t.Context()

	// The user's own repository is never taken for Legion's clone.
	user := newRepo(t)
	err := Clone(ctx, origin, user.Repo)
	if err == nil || !strings.Contains(err.Error(), "did not clone") {
		t.Errorf("Clone into the user's repository: %v; want a refusal naming it", err)
	}
	if _, err := user.MergeAndPublish(ctx, "ENG-1"); err == nil || !strings.Contains(err.Error(), "not a clone") {
		t.Errorf("MergeAndPublish in the user's repository: %v; want a refusal", err)
	}

	// A clone of another repository is not silently reused.
	m := podClone(t, origin)
	other := newOrigin(t)
	if err := Clone(ctx, other, m.Repo); err == nil || !strings.Contains(err.Error(), "is a clone of "+origin) {
		t.Errorf("Clone of another URL into a clone: %v; want an error naming both", err)
	}

	// A clone cut short left its partial directory: cloned again.
	cut := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(filepath.Join(cut+".partial", "half"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Clone(ctx, origin, cut); err != nil {
		t.Fatalf("Clone after a clone cut short: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cut, "README")); err != nil {
		t.Errorf("after Clone after a clone cut short: %v", err)
	}
	if _, err := os.Stat(cut + ".partial"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the partial clone is still there: %v", err)
	}

	// A directory with files and no repository is not Legion's: kept.
	mine := t.TempDir()
	write(t, mine, "notes.txt", "mine\n")
	if err := Clone(ctx, origin, mine); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Clone into a directory with files: %v; want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(mine, "notes.txt")); err != nil {
		t.Errorf("Clone refused, but the file is gone: %v", err)
	}

	if err := Clone(ctx, origin, "relative"); err == nil {
		t.Error("Clone into a relative directory: no error")
	}
}
