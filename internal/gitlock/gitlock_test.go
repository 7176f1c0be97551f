package gitlock

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/units/sdtest"
)

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestClear: a worktree whose git was killed mid-commit (its index lock,
// HEAD lock and branch lock left) commits again once Clear has moved the
// locks aside; a lock younger than older stays; a directory that is no
// worktree is no error.
func TestClear(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		sdtest.Require(t, "git (apt-get install git)", false)
	}
	repo := t.TempDir()
	gitT(t, repo, "init", "-q", "-b", "main")
	gitT(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first")
	wt := filepath.Join(t.TempDir(), "WEB-1")
	gitT(t, repo, "worktree", "add", "-q", "-b", "legion/WEB-1", wt)
	gitDir := gitT(t, wt, "rev-parse", "--absolute-git-dir")
	old := time.Now().Add(-time.Minute)
	locks := []string{filepath.Join(gitDir, "index.lock"), filepath.Join(gitDir, "HEAD.lock"), filepath.Join(repo, ".git", "refs", "heads", "legion", "WEB-1.lock")}
	for _, p := range locks {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// What the agent met: its commit fails.
	if err := os.WriteFile(filepath.Join(wt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", wt, "add", "f").CombinedOutput(); err == nil || !strings.Contains(string(out), "index.lock") {
		t.Fatalf("git add with a killed git's index.lock: %v %s; want it refused", err, out)
	}

	moved, err := Clear(t.Context(), wt, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(moved)
	want := slices.Clone(locks)
	slices.Sort(want)
	if !slices.Equal(moved, want) {
		t.Errorf("Clear moved %q; want %q", moved, want)
	}
	for _, p := range locks {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after Clear: %v; want moved aside", p, err)
		}
		if m, _ := filepath.Glob(p + ".stale-*"); len(m) != 1 {
			t.Errorf("%s.stale-*: %q; want the lock kept aside", p, m)
		}
	}
	gitT(t, wt, "add", "f")
	gitT(t, wt, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "after")

	// A young lock (a person's git at work) stays.
	young := filepath.Join(gitDir, "index.lock")
	if err := os.WriteFile(young, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if moved, err := Clear(t.Context(), wt, time.Minute); err != nil || len(moved) != 0 {
		t.Errorf("Clear with a young lock: %q, %v; want nothing moved", moved, err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("the young lock: %v; want it kept", err)
	}
	if moved, err := Clear(t.Context(), t.TempDir(), 0); err != nil || len(moved) != 0 {
		t.Errorf("Clear of a directory that is no worktree: %q, %v; want nothing, no error", moved, err)
	}
}
