package team

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/github/githubtest"
	"github.com/legion-dev/legion/ptyworker/claude"
)

func testTeam(t *testing.T) *Team {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is required (apt-get install git)")
		}
		t.Skip("git not installed")
	}
	ws := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	toml := `[teams.demo]
id = "6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "` + ws + `"
agent.new = ["my-agent", "--session-id", "{session_id}", "{prompt}"]
agent.resume = ["my-agent", "--resume", "{session_id}", "in {workspace}"]
`
	cfg, err := config.Parse(filepath.Join(ws, "legion.toml"), []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := Open(cfg.Teams[0], "/etc/legion-test.toml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestPlanDispatch(t *testing.T) {
	tm := testTeam(t)
	home := t.TempDir()
	d, err := tm.PlanDispatch(t.Context(), "DEMO-1", "plan", home)
	if err != nil {
		t.Fatal(err)
	}
	if d.Unit != "legion-6f1c2b9e-DEMO\\x2d1-plan.service" {
		t.Errorf("Unit = %q", d.Unit)
	}
	wantNew := []string{"my-agent", "--session-id", d.SessionID.String(), "Use legion-worker skill in plan mode for issue DEMO-1"}
	if !slices.Equal(d.ArgvNew, wantNew) {
		t.Errorf("ArgvNew = %q; want %q", d.ArgvNew, wantNew)
	}
	if d.ArgvResume[3] != "in "+d.Cwd {
		t.Errorf("ArgvResume = %q; want the worktree in its last word", d.ArgvResume)
	}
	if !strings.HasPrefix(d.SessionFile, claude.ProjectDir(home, d.Cwd)) {
		t.Errorf("SessionFile %s is not under the worktree's project dir", d.SessionFile)
	}
	if !slices.Contains(d.Env, "LEGION_ISSUE=DEMO-1") || !slices.Contains(d.Env, "LEGION_PORT_OFFSET=10") ||
		!slices.Contains(d.Env, "LEGION_CONFIG=/etc/legion-test.toml") {
		t.Errorf("Env = %q; want LEGION_ISSUE and LEGION_PORT_OFFSET", d.Env)
	}

	// The retro resumes the implementer's session in the same worktree.
	impl, err := tm.PlanDispatch(t.Context(), "DEMO-1", "implement", home)
	if err != nil {
		t.Fatal(err)
	}
	retro, err := tm.PlanDispatch(t.Context(), "DEMO-1", "retro", home)
	if err != nil {
		t.Fatal(err)
	}
	if retro.SessionID != impl.SessionID || retro.Cwd != impl.Cwd || retro.Unit == impl.Unit {
		t.Errorf("retro = %v in %s (%s); want the implementer's session %v in %s under its own unit", retro.SessionID, retro.Cwd, retro.Unit, impl.SessionID, impl.Cwd)
	}
	if retro.WorkerID == impl.WorkerID || impl.WorkerID != impl.SessionID {
		t.Errorf("worker ids: retro %v, implement %v (session %v); want the retro's own, the implementer's equal to its session", retro.WorkerID, impl.WorkerID, impl.SessionID)
	}
	if d.SessionID == impl.SessionID {
		t.Errorf("plan and implement share session %v", d.SessionID)
	}

	if _, err := tm.PlanDispatch(t.Context(), "DEMO-1", "dance", home); err == nil || !strings.Contains(err.Error(), `mode "dance"`) {
		t.Errorf("PlanDispatch(mode dance) = %v; want an error naming the mode", err)
	}
}

// TestFinishMergesThePullRequest: with review = "github", finishing merges
// the issue's pull request through GitHub's GraphQL API (a local server
// speaking its wire format), removes the worktree and closes the issue.
func TestFinishMergesThePullRequest(t *testing.T) {
	tm := testTeam(t)
	srv := githubtest.NewServer(t, "tok", "acme", "web")
	t.Setenv("LEGION_TEST_GH_TOKEN", "tok")
	tm.Team.Review = config.ReviewGitHub
	tm.Team.GitHub = config.GitHub{Repo: "acme/web", TokenEnv: "LEGION_TEST_GH_TOKEN", APIURL: srv.URL}
	reopened, err := Open(tm.Team, tm.ConfigPath, filepath.Dir(filepath.Dir(tm.StateDir)))
	if err != nil {
		t.Fatal(err)
	}
	store, err := reopened.Local()
	if err != nil {
		t.Fatal(err)
	}
	is, err := store.Add(t.Context(), "ship it")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reopened.Worktrees.Ensure(t.Context(), is.ID); err != nil {
		t.Fatal(err)
	}
	if err := reopened.Finish(t.Context(), is.ID, false); err == nil || !strings.Contains(err.Error(), "no pull request") {
		t.Fatalf("Finish without a PR = %v; want an error saying so", err)
	}
	pr := srv.AddPR("legion/"+is.ID, "OPEN")
	if err := reopened.Finish(t.Context(), is.ID, false); err != nil {
		t.Fatal(err)
	}
	if got := srv.State(pr); got != "MERGED" {
		t.Errorf("PR state = %s; want MERGED", got)
	}
	if _, err := os.Stat(reopened.Worktrees.Path(is.ID)); !os.IsNotExist(err) {
		t.Errorf("worktree still there: %v", err)
	}
	cur, _ := store.Issue(t.Context(), is.ID)
	if cur.Status != "Done" {
		t.Errorf("status = %s; want Done", cur.Status)
	}
}
