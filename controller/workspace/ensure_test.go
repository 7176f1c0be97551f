package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sync/errgroup"
)

// TestConcurrentEnsure: the dispatches of several issues add their
// worktrees at once, while finished issues' worktrees are removed. Each
// writes the repository's config (the branch's port offset; git branch -D
// drops the branch's section), and git refuses a second writer ("could
// not lock config file .git/config: File exists"); two of them could also
// read the same free port slot and both take it.
func TestConcurrentEnsure(t *testing.T) {
	m := newRepo(t)
	const n = 8
	for i := range n / 2 {
		if _, err := m.Ensure(t.Context(), fmt.Sprintf("DONE-%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]Worktree, n)
	var g errgroup.Group
	for i := range n / 2 {
		g.Go(func() error { return m.Remove(t.Context(), fmt.Sprintf("DONE-%d", i+1)) })
	}
	for i := range n {
		g.Go(func() error {
			wt, err := m.Ensure(t.Context(), fmt.Sprintf("DEMO-%d", i+1))
			got[i] = wt
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("Ensure of %d issues and Remove of %d at once: %v", n, n/2, err)
	}
	seen := map[int]string{}
	for _, wt := range got {
		if other, ok := seen[wt.PortOffset]; ok || wt.PortOffset == 0 {
			t.Errorf("%s has port offset %d (as has %q); want a distinct non-zero one each", wt.Issue, wt.PortOffset, other)
		}
		seen[wt.PortOffset] = wt.Issue
	}
}

// TestEnsureAfterDirectoryLost: an issue's worktree directory is gone
// while git still lists the worktree (a removal cut short; the fourth
// 30-minute chaos run's CC-2). Ensure makes it again on the issue's
// branch, with the branch's commits: git refused the path before ("a
// missing but already registered worktree"), and the person who was to
// resolve CC-2's conflict there could not.
func TestEnsureAfterDirectoryLost(t *testing.T) {
	m := newRepo(t)
	wt, err := m.Ensure(t.Context(), "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt.Path, "work.txt", "done\n")
	run(t, wt.Path, "add", "work.txt")
	run(t, wt.Path, "commit", "-q", "-m", "work")
	if err := os.RemoveAll(wt.Path); err != nil {
		t.Fatal(err)
	}
	again, err := m.Ensure(t.Context(), "DEMO-1")
	if err != nil {
		t.Fatalf("Ensure after the worktree's directory was lost: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(again.Path, "work.txt")); err != nil || string(b) != "done\n" || again.PortOffset != wt.PortOffset {
		t.Errorf("the worktree made again: work.txt %q (%v), port offset %d; want the branch's commit, offset %d", b, err, again.PortOffset, wt.PortOffset)
	}
}
