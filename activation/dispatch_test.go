package activation

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
)

// TestStateAndDispatch: through the real CLI and helper, a team's state
// suggests planning a new issue; dispatch starts the planner as its own
// unit in the issue's worktree; a second dispatch leaves it alone; state
// then sees the live worker and skips the issue.
func TestStateAndDispatch(t *testing.T) {
	e := startEnv(t)
	ctx := t.Context()
	ws := t.TempDir()
	if out, err := exec.Command("git", "-C", ws, "-c", "user.name=t", "-c", "user.email=t@example.com", "init", "-q", "-b", "main").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if out, err := exec.Command("git", "-C", ws, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first").CombinedOutput(); err != nil {
		t.Fatalf("git commit: %v\n%s", err, out)
	}
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion", "legion.toml")
	e.mustLegion(ctx, "team", "add", "demo", "--workspace", ws)
	// The planner: a long-running stand-in for an agent.
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("agent.new = [\"/bin/sh\", \"-c\", \"echo planning {issue} in {mode}; exec sleep 600\"]\n")
	f.WriteString("agent.resume = [\"/bin/sh\", \"-c\", \"echo resuming {issue}; exec sleep 600\"]\n")
	f.Close()
	if id := strings.TrimSpace(e.mustLegion(ctx, "issue", "add", "demo", "Plan me")); id != "DEMO-1" {
		t.Fatalf("issue add printed %q; want DEMO-1", id)
	}

	c, err := api.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var rep controller.Report
	err = c.Call(ctx, api.CmdState, api.StateArgs{Config: cfg, Team: "demo"}, &rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Issues) != 1 || rep.Issues[0].Action != controller.ActionDispatchPlanner {
		t.Fatalf("state = %+v; want DEMO-1 with dispatch_planner", rep.Issues)
	}
	// A live session of another team (here ad hoc) that holds the name
	// DEMO-1-plan is not this team's planner: dispatch says so and starts
	// nothing, and succeeds once the name is free.
	if _, err := c.Spawn(ctx, api.SpawnArgs{Name: "DEMO-1-plan", Cwd: ws, Argv: []string{"/bin/sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Dispatch(ctx, api.DispatchArgs{Config: cfg, Team: "demo", Issue: "DEMO-1", Mode: "plan"})
	if ae, ok := errors.AsType[*api.Error](err); !ok || ae.Code != api.CodeExists || !strings.Contains(ae.Message, "team adhoc") {
		t.Fatalf("dispatch while team adhoc holds the name: %v; want an exists error naming team adhoc", err)
	}
	if _, err := c.Kill(ctx, "DEMO-1-plan"); err != nil {
		t.Fatal(err)
	}
	for i, wantStarted := range []bool{true, false} {
		res, err := c.Dispatch(ctx, api.DispatchArgs{Config: cfg, Team: "demo", Issue: "DEMO-1", Mode: "plan"})
		if err != nil {
			t.Fatalf("dispatch #%d: %v", i+1, err)
		}
		if res.Name != "DEMO-1-plan" || res.Started != wantStarted {
			t.Errorf("dispatch #%d = %+v; want DEMO-1-plan, started %t", i+1, res, wantStarted)
		}
	}
	e.poll(ctx, "the planner prints in its worktree", func() (bool, string) {
		var out strings.Builder
		c.Logs(ctx, api.LogsArgs{Name: "DEMO-1-plan"}, &out)
		return strings.Contains(out.String(), "planning DEMO-1 in plan"), out.String()
	})
	err = c.Call(ctx, api.CmdState, api.StateArgs{Config: cfg, Team: "demo"}, &rep)
	if err != nil {
		t.Fatal(err)
	}
	if w := rep.Issues[0].Worker; w == nil || w.Mode != "plan" || rep.Issues[0].Action != controller.ActionSkip {
		t.Errorf("state after dispatch = %+v; want a live plan worker and skip", rep.Issues[0])
	}
	if rep.Issues[0].Worktree == nil || rep.Issues[0].Worktree.Branch != "legion/DEMO-1" {
		t.Errorf("worktree = %+v; want branch legion/DEMO-1", rep.Issues[0].Worktree)
	}
}
