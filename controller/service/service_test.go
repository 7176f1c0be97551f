package service_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/unitname"
)

// The scripted agent's parts, by mode; @LEGION@ is the binary. Each mode
// does its work, then labels the issue worker-done through the CLI, as the
// worker skill says.
const (
	planScript = `
if-env LEGION_MODE=plan say planning $LEGION_ISSUE
if-env LEGION_MODE=plan run @LEGION@ issue comment $LEGION_TEAM $LEGION_ISSUE "plan: write the file"
if-env LEGION_MODE=plan run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
`
	implementScript = `
if-env LEGION_MODE=implement once work 300ms
if-env LEGION_MODE=implement once run sh -c "echo impl $LEGION_ISSUE > $LEGION_ISSUE.txt"
if-env LEGION_MODE=implement once run git add -A
if-env LEGION_MODE=implement once run git commit -qm "implement $LEGION_ISSUE"
`
	// The implementer's first run adds worker-done (once: a resumed one,
	// after changes were requested, adds its own).
	implementDone = `
if-env LEGION_MODE=implement once run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
`
	approveScript = `
if-env LEGION_MODE=review run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-approved
if-env LEGION_MODE=review run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
`
	retroFinishScript = `
if-env LEGION_MODE=retro say retro of $LEGION_ISSUE
if-env LEGION_MODE=retro run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
if-env LEGION_MODE=finish run sh -c "@LEGION@ worktree finish $LEGION_TEAM $LEGION_ISSUE && @LEGION@ issue move $LEGION_TEAM $LEGION_ISSUE Done"
`
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestTodoToDone: one issue goes through plan, implement, review, retro and
// finish under legion@demo; the implementer's file lands on main.
func TestTodoToDone(t *testing.T) {
	e := start(t, planScript+implementScript+implementDone+approveScript+retroFinishScript, teamOptions{wipLimit: 1})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Write a file")
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)
	is := e.issue(ctx, id)
	if len(is.Labels) != 0 {
		t.Errorf("labels of the done issue = %v; want none", is.Labels)
	}
	// Every phase ran: the retro in the implementer's own session.
	for _, m := range []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeFinish} {
		e.sessionFile(id, m)
	}
	if text, _ := e.sessionFile(id, controller.ModeRetro); !strings.Contains(text, "retro of "+id) {
		t.Errorf("the implementer's session has no retro in it:\n%s", tail(text, 20))
	}
}

// TestChangesRequested: the first review requests changes; the same
// implementer session is resumed, fixes, and the second review approves.
func TestChangesRequested(t *testing.T) {
	script := planScript + implementScript + `
if-env LEGION_MODE=implement if-resumed say implementer-resumed $SESSION_ID
if-env LEGION_MODE=implement if-resumed run sh -c "echo fixed >> $LEGION_ISSUE.txt"
if-env LEGION_MODE=implement if-resumed run git commit -qam "fix $LEGION_ISSUE"
if-env LEGION_MODE=implement if-resumed run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
` + implementDone + `
if-env LEGION_MODE=review once run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-changes-requested
if-env LEGION_MODE=review if-resumed run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-approved
if-env LEGION_MODE=review run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
` + retroFinishScript
	e := start(t, script, teamOptions{wipLimit: 1})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Write a file twice")
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "fixed")
	text, sid := e.sessionFile(id, controller.ModeImplement)
	if !strings.Contains(text, "implementer-resumed "+sid) {
		t.Errorf("implementer session %s was not resumed for the changes:\n%s", sid, tail(text, 30))
	}
	// The worker started the agent with the team's resume argv.
	tr := e.transcript(sid)
	if want := "--resume " + sid + ` "# Legion: implement`; !strings.Contains(tr, want) {
		t.Errorf("transcript of %s has no %q:\n%s", sid, want, tail(tr, 30))
	}
	if n := strings.Count(e.git(e.ws, "log", "--no-merges", "--format=%s", "main"), id); n != 2 {
		t.Errorf("main has %d commits of %s; want 2 (implement, fix)", n, id)
	}
}

// TestBlockedQuestion: the implementer asks; the controller escalates, the
// human answers in a comment with user-feedback-given, the answer reaches
// the agent's terminal and the agent finishes with it.
func TestBlockedQuestion(t *testing.T) {
	script := planScript + `
if-env LEGION_MODE=implement ask Which database? | Postgres | SQLite
if-env LEGION_MODE=implement run sh -c "echo db=$ANSWER > $LEGION_ISSUE.txt"
if-env LEGION_MODE=implement run git add -A
if-env LEGION_MODE=implement run git commit -qm "db for $LEGION_ISSUE"
` + implementDone + approveScript + retroFinishScript
	e := start(t, script, teamOptions{wipLimit: 1})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Pick a database")
	e.startController()
	e.poll(ctx, "the question escalated", func() (bool, string) {
		is := e.issue(ctx, id)
		asked := false
		for _, c := range is.Comments {
			asked = asked || (c.Author == controller.AuthorLegion && strings.Contains(c.Text, "Which database?"))
		}
		return asked && slices.Contains(is.Labels, controller.LabelInputNeeded), fmt.Sprintf("labels %v comments %v", is.Labels, is.Comments)
	})
	e.legion(ctx, "issue", "comment", "--author", "ana", teamName, id, "SQLite")
	e.legion(ctx, "issue", "label", teamName, id, controller.LabelFeedbackGiven)
	e.assertFinished(ctx, id, id+".txt", "db=SQLite")
	is := e.issue(ctx, id)
	if slices.Contains(is.Labels, controller.LabelInputNeeded) || slices.Contains(is.Labels, controller.LabelFeedbackGiven) {
		t.Errorf("labels after the relay = %v; want neither human-input label", is.Labels)
	}
}

// TestExitedWithoutWorkerDoneResumed: the no-silent-stall invariant under
// the real manager: the implementer exits cleanly (code 0) without
// worker-done, as an agent that crashed out or was ended by hand; In
// Progress with no worker and no worker-done resumes it, and the issue
// finishes.
func TestExitedWithoutWorkerDoneResumed(t *testing.T) {
	script := planScript + implementScript + `
if-env LEGION_MODE=implement if-new exit 0
if-env LEGION_MODE=implement if-resumed say implementer-resumed $SESSION_ID
if-env LEGION_MODE=implement if-resumed run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
` + approveScript + retroFinishScript
	e := start(t, script, teamOptions{wipLimit: 1})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Exit early")
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)
	if text, sid := e.sessionFile(id, controller.ModeImplement); !strings.Contains(text, "implementer-resumed "+sid) {
		t.Errorf("the implementer that exited without worker-done was not resumed:\n%s", tail(text, 30))
	}
}

// TestHungAgentResumed: the implementer hangs after its work; its worker
// stops feeding the watchdog, systemd restarts the unit, and the session
// is resumed and finishes.
func TestHungAgentResumed(t *testing.T) {
	script := planScript + implementScript + `
if-env LEGION_MODE=implement if-new hang
if-env LEGION_MODE=implement if-resumed say implementer-resumed $SESSION_ID
if-env LEGION_MODE=implement if-resumed work 1500ms
` + implementDone + approveScript + retroFinishScript
	e := start(t, script, teamOptions{wipLimit: 1, staleAfter: "2s"})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Hang once")
	e.startController()
	unit := workerUnit(t, id, controller.ModeImplement)
	restarts := 0
	e.poll(ctx, "the hung implementer restarted by systemd", func() (bool, string) {
		st, err := e.mgr.State(ctx, unit)
		if err != nil {
			return false, err.Error()
		}
		restarts = max(restarts, int(st.NRestarts))
		return restarts >= 1, fmt.Sprintf("%s %s/%s NRestarts=%d", unit, st.ActiveState, st.SubState, st.NRestarts)
	})
	e.assertFinished(ctx, id, id+".txt", "impl "+id)
	text, sid := e.sessionFile(id, controller.ModeImplement)
	if !strings.Contains(text, "implementer-resumed "+sid) {
		t.Errorf("implementer session %s was not resumed after the restart:\n%s", sid, tail(text, 30))
	}
	tr := e.transcript(sid)
	for _, want := range []string{"WATCHDOG=trigger sent", "run 2 start (resume)"} {
		if !strings.Contains(tr, want) {
			t.Errorf("transcript of %s has no %q:\n%s", sid, want, tail(tr, 30))
		}
	}
}

// TestWIPLimit: three issues with wip_limit 1 all get done, and at no
// sample were two code workers (any mode but review) running at once.
func TestWIPLimit(t *testing.T) {
	e := start(t, planScript+implementScript+implementDone+approveScript+retroFinishScript, teamOptions{wipLimit: 1})
	ctx := testCtx(t)
	ids := []string{e.addIssue(ctx, "one"), e.addIssue(ctx, "two"), e.addIssue(ctx, "three")}
	e.startController()
	worst := ""
	maxLive := 0
	e.poll(ctx, "all three issues done", func() (bool, string) {
		var live []string
		for _, s := range e.workers(ctx) {
			if running(s) && !strings.HasSuffix(s.Name, "-"+string(controller.ModeReview)+".service") {
				live = append(live, s.Name)
			}
		}
		if len(live) > maxLive {
			maxLive, worst = len(live), strings.Join(live, " ")
		}
		var st []string
		done := 0
		for _, id := range ids {
			is := e.issue(ctx, id)
			st = append(st, id+"="+string(is.Status))
			if is.Status == controller.StatusDone {
				done++
			}
		}
		return done == len(ids), strings.Join(st, " ")
	})
	if maxLive == 0 {
		t.Errorf("no code worker was ever seen running; the samples prove nothing")
	}
	if maxLive > 1 {
		t.Errorf("%d code workers ran at once (%s); want at most 1 (wip_limit 1)", maxLive, worst)
	}
	for _, id := range ids {
		e.assertFinished(ctx, id, id+".txt", "impl "+id)
	}
}

// TestStopAndRestartController: killing legion@demo (systemd restarts it)
// leaves the team's worker running untouched; `systemctl --user stop
// legion@demo` stops it.
func TestStopAndRestartController(t *testing.T) {
	e := start(t, "if-env LEGION_MODE=plan hang\n", teamOptions{wipLimit: 1, staleAfter: "1h"})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Plan forever")
	e.startController()
	ctl, _ := unitname.ControllerUnit(teamName)
	worker := workerUnit(t, id, controller.ModePlan)
	var pid uint32
	e.poll(ctx, "the planner running", func() (bool, string) {
		st, err := e.mgr.State(ctx, worker)
		if err != nil {
			return false, err.Error()
		}
		pid = st.MainPID
		return st.ActiveState == "active" && pid != 0, fmt.Sprintf("%s/%s pid %d", st.ActiveState, st.SubState, pid)
	})
	if err := e.mgr.Kill(ctx, ctl, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.poll(ctx, "legion@demo restarted", func() (bool, string) {
		st, err := e.mgr.State(ctx, ctl)
		if err != nil {
			return false, err.Error()
		}
		return st.NRestarts >= 1 && st.ActiveState == "active", fmt.Sprintf("%s/%s NRestarts=%d", st.ActiveState, st.SubState, st.NRestarts)
	})
	st, err := e.mgr.State(ctx, worker)
	if err != nil {
		t.Fatal(err)
	}
	if st.ActiveState != "active" || st.MainPID != pid {
		t.Fatalf("after the controller's restart the planner is %s with MainPID %d; want active with %d", st.ActiveState, st.MainPID, pid)
	}
	if _, err := e.sd.Systemctl(t, "stop", ctl); err != nil {
		t.Fatal(err)
	}
	e.waitNoWorkers(ctx)
	if st, err := e.mgr.State(ctx, ctl); err != nil || running(st) {
		t.Errorf("after stop %s is %+v, %v; want inactive", ctl, st, err)
	}
}

// runStart matches the transcript's marker line of a run's start.
var runStart = regexp.MustCompile(`\[legion\] \S+ run \d+ start`)

// TestFailedWorkerStaysFailed: a planner that exits with an error at every
// start hits its start limit and its unit fails. The controller leaves it
// failed (dispatching it again would reset systemd's start limit and make
// the restart loop endless) and says why in `legion state`; once a person
// runs reset-failed, the next tick dispatches the planner again.
func TestFailedWorkerStaysFailed(t *testing.T) {
	e := start(t, "if-env LEGION_MODE=plan exit 3\n", teamOptions{wipLimit: 1, staleAfter: "1m", startLimitBurst: 2})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Crash at once")
	e.startController()
	unit := workerUnit(t, id, controller.ModePlan)
	sid := sessionID(id, controller.ModePlan)
	runs := func() int { return len(runStart.FindAllString(e.transcriptOrEmpty(sid), -1)) }

	e.waitUnit(ctx, "the crashing planner to fail for good", unit, units.State.Failed)
	e.poll(ctx, "legion state to say the planner failed", func() (bool, string) {
		d := e.decision(ctx, id)
		return d.Action == controller.ActionSkip && strings.Contains(d.Reason, "failed for good") &&
			strings.Contains(d.Reason, "reset-failed '"+unit+"'"), fmt.Sprintf("%s: %s", d.Action, d.Reason)
	})
	before := runs()
	if before != 2 {
		t.Errorf("the planner ran %d times before its unit failed; want 2 (start_limit_burst 2)", before)
	}
	e.waitTicks(ctx, 4)
	if st, err := e.mgr.State(ctx, unit); err != nil || !st.Failed() {
		t.Errorf("after four ticks the planner's unit is %v (err %v); want it left failed", st, err)
	}
	if n := runs(); n != before {
		t.Errorf("the failed planner was started again by the controller: %d runs, %d before", n, before)
	}

	if _, err := e.sd.Systemctl(t, "reset-failed", unit); err != nil {
		t.Fatal(err)
	}
	e.poll(ctx, "the planner dispatched again after reset-failed", func() (bool, string) {
		n := runs()
		return n > before, fmt.Sprintf("%d runs", n)
	})
}

// TestSessionEventsWakeController: with a tick interval of an hour and no
// watchdog, only the first tick comes on its own; every later phase is
// dispatched because the helper pushed the previous worker's exit
// (sessions.watch) and woke the loop. Without the push the issue would
// stay in its first phase for an hour.
func TestSessionEventsWakeController(t *testing.T) {
	e := start(t, planScript+implementScript+implementDone+approveScript+retroFinishScript, teamOptions{wipLimit: 1, interval: "1h"})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Write a file")
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)
}

// waitTicks waits until legion@demo has completed n more ticks: each
// completed tick pings the watchdog, which moves the unit's
// WatchdogTimestampMonotonic (looked at far more often than the test's
// 1s interval, so no tick goes unseen; one unseen would only make the
// wait longer).
func (e *env) waitTicks(ctx context.Context, n int) {
	e.t.Helper()
	ctl, _ := unitname.ControllerUnit(teamName)
	ping := func() string {
		out, err := e.sd.Systemctl(e.t, "show", "--value", "-p", "WatchdogTimestampMonotonic", ctl)
		if err != nil {
			e.t.Fatalf("systemctl show %s: %v: %s", ctl, err, out)
		}
		return strings.TrimSpace(out)
	}
	last, seen := ping(), 0
	e.poll(ctx, fmt.Sprintf("%d ticks of %s", n, ctl), func() (bool, string) {
		if p := ping(); p != last {
			last, seen = p, seen+1
		}
		return seen >= n, fmt.Sprintf("%d ticks, last watchdog ping at %s", seen, last)
	})
}

// TestTrackerChangeWakesController: with a tick interval of an hour and
// no watchdog, the planner's question is escalated on the helper's
// session event, and the person's answer, a comment and
// user-feedback-given through the CLI, is relayed because the write to
// the local tracker woke the loop (inotify): no session changes in
// between, so without the tracker watch it would wait an hour.
func TestTrackerChangeWakesController(t *testing.T) {
	script := `
if-env LEGION_MODE=plan ask Which database? | Postgres | SQLite
if-env LEGION_MODE=plan say chose $ANSWER
if-env LEGION_MODE=plan run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
`
	e := start(t, script, teamOptions{wipLimit: 1, interval: "1h"})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Pick a database")
	e.startController()
	e.poll(ctx, "the question escalated", func() (bool, string) {
		is := e.issue(ctx, id)
		return slices.Contains(is.Labels, controller.LabelInputNeeded), fmt.Sprintf("labels %v comments %v", is.Labels, is.Comments)
	})
	e.legion(ctx, "issue", "comment", "--author", "ana", teamName, id, "SQLite")
	e.legion(ctx, "issue", "label", teamName, id, controller.LabelFeedbackGiven)
	e.poll(ctx, "the answer in the planner's session", func() (bool, string) {
		files, _ := filepath.Glob(filepath.Join(e.sd.Home, ".claude", "projects", "*", sessionID(id, controller.ModePlan)+".jsonl"))
		if len(files) != 1 {
			return false, fmt.Sprintf("session files %v", files)
		}
		b, _ := os.ReadFile(files[0])
		return strings.Contains(string(b), "chose SQLite"), tail(string(b), 5)
	})
}
