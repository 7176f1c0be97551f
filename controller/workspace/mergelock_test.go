package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMergeAfterKilledGit: a finisher killed in the middle of git left
// HEAD.lock behind; the next merge moves it aside (named, kept) and
// merges, where it failed with "File exists" until a person removed the
// lock (the chaos run's seed 2 in a clean-clone run: every later finisher
// of the team failed until its start limit). A lock of a git that is
// still at work is waited for.
func TestMergeAfterKilledGit(t *testing.T) {
	m := newRepo(t)
	ctx := t.Context()
	for _, issue := range []string{"DEMO-1", "DEMO-2"} {
		wt, err := m.Ensure(ctx, issue)
		if err != nil {
			t.Fatal(err)
		}
		write(t, wt.Path, issue+".txt", issue+"\n")
		run(t, wt.Path, "add", issue+".txt")
		run(t, wt.Path, "commit", "-q", "-m", issue)
	}
	gitDir := filepath.Join(m.Repo, ".git")
	stale := filepath.Join(gitDir, "HEAD.lock")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Merge(ctx, "DEMO-1"); err != nil || !res.Merged {
		t.Fatalf("Merge with a killed git's HEAD.lock: %+v, %v; want merged", res, err)
	}
	if aside := StaleLocks(gitDir); len(aside) != 1 || !strings.HasPrefix(filepath.Base(aside[0]), "HEAD.lock.stale-") {
		t.Errorf("locks moved aside: %q; want the HEAD.lock, named", aside)
	}

	// A git at work holds index.lock for a moment: waited for.
	busy := filepath.Join(gitDir, "index.lock")
	if err := os.WriteFile(busy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(700 * time.Millisecond)
		os.Remove(busy)
	}()
	if res, err := m.Merge(ctx, "DEMO-2"); err != nil || !res.Merged {
		t.Fatalf("Merge while another git holds index.lock: %+v, %v; want merged once it is free", res, err)
	}
	if aside := StaleLocks(gitDir); len(aside) != 1 {
		t.Errorf("locks moved aside: %q; want only the stale one (a live git's lock is not taken)", aside)
	}
	if got := run(t, m.Repo, "log", "--format=%s", "main"); strings.Count(got, "Merge legion/") != 2 {
		t.Errorf("main's log:\n%s\nwant both merges", got)
	}
}
