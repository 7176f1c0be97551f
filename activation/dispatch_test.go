package activation

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
)

// TestStateAndDispatch: through the real CLI and helper, a team added
// after the helper started can be spawned in at once (the CLI reads the
// team, the helper has no team list); the team's state suggests planning a
// new issue; dispatch (planned by the CLI, started by the helper's spawn)
// starts the planner as its own unit in the issue's worktree; a second
// dispatch leaves it alone; state then sees the live worker and skips the
// issue.
func TestStateAndDispatch(t *testing.T) {
	e := startEnv(t)
	ctx := t.Context()
	e.list(ctx) // the helper runs before the team exists
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
	f.WriteString("agent.kind = \"custom\"\n") // a shell, not Claude Code: no --settings
	f.WriteString("agent.new = [\"/bin/sh\", \"-c\", \"echo planning {issue} in {mode}; exec sleep 600\"]\n")
	f.WriteString("agent.resume = [\"/bin/sh\", \"-c\", \"echo resuming {issue}; exec sleep 600\"]\n")
	f.Close()
	if id := strings.TrimSpace(e.mustLegion(ctx, "issue", "add", "demo", "Plan me")); id != "DEMO-1" {
		t.Fatalf("issue add printed %q; want DEMO-1", id)
	}

	// Spawning in the new team works without restarting the helper.
	e.mustLegion(ctx, "spawn", "--team", "demo", "--name", "demo-cmd", "--", "/bin/sleep", "600")
	if _, err := e.client(ctx).Kill(ctx, "demo-cmd"); err != nil {
		t.Fatal(err)
	}

	state := func() controller.Report {
		t.Helper()
		var rep controller.Report
		out := e.mustLegion(ctx, "state", "demo", "--json")
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("state --json printed %q: %v", out, err)
		}
		return rep
	}
	dispatch := func() (api.SpawnResult, error) {
		var res api.SpawnResult
		out, errOut, err := e.legion(ctx, "dispatch", "demo", "DEMO-1", "plan", "--json")
		if err != nil {
			return res, fmt.Errorf("%w: %s", err, errOut)
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("dispatch --json printed %q: %v", out, err)
		}
		return res, nil
	}
	if rep := state(); len(rep.Issues) != 1 || rep.Issues[0].Action != controller.ActionDispatchPlanner {
		t.Fatalf("state = %+v; want DEMO-1 with dispatch_planner", rep.Issues)
	}
	// A live session of another team (here ad hoc) that holds the name
	// DEMO-1-plan is not this team's planner: dispatch says so and starts
	// nothing, and succeeds once the name is free.
	c := e.client(ctx)
	e.spawn(ctx, "DEMO-1-plan", "/bin/sleep", "600")
	if _, err := dispatch(); err == nil || !strings.Contains(err.Error(), "team adhoc") || !strings.Contains(err.Error(), "(exists)") {
		t.Fatalf("dispatch while team adhoc holds the name: %v; want an exists error naming team adhoc", err)
	}
	if _, err := c.Kill(ctx, "DEMO-1-plan"); err != nil {
		t.Fatal(err)
	}
	for i, wantStarted := range []bool{true, false} {
		res, err := dispatch()
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
	rep := state()
	if w := rep.Issues[0].Worker; w == nil || w.Mode != "plan" || rep.Issues[0].Action != controller.ActionSkip {
		t.Errorf("state after dispatch = %+v; want a live plan worker and skip", rep.Issues[0])
	}
	if rep.Issues[0].Worktree == nil || rep.Issues[0].Worktree.Branch != "legion/DEMO-1" {
		t.Errorf("worktree = %+v; want branch legion/DEMO-1", rep.Issues[0].Worktree)
	}
}
