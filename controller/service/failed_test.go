package service_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units"
)

// missingAgent is an agent program that is in no PATH.
const missingAgent = "legion-test-no-such-agent"

// TestMissingAgentStaysFailed: a team whose agent is not installed. The
// planner's worker cannot start it; its unit fails at once (no restart
// loop) and stays failed through ten ticks of the controller, each applied
// through the real code path (`legion state --apply`), and `legion state`
// and `legion sessions list` say why.
func TestMissingAgentStaysFailed(t *testing.T) {
	e := start(t, "", teamOptions{agent: `"` + missingAgent + `"`, wipLimit: 1, staleAfter: "1m", startLimitBurst: 3})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "No agent installed")
	unit := workerUnit(t, id, controller.ModePlan)
	cause := missingAgent + ": executable file not found in $PATH (PATH="

	out, err := e.legionErr(ctx, "state", teamName, "--apply")
	if err == nil || !strings.Contains(out, cause) {
		t.Errorf("first tick: legion state --apply = %v\n%s\nwant a failed dispatch that says %q", err, out, cause)
	}
	e.waitUnit(ctx, "the planner's unit to fail", unit, units.State.Failed)
	for tick := 2; tick <= 10; tick++ {
		if out, err := e.legionErr(ctx, "state", teamName, "--apply"); err != nil {
			t.Fatalf("tick %d: legion state --apply: %v\n%s", tick, err, out)
		}
		st, err := e.mgr.State(ctx, unit)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Failed() || st.NRestarts != 0 {
			t.Fatalf("after tick %d the planner's unit is %v; want it failed, never restarted", tick, st)
		}
	}
	d := e.decision(ctx, id)
	if d.Action != controller.ActionSkip || !strings.Contains(d.Reason, cause) || !strings.Contains(d.Reason, "reset-failed '"+unit+"'") {
		t.Errorf("legion state: %s: %s\nwant skip, with %q and the reset-failed of %s", d.Action, d.Reason, cause, unit)
	}
	list := e.legion(ctx, "sessions", "list")
	t.Logf("legion state reason: %s\nlegion sessions list:\n%s", d.Reason, list)
	if !strings.Contains(list, "failed") || !strings.Contains(list, cause) {
		t.Errorf("legion sessions list:\n%s\nwant the planner failed, with %q", list, cause)
	}

	// A dispatch does not reset the failed unit either; a person does.
	out, err = e.legionErr(ctx, "dispatch", teamName, id, string(controller.ModePlan))
	if err == nil || !strings.Contains(out, cause) || !strings.Contains(out, "reset-failed '"+unit+"'") {
		t.Errorf("legion dispatch of the failed planner = %v\n%s\nwant a refusal with the cause and the reset-failed of %s", err, out, unit)
	}
	if st, err := e.mgr.State(ctx, unit); err != nil || !st.Failed() || st.NRestarts != 0 {
		t.Errorf("after legion dispatch the planner's unit is %v (err %v); want it left failed", st, err)
	}
}

// legionErr runs the CLI like legion and returns its stdout and stderr
// together, and its error.
func (e *env) legionErr(ctx context.Context, args ...string) (string, error) {
	e.t.Helper()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = os.Environ()
	var o bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &o
	if err := cmd.Run(); err != nil {
		return o.String(), fmt.Errorf("legion %s: %w", strings.Join(args, " "), err)
	}
	return o.String(), nil
}

// TestStartLimitHitStaysFailed: a planner that exits with an error at
// every start hits its start limit; `legion state` and `legion sessions
// list` say so, with the last run's exit, and ten ticks leave it failed.
func TestStartLimitHitStaysFailed(t *testing.T) {
	e := start(t, "if-env LEGION_MODE=plan exit 3\n", teamOptions{wipLimit: 1, staleAfter: "1m", startLimitBurst: 2})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Crash at once")
	unit := workerUnit(t, id, controller.ModePlan)
	cause := "restarted too often (systemd's start limit hit); last run: exit code 3"

	e.legion(ctx, "state", teamName, "--apply")
	e.waitUnit(ctx, "the planner's unit to hit its start limit", unit, units.State.Failed)
	for tick := 2; tick <= 10; tick++ {
		if out, err := e.legionErr(ctx, "state", teamName, "--apply"); err != nil {
			t.Fatalf("tick %d: legion state --apply: %v\n%s", tick, err, out)
		}
		if st, err := e.mgr.State(ctx, unit); err != nil || !st.Failed() {
			t.Fatalf("after tick %d the planner's unit is %v (err %v); want it left failed", tick, st, err)
		}
	}
	d := e.decision(ctx, id)
	if d.Action != controller.ActionSkip || !strings.Contains(d.Reason, cause) {
		t.Errorf("legion state: %s: %s\nwant skip, with %q", d.Action, d.Reason, cause)
	}
	list := e.legion(ctx, "sessions", "list")
	if !strings.Contains(list, cause) {
		t.Errorf("legion sessions list:\n%s\nwant the planner failed, with %q", list, cause)
	}
}
