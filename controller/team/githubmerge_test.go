package team

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/controller/github/githubtest"
)

// TestGitHubFinishBlocked: a merge GitHub would refuse (a required check
// failed) stops the finish with github.ErrBlocked naming the check and
// what to do, and nothing is removed or moved; once the check passes, the
// finish merges with the team's github.merge_method.
func TestGitHubFinishBlocked(t *testing.T) {
	tm, srv := gitHubTeam(t)
	tm.Team.GitHub.MergeMethod = "squash"
	reopened, err := Open(tm.Team, tm.ConfigPath, filepath.Dir(filepath.Dir(tm.StateDir)))
	if err != nil {
		t.Fatal(err)
	}
	reopened.Legion = tm.Legion
	tm = reopened
	ctx := t.Context()
	store, err := tm.Local()
	if err != nil {
		t.Fatal(err)
	}
	is, err := store.Add(ctx, "ship it")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := tm.Worktrees.Ensure(ctx, is.ID)
	if err != nil {
		t.Fatal(err)
	}
	commitIn(t, wt.Path, "greet.go", is.ID+": greet")
	pr, err := tm.Publish(ctx, is.ID, is.ID+": greet", "Adds a greeting.")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := srv.PR("legion/" + is.ID)
	srv.Lock()
	ghPR := srv.PRs[got.Number-1]
	srv.RequiredChecks = []string{"build"}
	srv.Unlock()
	srv.SetChecks(ghPR, githubtest.Check{Kind: "CheckRun", Name: "build", State: "FAILURE"})

	err = tm.Finish(ctx, is.ID, false)
	if !errors.Is(err, github.ErrBlocked) || !strings.Contains(err.Error(), "checks failed: build (required)") || !strings.Contains(err.Error(), "run the finish again") {
		t.Fatalf("Finish with a failed required check = %v; want ErrBlocked naming the check and what to do", err)
	}
	t.Logf("blocked: %v", err)
	if _, err := os.Stat(wt.Path); err != nil {
		t.Errorf("worktree after a blocked finish: %v; want it kept", err)
	}
	if cur, _ := store.Issue(ctx, is.ID); cur.Status == "Done" {
		t.Errorf("status after a blocked finish = Done; want it unchanged")
	}

	srv.SetChecks(ghPR, githubtest.Check{Kind: "CheckRun", Name: "build", State: "SUCCESS"})
	if err := tm.Finish(ctx, is.ID, false); err != nil {
		t.Fatalf("Finish once the check passed: %v", err)
	}
	if merged, _ := srv.PR("legion/" + is.ID); merged.State != "MERGED" || merged.MergedBy != "SQUASH" {
		t.Errorf("pull request #%d: %s by %q; want MERGED by SQUASH (github.merge_method)", pr.Number, merged.State, merged.MergedBy)
	}
}
