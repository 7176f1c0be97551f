package workspace

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestListFollowsChanges: List keeps what it learnt of a branch against
// the default branch (Ahead, Conflicts) until either moves, and asks git
// status each time (Dirty). After each change the worktree is listed as a
// Manager that never listed before sees it, and as the change says.
func TestListFollowsChanges(t *testing.T) {
	m := newRepo(t)
	ctx := t.Context()
	for _, issue := range []string{"DEMO-1", "DEMO-2"} {
		if _, err := m.Ensure(ctx, issue); err != nil {
			t.Fatal(err)
		}
	}
	wt := m.Path("DEMO-1")
	list := func(m *Manager) []Worktree {
		t.Helper()
		got, err := m.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := list(m)
	before := m.gitRuns.Load()
	if diff := cmp.Diff(first, list(m)); diff != "" {
		t.Errorf("List again with nothing changed (-first +second):\n%s", diff)
	}
	// One git for-each-ref, one git config, one git status per worktree.
	if runs := m.gitRuns.Load() - before; runs != 2+2 {
		t.Errorf("List with nothing changed ran %d git processes; want 4 (git rev-list and git merge-tree only when a branch moved)", runs)
	}

	type facts struct {
		Dirty     bool
		Ahead     int
		Conflicts []string
	}
	for _, step := range []struct {
		name   string
		change func()
		want   facts
	}{
		{"commit on the branch", func() {
			write(t, wt, "README", "from the agent\n")
			run(t, wt, "commit", "-q", "-am", "agent change")
		}, facts{Ahead: 1}},
		{"commit on the default branch", func() {
			write(t, m.Repo, "README", "from a human\n")
			run(t, m.Repo, "commit", "-q", "-am", "human change")
		}, facts{Ahead: 1, Conflicts: []string{"README"}}},
		{"edit a tracked file without staging", func() {
			write(t, wt, "README", "from the agent!\n")
		}, facts{Dirty: true, Ahead: 1, Conflicts: []string{"README"}}},
		{"undo the edit", func() {
			run(t, wt, "checkout", "--", "README")
		}, facts{Ahead: 1, Conflicts: []string{"README"}}},
		{"add an untracked file", func() {
			write(t, wt, "new.txt", "new\n")
		}, facts{Dirty: true, Ahead: 1, Conflicts: []string{"README"}}},
		{"resolve by merging the default branch", func() {
			run(t, wt, "merge", "-q", "-X", "theirs", "main")
		}, facts{Dirty: true, Ahead: 2}},
	} {
		step.change()
		got := list(m)
		if diff := cmp.Diff(list(&Manager{Repo: m.Repo, Dir: m.Dir}), got); diff != "" {
			t.Errorf("after %s: List (-as a new Manager lists +as the one that listed before):\n%s", step.name, diff)
		}
		if len(got) != 2 || got[0].Issue != "DEMO-1" {
			t.Fatalf("after %s: List = %+v; want DEMO-1 and DEMO-2", step.name, got)
		}
		if diff := cmp.Diff(step.want, facts{got[0].Dirty, got[0].Ahead, got[0].Conflicts}); diff != "" {
			t.Errorf("after %s: DEMO-1 (-want +got):\n%s", step.name, diff)
		}
	}

	if err := m.Remove(ctx, "DEMO-2"); err != nil {
		t.Fatal(err)
	}
	if got := list(m); len(got) != 1 || got[0].Issue != "DEMO-1" {
		t.Errorf("List after removing DEMO-2 = %+v; want DEMO-1 only", got)
	}
	if n := len(m.facts); n != 1 {
		t.Errorf("List keeps %d comparisons after DEMO-2 was removed; want 1 (DEMO-1's)", n)
	}
}
