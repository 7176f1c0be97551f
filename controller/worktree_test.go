package controller_test

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/workspace"
)

// gitRepo makes a real git repository with one commit on main and returns
// a worktree manager for it.
func gitRepo(t *testing.T) *workspace.Manager {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	repo := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return &workspace.Manager{Repo: repo, Dir: filepath.Join(t.TempDir(), "worktrees")}
}

// TestBrokenWorktreeFailsOnlyItsIssue: a directory under the team's
// worktree directory that is not a worktree is reported on its issue, and
// the tick goes on for every other issue. Before, every tick failed with
// "collect worktrees: … git status …".
func TestBrokenWorktreeFailsOnlyItsIssue(t *testing.T) {
	ctx := t.Context()
	tr := local.Open(t.TempDir(), "DEMO")
	for _, title := range []string{"broken", "fine"} {
		if _, err := tr.Add(ctx, title); err != nil {
			t.Fatal(err)
		}
	}
	wts := gitRepo(t)
	if err := os.MkdirAll(wts.Path("DEMO-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	agents := &fakeAgents{}
	src := controller.Sources{Tracker: tr, Sessions: agents, Worktrees: wts}

	if r := controller.Tick(ctx, src, agents, slog.New(slog.NewTextHandler(io.Discard, nil))); r.Err != nil || r.Failed != 0 {
		t.Fatalf("Tick = %+v; want no error and no failed action", r)
	}
	if want := []string{"dispatch DEMO-2 plan"}; !slices.Equal(agents.calls, want) {
		t.Errorf("dispatched %v; want %v (none in the broken worktree)", agents.calls, want)
	}
	st, _, err := controller.Collect(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	rep := controller.Suggest(st)
	is := rep.Issues[0]
	if is.Worktree == nil || !strings.Contains(is.Worktree.Problem, wts.Path("DEMO-1")) ||
		!strings.Contains(is.Worktree.Problem, "not a git repository") {
		t.Errorf("DEMO-1's worktree = %+v; want its path and what is wrong", is.Worktree)
	}
	if is.Action != controller.ActionSkip || !strings.Contains(is.Reason, "not a git repository") {
		t.Errorf("DEMO-1: %s, %q; want skip, saying what is wrong with its worktree", is.Action, is.Reason)
	}
}
