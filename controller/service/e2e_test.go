package service_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units/unitname"
)

// slowPlanScript is the whole path to Done with a planner that works long
// enough for a test to disturb the controller or the helper under it.
const slowPlanScript = "if-env LEGION_MODE=plan once work 20s\n" + planScript + implementScript + implementDone + approveScript + retroFinishScript

// liveWorker waits until unit is active with a main process and returns
// that process's PID.
func (e *env) liveWorker(ctx context.Context, unit string) uint32 {
	e.t.Helper()
	var pid uint32
	e.poll(ctx, unit+" running", func() (bool, string) {
		st, err := e.mgr.State(ctx, unit)
		if err != nil {
			return false, err.Error()
		}
		pid = st.MainPID
		return st.ActiveState == "active" && pid != 0, fmt.Sprintf("%s/%s pid %d", st.ActiveState, st.SubState, pid)
	})
	return pid
}

// assertUntouched fails the test unless unit is still active with main
// process pid.
func (e *env) assertUntouched(ctx context.Context, unit string, pid uint32, after string) {
	e.t.Helper()
	st, err := e.mgr.State(ctx, unit)
	if err != nil {
		e.t.Fatal(err)
	}
	if st.ActiveState != "active" || st.MainPID != pid {
		e.t.Fatalf("after %s %s is %s/%s with MainPID %d; want active with %d", after, unit, st.ActiveState, st.SubState, st.MainPID, pid)
	}
}

// procStart returns the start time (field 22 of /proc/PID/stat) of pid, or
// "" when there is no such process; with the PID it names one process.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces; the fields after it don't.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // field 22 counted from "state" as field 3
}

// TestControllerWatchdogRestart: legion@demo's main process is frozen with
// SIGSTOP, so it stops feeding its watchdog; systemd aborts and restarts
// the unit, the live planner is left running untouched, and the new
// controller takes the issue on to Done.
func TestControllerWatchdogRestart(t *testing.T) {
	e := start(t, slowPlanScript, teamOptions{wipLimit: 1, staleAfter: "1h"})
	ctx := testCtx(t)
	ctl, _ := unitname.ControllerUnit(teamName)
	// A short watchdog and abort timeout for this test only. A frozen
	// process keeps SIGABRT pending; the SIGKILL after TimeoutAbortSec ends
	// it.
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	e.dropIn(filepath.Join(unitDir, ctl+".d", "91-watchdog.conf"), "[Service]\nWatchdogSec=3s\nTimeoutAbortSec=2s\n")
	if out, err := e.sd.Systemctl(t, "daemon-reload"); err != nil {
		t.Fatalf("daemon-reload: %v\n%s", err, out)
	}
	id := e.addIssue(ctx, "Plan slowly")
	e.startController()
	worker := workerUnit(t, id, controller.ModePlan)
	wpid := e.liveWorker(ctx, worker)

	before, err := e.mgr.State(ctx, ctl)
	if err != nil {
		t.Fatal(err)
	}
	if before.MainPID == 0 || before.ActiveState != "active" {
		t.Fatalf("%s is %s/%s with MainPID %d; want active with a main process", ctl, before.ActiveState, before.SubState, before.MainPID)
	}
	cpid := int(before.MainPID)
	cstart := procStart(cpid)
	if cstart == "" {
		t.Fatalf("no /proc entry for %s's main process %d", ctl, cpid)
	}
	// Whatever happens, never leave the frozen controller behind, and
	// signal only that process (same PID and start time).
	t.Cleanup(func() {
		if procStart(cpid) == cstart {
			_ = syscall.Kill(cpid, syscall.SIGCONT)
			_ = syscall.Kill(cpid, syscall.SIGKILL)
		}
	})
	if err := syscall.Kill(cpid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %s main process %d: %v", ctl, cpid, err)
	}

	sawWatchdog := false
	e.poll(ctx, ctl+" restarted by its watchdog", func() (bool, string) {
		st, err := e.mgr.State(ctx, ctl)
		if err != nil {
			return false, err.Error()
		}
		sawWatchdog = sawWatchdog || st.Result == "watchdog" ||
			strings.Contains(e.sd.Log(), ctl+": Watchdog timeout")
		return sawWatchdog && st.NRestarts > before.NRestarts && st.ActiveState == "active" &&
				st.MainPID != 0 && int(st.MainPID) != cpid,
			fmt.Sprintf("%s/%s result %s NRestarts=%d (was %d) MainPID %d watchdog seen %v",
				st.ActiveState, st.SubState, st.Result, st.NRestarts, before.NRestarts, st.MainPID, sawWatchdog)
	})
	for _, l := range strings.Split(e.sd.Log(), "\n") {
		if strings.Contains(l, ctl) && strings.Contains(l, "atchdog") {
			t.Logf("manager: %s", l)
		}
	}
	if procStart(cpid) == cstart {
		t.Errorf("the frozen controller %d is still there after the restart", cpid)
	}
	e.assertUntouched(ctx, worker, wpid, "the watchdog restart of "+ctl)
	// The restarted controller carries on: the planner finishes and the
	// issue goes all the way.
	e.assertFinished(ctx, id, id+".txt", "impl "+id)
	if st, err := e.mgr.State(ctx, ctl); err != nil || st.ActiveState != "active" {
		t.Errorf("at the end %s is %+v, %v; want active", ctl, st, err)
	}
}

// TestHelperKilledMidRun: the helper (legion.service) is killed with
// SIGKILL twice while the planner works; the planner runs on untouched,
// the helper comes back (its restart or the socket), and the controller,
// dialling it again, takes the issue to Done.
func TestHelperKilledMidRun(t *testing.T) {
	e := start(t, slowPlanScript, teamOptions{wipLimit: 1, staleAfter: "1h"})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Plan through helper deaths")
	e.startController()
	worker := workerUnit(t, id, controller.ModePlan)
	wpid := e.liveWorker(ctx, worker)

	var prev uint32
	for i := 1; i <= 2; i++ {
		hpid := e.liveHelper(ctx, prev)
		if err := syscall.Kill(int(hpid), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("kill %d: SIGKILL %s main process %d: %v", i, unitname.HelperUnit, hpid, err)
		}
		prev = hpid
		e.assertUntouched(ctx, worker, wpid, fmt.Sprintf("kill %d of %s", i, unitname.HelperUnit))
	}
	// The helper is back (a new process) with the planner still the same.
	e.liveHelper(ctx, prev)
	e.assertUntouched(ctx, worker, wpid, "the helper's return")
	e.assertFinished(ctx, id, id+".txt", "impl "+id)
}

// liveHelper waits until legion.service is active with a main process
// other than not (0: any) and returns its PID. The controller dials the
// helper every tick, so the socket starts it if nothing else does.
func (e *env) liveHelper(ctx context.Context, not uint32) uint32 {
	e.t.Helper()
	var pid uint32
	e.poll(ctx, unitname.HelperUnit+" running anew", func() (bool, string) {
		st, err := e.mgr.State(ctx, unitname.HelperUnit)
		if err != nil {
			return false, err.Error()
		}
		pid = st.MainPID
		return st.ActiveState == "active" && pid != 0 && pid != not,
			fmt.Sprintf("%s/%s NRestarts=%d MainPID %d (killed %d)", st.ActiveState, st.SubState, st.NRestarts, pid, not)
	})
	return pid
}
