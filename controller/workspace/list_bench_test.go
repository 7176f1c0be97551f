package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/internal/benchreport"
)

// benchWorktrees is how many worktrees BenchmarkList lists.
const benchWorktrees = 100

// BenchmarkList measures List of a team's 100 worktrees with nothing
// changed since the last List (the controller's steady tick), against
// listEach, the way List worked before (five or six git processes per
// worktree), in the same process on the same worktrees. Each worktree's
// branch is one commit ahead of the default branch.
func BenchmarkList(b *testing.B) {
	m := newRepo(b)
	ctx := b.Context()
	for i := range benchWorktrees {
		issue := fmt.Sprintf("DEMO-%d", i+1)
		wt, err := m.Ensure(ctx, issue)
		if err != nil {
			b.Fatal(err)
		}
		write(b, wt.Path, issue+".txt", issue+"\n")
		run(b, wt.Path, "add", issue+".txt")
		run(b, wt.Path, "commit", "-q", "-m", issue)
	}
	want, err := listEach(ctx, m)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.List(ctx); err != nil { // the first List asks git everything
		b.Fatal(err)
	}
	const rounds = 5
	var list, each []time.Duration
	var runs, eachRuns int64
	b.ResetTimer()
	for b.Loop() {
		for range rounds {
			n, t0 := m.gitRuns.Load(), time.Now()
			got, err := m.List(ctx)
			list, runs = append(list, time.Since(t0)), m.gitRuns.Load()-n
			if err != nil {
				b.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				b.Fatalf("List differs from listing each worktree as before (-before +List):\n%s", diff)
			}
			n, t0 = m.gitRuns.Load(), time.Now()
			if _, err := listEach(ctx, m); err != nil {
				b.Fatal(err)
			}
			each, eachRuns = append(each, time.Since(t0)), m.gitRuns.Load()-n
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	benchreport.Vs(b, list, "ms/list-100", each, "ms/list-100-each", "list/each")
	b.ReportMetric(float64(runs), "git/list-100")
	b.ReportMetric(float64(eachRuns), "git/list-100-each")
	b.ReportMetric(benchreport.LoadAvg(b), "load1-end")
}

// listEach is List as it was before it read the repository once and kept
// what two commits tell: for each worktree its port offset (git config
// --get), git status, the default branch (DefaultBranch then asked git
// for origin's HEAD, then whether main exists), git rev-list and git
// merge-tree.
func listEach(ctx context.Context, m *Manager) ([]Worktree, error) {
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return nil, err
	}
	var out []Worktree
	for _, e := range entries {
		issue := e.Name()
		wt := Worktree{Issue: issue, Path: m.Path(issue), Branch: Branch(issue)}
		if v, err := m.git(ctx, m.Repo, "config", "--get", "branch."+wt.Branch+".legionPortOffset"); err == nil {
			wt.PortOffset, _ = strconv.Atoi(v)
		}
		status, err := m.git(ctx, wt.Path, "status", "--porcelain")
		if err != nil {
			return nil, err
		}
		wt.Dirty = status != ""
		def := "main"
		if _, err := m.git(ctx, m.Repo, "symbolic-ref", "--short", "refs/remotes/origin/HEAD"); err == nil {
			return nil, errors.New("listEach knows only a repository without origin")
		}
		if _, err := m.git(ctx, m.Repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+def); err != nil {
			return nil, err
		}
		n, err := m.git(ctx, m.Repo, "rev-list", "--count", def+".."+wt.Branch)
		if err != nil {
			return nil, err
		}
		wt.Ahead, _ = strconv.Atoi(n)
		_, wt.Conflicts, _ = m.mergeTree(ctx, def, wt.Branch)
		out = append(out, wt)
	}
	return out, nil
}
