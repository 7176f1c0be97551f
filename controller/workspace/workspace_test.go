package workspace

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newRepo makes a real git repository with one commit on main.
func newRepo(t testing.TB) *Manager {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is required (apt-get install git)")
		}
		t.Skip("git not installed")
	}
	repo := t.TempDir()
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@example.com")
	run(t, repo, "init", "-q", "-b", "main")
	write(t, repo, "README", "hello\n")
	run(t, repo, "add", "README")
	run(t, repo, "commit", "-q", "-m", "first")
	return &Manager{Repo: repo, Dir: filepath.Join(t.TempDir(), "wt")}
}

func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t testing.TB, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureIsIdempotentAndGivesDistinctPorts(t *testing.T) {
	m := newRepo(t)
	ctx := t.Context()
	a, err := m.Ensure(ctx, "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Ensure(ctx, "DEMO-2")
	if err != nil {
		t.Fatal(err)
	}
	again, err := m.Ensure(ctx, "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, again); diff != "" {
		t.Errorf("Ensure twice gave different worktrees (-first +second):\n%s", diff)
	}
	if a.PortOffset == b.PortOffset || a.PortOffset == 0 {
		t.Errorf("port offsets %d and %d; want distinct non-zero", a.PortOffset, b.PortOffset)
	}
	if got := run(t, a.Path, "symbolic-ref", "--short", "HEAD"); got != "legion/DEMO-1" {
		t.Errorf("worktree branch = %q; want legion/DEMO-1", got)
	}
	if len(a.Conflicts) != 0 {
		t.Errorf("fresh worktree conflicts = %v; want none", a.Conflicts)
	}
	if !slices.Contains(a.Env(), "LEGION_PORT_OFFSET=10") {
		t.Errorf("Env() = %v; want LEGION_PORT_OFFSET=10", a.Env())
	}
	list, err := m.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %v, %v; want 2 worktrees", list, err)
	}
}

func TestFinishMergesAndCleansUp(t *testing.T) {
	m := newRepo(t)
	ctx := t.Context()
	wt, err := m.Ensure(ctx, "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt.Path, "feature.txt", "done\n")
	run(t, wt.Path, "add", "feature.txt")
	run(t, wt.Path, "commit", "-q", "-m", "feature")

	res, err := m.Finish(ctx, "DEMO-1")
	if err != nil || !res.Merged {
		t.Fatalf("Finish = %+v, %v; want merged", res, err)
	}
	if _, err := os.Stat(filepath.Join(m.Repo, "feature.txt")); err != nil {
		t.Errorf("merged file missing in the main workspace: %v", err)
	}
	if _, err := os.Stat(wt.Path); !os.IsNotExist(err) {
		t.Errorf("worktree %s still exists after finish", wt.Path)
	}
	if out := run(t, m.Repo, "branch", "--list", "legion/*"); out != "" {
		t.Errorf("branches left after finish: %q", out)
	}
	// Finishing again is a no-op.
	if _, err := m.Finish(ctx, "DEMO-1"); err != nil {
		t.Errorf("second Finish = %v; want nil", err)
	}
}

func TestFinishReportsConflicts(t *testing.T) {
	m := newRepo(t)
	ctx := t.Context()
	wt, err := m.Ensure(ctx, "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt.Path, "README", "from the agent\n")
	run(t, wt.Path, "commit", "-q", "-am", "agent change")
	write(t, m.Repo, "README", "from a human\n")
	run(t, m.Repo, "commit", "-q", "-am", "human change")

	list, err := m.List(ctx)
	if err != nil || len(list) != 1 || !slices.Equal(list[0].Conflicts, []string{"README"}) {
		t.Fatalf("List before finishing = %+v, %v; want DEMO-1 with conflicts [README]", list, err)
	}
	res, err := m.Finish(ctx, "DEMO-1")
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("Finish = %+v, %v; want ErrConflict", res, err)
	}
	if !slices.Equal(res.Conflicts, []string{"README"}) {
		t.Errorf("Conflicts = %v; want [README]", res.Conflicts)
	}
	if st := run(t, m.Repo, "status", "--porcelain"); st != "" {
		t.Errorf("main workspace left dirty after an aborted merge: %q", st)
	}
	if _, err := os.Stat(wt.Path); err != nil {
		t.Errorf("worktree removed despite the conflict: %v", err)
	}
}

func TestBadIssueNames(t *testing.T) {
	m := newRepo(t)
	for _, bad := range []string{"", "..", "a/b", "-rf", "a b", "x..y", "a:b"} {
		if _, err := m.Ensure(t.Context(), bad); err == nil {
			t.Errorf("Ensure(%q) = nil error; want a refusal", bad)
		}
	}
}

// TestListTakesNoIndexLock: looking at a worktree (List, each tick of the
// controller) never writes its index, so it never holds index.lock while
// the agent working in it runs `git add` or `git commit`. A plain `git
// status` on a worktree whose files' stat data changed refreshes the index
// and rewrites it.
func TestListTakesNoIndexLock(t *testing.T) {
	m := newRepo(t)
	ctx := t.Context()
	wt, err := m.Ensure(ctx, "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	index := run(t, wt.Path, "rev-parse", "--path-format=absolute", "--git-path", "index")
	stat := func() os.FileInfo {
		t.Helper()
		fi, err := os.Stat(index)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	// The same content with a new mtime: the index's stat data is stale.
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(index, past, past); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(wt.Path, "README"), time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	before := stat().ModTime()
	if _, err := m.List(ctx); err != nil {
		t.Fatal(err)
	}
	if after := stat().ModTime(); !after.Equal(before) {
		t.Errorf("List rewrote %s (mtime %v → %v): it took index.lock", index, before, after)
	}
	// The check can fail: a plain git status rewrites it.
	run(t, wt.Path, "status", "--porcelain")
	if after := stat().ModTime(); after.Equal(before) {
		t.Errorf("git status did not rewrite %s: the test shows nothing", index)
	}
}
