package workspace

import (
	"fmt"
	"testing"

	"golang.org/x/sync/errgroup"
)

// TestConcurrentEnsure: the dispatches of several issues add their
// worktrees at once. Each writes the repository's config (the branch's
// port offset), and git refuses a second writer ("could not lock config
// file .git/config: File exists"); two of them could also read the same
// free port slot and both take it.
func TestConcurrentEnsure(t *testing.T) {
	m := newRepo(t)
	const n = 8
	got := make([]Worktree, n)
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			wt, err := m.Ensure(t.Context(), fmt.Sprintf("DEMO-%d", i+1))
			got[i] = wt
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("Ensure of %d issues at once: %v", n, err)
	}
	seen := map[int]string{}
	for _, wt := range got {
		if other, ok := seen[wt.PortOffset]; ok || wt.PortOffset == 0 {
			t.Errorf("%s has port offset %d (as has %q); want a distinct non-zero one each", wt.Issue, wt.PortOffset, other)
		}
		seen[wt.PortOffset] = wt.Issue
	}
}
