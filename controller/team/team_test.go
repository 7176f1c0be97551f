package team

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/controller/github/githubtest"
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
	tm.Legion = "/opt/legion/bin/legion"
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
	// The claude kind (the default) adds its settings file, written under
	// the team's state for this worker, before the session flag.
	settings := filepath.Join(tm.StateDir, "agents", d.WorkerID.String(), claude.SettingsFileName)
	wantNew := []string{"my-agent", "--settings", settings, "--permission-mode", "manual", "--session-id", d.SessionID.String(), d.Instructions}
	if !slices.Equal(d.ArgvNew, wantNew) {
		t.Errorf("ArgvNew = %q; want %q", d.ArgvNew, wantNew)
	}
	if d.ArgvResume[1] != "--settings" || d.ArgvResume[len(d.ArgvResume)-1] != "in "+d.Cwd {
		t.Errorf("ArgvResume = %q; want --settings after the program, the worktree in its last word", d.ArgvResume)
	}
	if data, err := os.ReadFile(settings); err != nil || !strings.Contains(string(data), `"command": "/opt/legion/bin/legion hook"`) {
		t.Errorf("settings file %s: %v\n%s; want the hooks running /opt/legion/bin/legion hook", settings, err, data)
	}
	if data, err := os.ReadFile(filepath.Join(home, ".claude.json")); err != nil || !strings.Contains(string(data), `"hasTrustDialogAccepted": true`) {
		t.Errorf("~/.claude.json: %v\n%s; want the team's workspace trusted", err, data)
	}
	if d.Agent != "claude" || !strings.HasPrefix(d.SessionFile, claudecode.ProjectDir(home, d.Cwd)) {
		t.Errorf("Agent %q, SessionFile %s; want claude, under the worktree's project dir", d.Agent, d.SessionFile)
	}
	if !slices.Contains(d.Env, "LEGION_ISSUE=DEMO-1") || !slices.Contains(d.Env, "LEGION_PORT_OFFSET=10") ||
		!slices.Contains(d.Env, "LEGION_CONFIG=/etc/legion-test.toml") || !slices.Contains(d.Env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1") {
		t.Errorf("Env = %q; want LEGION_ISSUE, LEGION_PORT_OFFSET, LEGION_CONFIG and the CLI's traffic off", d.Env)
	}
	// agent.env and agent.env_by_kind reach the agent; Legion's own
	// variables come after them (the last of a name wins).
	tm.Agent.Env = map[string]string{"GOFLAGS": "-mod=mod"}
	tm.Agent.EnvByKind = map[config.AgentKind]map[string]string{config.AgentClaude: {"ANTHROPIC_MODEL": "m"}, config.AgentCodex: {"X": "1"}}
	de, err := tm.PlanDispatch(t.Context(), "DEMO-1", "plan", home)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(de.Env, "GOFLAGS=-mod=mod") || !slices.Contains(de.Env, "ANTHROPIC_MODEL=m") || slices.Contains(de.Env, "X=1") ||
		slices.Index(de.Env, "GOFLAGS=-mod=mod") > slices.Index(de.Env, "LEGION_ISSUE=DEMO-1") {
		t.Errorf("Env = %q; want agent.env and the claude kind's env_by_kind before Legion's own, not codex's", de.Env)
	}
	tm.Agent.Env, tm.Agent.EnvByKind = nil, nil

	a := tm.DispatchLaunch(d, config.Worker{StartupGrace: time.Minute, RingSize: 1 << 20})
	if a.Agent != "claude" || a.Watch != d.SessionFile || a.StartupGrace == nil || a.StaleAfter == 0 {
		t.Errorf("DispatchLaunch = agent %q, watch %q, startup grace %v, stale after %v; want claude, the session file watched", a.Agent, a.Watch, a.StartupGrace, a.StaleAfter)
	}
	if a.ResumeMarker != claudecode.ResumeMarker {
		t.Errorf("DispatchLaunch's resume marker = %q; want Claude Code's %q (a session file without a message is not resumed)", a.ResumeMarker, claudecode.ResumeMarker)
	}
	// The worker allows Legion's own commands of the phase's policy:
	// all three groups under the default allowlist, legion issue under
	// ask; by name or by the legion the hooks run.
	allOwn := []string{api.OwnIssue, api.OwnState, api.OwnWorktreeFinish}
	if !slices.Equal(a.OwnCommands, allOwn) || a.Legion != "/opt/legion/bin/legion" {
		t.Errorf("DispatchLaunch = own commands %q, legion %q; want %q, /opt/legion/bin/legion", a.OwnCommands, a.Legion, allOwn)
	}
	// The finisher, which the sandbox policy runs as allowlist, gets
	// allowlist's own commands too.
	tm.Agent.PermissionsByMode = map[string]config.PermissionPolicy{"review": config.PermissionsAsk, "retro": config.PermissionsBypass, "finish": config.PermissionsSandbox}
	for mode, want := range map[string][]string{"review": {api.OwnIssue}, "retro": nil, "finish": allOwn} {
		dm, err := tm.PlanDispatch(t.Context(), "DEMO-1", controller.Mode(mode), home)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(dm.OwnCommands, want) {
			t.Errorf("PlanDispatch(%s) own commands = %q; want %q", mode, dm.OwnCommands, want)
		}
	}
	tm.Agent.PermissionsByMode = nil

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
	// SessionOf names what PlanDispatch plans, with nothing prepared: the
	// controller's log lines carry it.
	for _, p := range []Dispatch{d, impl, retro} {
		if id, unit, err := tm.SessionOf("DEMO-1", p.Mode); err != nil || id != p.SessionID || unit != p.Unit {
			t.Errorf("SessionOf(DEMO-1, %s) = %v, %s, %v; want %v, %s as planned", p.Mode, id, unit, err, p.SessionID, p.Unit)
		}
	}

	if _, err := tm.PlanDispatch(t.Context(), "DEMO-1", "dance", home); err == nil || !strings.Contains(err.Error(), `mode "dance"`) {
		t.Errorf("PlanDispatch(mode dance) = %v; want an error naming the mode", err)
	}
}

// TestMain makes the test binary the askpass program git runs when the
// tests push to GitHub (github.PushEnv), as the legion binary is.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Getenv(github.EnvAskpass) == "1" {
		answer, err := github.AskpassFromEnv(os.Args[1], os.Getenv)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(answer)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// gitHubTeam is testTeam with review = "github": its repository served
// by a fake GitHub (GraphQL and git's smart HTTP), the token in the
// environment, and the test binary as the askpass program.
func gitHubTeam(t *testing.T) (*Team, *githubtest.Server) {
	t.Helper()
	tm := testTeam(t)
	srv := githubtest.NewServer(t, "ghp_tok", "acme", "web")
	srv.ServeGit(t, tm.Workspace)
	t.Setenv("LEGION_TEST_GH_TOKEN", "ghp_tok")
	tm.Team.Review = config.ReviewGitHub
	tm.Team.GitHub = config.GitHub{Repo: "acme/web", TokenEnv: "LEGION_TEST_GH_TOKEN", APIURL: srv.URL + "/graphql"}
	reopened, err := Open(tm.Team, tm.ConfigPath, filepath.Dir(filepath.Dir(tm.StateDir)))
	if err != nil {
		t.Fatal(err)
	}
	reopened.Legion = os.Args[0]
	return reopened, srv
}

// commitIn commits a new file in dir.
func commitIn(t *testing.T, dir, file, msg string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(msg+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", msg}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestGitHubReviewCycle: with review = "github", Legion pushes the
// issue's branch over HTTPS with the team's token (real git, git's smart
// HTTP protocol, the askpass program answering) and opens its pull
// request; a review outcome is a label on that pull request, not on the
// issue; finishing pushes the retro's commit and merges the pull request
// through the API, then removes the worktree and closes the issue. The
// token is stored nowhere git keeps things.
func TestGitHubReviewCycle(t *testing.T) {
	tm, srv := gitHubTeam(t)
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
	branch := "legion/" + is.ID
	if err := tm.Finish(ctx, is.ID, false); err == nil || !strings.Contains(err.Error(), "no pull request") {
		t.Fatalf("Finish without a pull request = %v; want an error saying so", err)
	}
	if err := os.WriteFile(filepath.Join(wt.Path, "greet.go"), []byte("package web\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Publish(ctx, is.ID, is.ID+": greet", "body"); err == nil || !strings.Contains(err.Error(), "uncommitted changes") || !strings.Contains(err.Error(), "greet.go") {
		t.Fatalf("Publish of a dirty worktree = %v; want an error naming the uncommitted file", err)
	}
	commitIn(t, wt.Path, "greet.go", is.ID+": greet")
	pr, err := tm.Publish(ctx, is.ID, is.ID+": greet", "Adds a greeting.")
	if err != nil {
		t.Fatal(err)
	}
	got, ok := srv.PR(branch)
	if !ok || !pr.Created || got.Number != pr.Number || got.Base != "main" || !strings.HasPrefix(got.Body, "Adds a greeting.") || !strings.Contains(got.Body, is.ID) {
		t.Fatalf("Publish = %+v; the server has %+v; want a new pull request of %s into main, its body naming the issue", pr, got, branch)
	}
	if log, err := srv.GitLog(branch); err != nil || !strings.Contains(log, is.ID+": greet") {
		t.Errorf("the pushed %s: %q, %v; want the implementer's commit", branch, log, err)
	}
	if again, err := tm.Publish(ctx, is.ID, "x", ""); err != nil || again.Created || again.Number != pr.Number {
		t.Errorf("Publish again = %+v, %v; want the open pull request, not a new one", again, err)
	}

	if err := tm.Label(ctx, is.ID, controller.LabelApproved); err != nil {
		t.Fatal(err)
	}
	got, _ = srv.PR(branch)
	if names := srv.LabelNames(&got); !slices.Contains(names, controller.LabelApproved) {
		t.Errorf("pull request labels %q; want %s", names, controller.LabelApproved)
	}
	if cur, _ := store.Issue(ctx, is.ID); slices.Contains(cur.Labels, controller.LabelApproved) {
		t.Errorf("the issue has %s; want it on the pull request only", controller.LabelApproved)
	}
	if err := tm.Label(ctx, is.ID, controller.LabelWorkerDone); err != nil {
		t.Fatal(err)
	}
	if cur, _ := store.Issue(ctx, is.ID); !slices.Contains(cur.Labels, controller.LabelWorkerDone) {
		t.Errorf("the issue's labels %q; want worker-done on the issue", cur.Labels)
	}

	commitIn(t, wt.Path, "LESSONS", is.ID+": retro: small steps")
	if err := tm.Finish(ctx, is.ID, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := srv.PR(branch); got.State != "MERGED" {
		t.Errorf("pull request state = %s; want MERGED", got.State)
	}
	if log, err := srv.GitLog("main"); err != nil || !strings.Contains(log, is.ID+": retro: small steps") || !strings.Contains(log, "Merge pull request") {
		t.Errorf("GitHub's main: %q, %v; want the retro's commit merged", log, err)
	}
	if _, err := os.Stat(tm.Worktrees.Path(is.ID)); !os.IsNotExist(err) {
		t.Errorf("worktree still there: %v", err)
	}
	if cur, _ := store.Issue(ctx, is.ID); cur.Status != "Done" {
		t.Errorf("status = %s; want Done", cur.Status)
	}
	for _, f := range []string{filepath.Join(tm.Workspace, ".git", "config"), filepath.Join(os.Getenv("HOME"), ".git-credentials")} {
		if data, _ := os.ReadFile(f); strings.Contains(string(data), "ghp_tok") {
			t.Errorf("%s holds the token", f)
		}
	}
}

// TestPublishNeedsGitHubReview: a team that reviews locally has no pull
// request to open, and says what would give it one.
func TestPublishNeedsGitHubReview(t *testing.T) {
	tm := testTeam(t)
	if _, err := tm.Publish(t.Context(), "DEMO-1", "t", ""); err == nil || !strings.Contains(err.Error(), `review = "github"`) {
		t.Errorf("Publish on a local-review team = %v; want an error naming review = \"github\"", err)
	}
}

// TestPlanDispatchCustom: a custom agent runs agent.new as it is, with no
// session file to watch and nothing prepared.
func TestPlanDispatchCustom(t *testing.T) {
	tm := testTeam(t)
	tm.Agent.Kind = config.AgentCustom
	tm.Legion = ""
	home := t.TempDir()
	d, err := tm.PlanDispatch(t.Context(), "DEMO-2", "implement", home)
	if err != nil {
		t.Fatal(err)
	}
	wantNew := []string{"my-agent", "--session-id", d.SessionID.String(), d.Instructions}
	if !slices.Equal(d.ArgvNew, wantNew) || d.ArgvResume != nil || d.SessionFile != "" || d.Agent != "custom" {
		t.Errorf("PlanDispatch = argv %q, resume %q, session file %q, agent %q; want %q, none, none, custom", d.ArgvNew, d.ArgvResume, d.SessionFile, d.Agent, wantNew)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude.json")); err == nil {
		t.Errorf("a custom dispatch wrote ~/.claude.json")
	}
	a := tm.DispatchLaunch(d, config.Worker{StartupGrace: time.Minute, RingSize: 1 << 20})
	if a.Agent != "custom" || a.Watch != "" || a.StartupGrace != nil || a.StaleAfter != api.Duration(tm.StaleAfter) || a.OwnCommands != nil {
		t.Errorf("DispatchLaunch = agent %q, watch %q, startup grace %v, stale after %v; want custom, nothing watched, the team's stale_after (judged by its output), no own commands (no hooks)", a.Agent, a.Watch, a.StartupGrace, a.StaleAfter)
	}
}

func TestSourcesCarryTheTeamsLimits(t *testing.T) {
	tm := testTeam(t)
	src := tm.Sources(nil)
	if src.WIPLimit != tm.WIPLimit || src.IdleGrace != 30*time.Second {
		t.Errorf("Sources = wip %d, idle grace %v; want the team's %d and the default idle_grace 30s", src.WIPLimit, src.IdleGrace, tm.WIPLimit)
	}
}

// TestDispatchInstructions: the prompt is the phase's instructions for
// this team and issue, with legion by name where the agent's PATH finds
// the same binary, else by its absolute path.
func TestDispatchInstructions(t *testing.T) {
	tm := testTeam(t)
	bin := t.TempDir()
	legion := filepath.Join(bin, "legion")
	if err := os.WriteFile(legion, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tm.Legion = legion
	sys := os.Getenv("PATH")
	for _, tc := range []struct {
		name, path, want string
	}{
		{"in PATH", "/usr/bin:" + bin, "legion issue label demo DEMO-1 worker-done"},
		{"not in PATH", "/usr/bin", legion + " issue label demo DEMO-1 worker-done"},
		{"another legion first", t.TempDir() + ":" + bin, legion + " issue label demo DEMO-1 worker-done"},
		{"in PATH, not a system directory", "/usr/bin:" + bin, legion + " issue label demo DEMO-1 worker-done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// bin stands for /usr/bin, where make install puts legion,
			// but in the last case.
			old := systemBinDirs
			if !strings.HasSuffix(tc.name, "not a system directory") {
				systemBinDirs = append(slices.Clone(old), bin)
			}
			t.Cleanup(func() { systemBinDirs = old })
			if strings.HasPrefix(tc.name, "another") {
				other := filepath.Join(strings.Split(tc.path, ":")[0], "legion")
				if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", tc.path+":"+sys)
			d, err := tm.PlanDispatch(t.Context(), "DEMO-1", "plan", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(d.Instructions, "# Legion: plan DEMO-1 (team demo)") || !strings.Contains(d.Instructions, "\n"+tc.want+"\n") {
				t.Errorf("Instructions =\n%s\nwant the plan's header and %q on a line", d.Instructions, tc.want)
			}
			if d.ArgvNew[len(d.ArgvNew)-1] != d.Instructions {
				t.Errorf("ArgvNew's {prompt} = %q; want the instructions", d.ArgvNew[len(d.ArgvNew)-1])
			}
		})
	}
}

func TestDispatchBadInstructions(t *testing.T) {
	tm := testTeam(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plan.md"), []byte("# just think\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tm.Agent.InstructionsDir = dir
	_, err := tm.PlanDispatch(t.Context(), "DEMO-1", "plan", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "plan.md")) || !strings.Contains(err.Error(), "worker-done") {
		t.Errorf("PlanDispatch with a plan.md without worker-done = %v; want an error naming the file and the command", err)
	}
}

// failingMove is a tracker whose moves fail.
type failingMove struct{ controller.Tracker }

func (failingMove) Move(context.Context, string, controller.Status) error {
	return errors.New("tracker unavailable")
}

// TestFinishResumable: a finish cut before the issue is Done (here its
// move fails) leaves the worktree, the finisher's working directory, in
// place, so the finisher can be started again and run the finish again,
// which completes it. Removing the worktree first left a finisher killed
// in between unable to start (the chaos run, ENG-17), its issue waiting
// for a person.
func TestFinishResumable(t *testing.T) {
	tm := testTeam(t)
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
	tracker := tm.Tracker
	tm.Tracker = failingMove{tracker}
	if err := tm.Finish(ctx, is.ID, false); err == nil {
		t.Fatal("Finish with a failing move succeeded; want its error")
	}
	if _, err := os.Stat(wt.Path); err != nil {
		t.Errorf("worktree after a finish cut before Done: %v; want it kept for the finisher to run again", err)
	}
	tm.Tracker = tracker
	if err := tm.Finish(ctx, is.ID, false); err != nil {
		t.Fatalf("Finish again: %v", err)
	}
	if cur, _ := store.Issue(ctx, is.ID); cur.Status != controller.StatusDone {
		t.Errorf("status after the finish ran again = %q; want Done", cur.Status)
	}
	if _, err := os.Stat(wt.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worktree after the finish: %v; want it removed", err)
	}
}
