package activation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestRespawnOfAFailedSession: the unit of a failed session stays loaded,
// and anyone may start it again (`systemctl --user start`) on the spec it
// has. A new spawn of the name unloads it before it touches that spec or
// the registry: a start just before the helper writes them (made here by
// a hook at that point) finds no unit, and the new session is the
// helper's own, with a new token and the earlier entry pruned.
func TestRespawnOfAFailedSession(t *testing.T) {
	sd := sdtest.Start(t)
	var armed atomic.Bool
	manual := make(chan error, 1)
	// A start limit that has run out by the time of the new spawn, as it
	// has some minutes after a failure: then the failed unit may be started.
	ip := startInProcessOn(t, nil, Options{beforeSpecWrite: func(unit string) {
		if armed.CompareAndSwap(true, false) {
			_, err := sd.Systemctl(t, "start", unit)
			manual <- err
		}
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := ip.client(t)

	args := testLaunch("again", "/bin/sh", "-c", "exit 3")
	args.Cooldown = new(api.Duration(50 * time.Millisecond))
	args.StartLimitBurst, args.StartLimitInterval = 2, api.Duration(time.Second)
	first, err := c.Spawn(ctx, args)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	regPath := filepath.Join(ip.h.opts.StateDir, registryDir, first.ID+".json")
	poll(t, ctx, "a session that always exits 3 to fail at the start limit", func() (bool, string) {
		s, err := c.Status(ctx, "again")
		return err == nil && s.State == api.StateFailed, fmt.Sprintf("%+v, %v", s, err)
	})
	if st, err := ip.h.mgr.State(ctx, first.Unit); err != nil || st.ActiveState != "failed" {
		t.Fatalf("unit %s: %+v, %v; want it loaded and failed", first.Unit, st, err)
	}
	// systemd counts starts against the limit on the monotonic clock; the
	// limit has run out once StartLimitInterval has passed since the last.
	poll(t, ctx, "the start limit of "+first.Unit+" to run out", func() (bool, string) {
		out, err := sd.Systemctl(t, "show", "--value", "-p", "InactiveExitTimestampMonotonic", first.Unit)
		if err != nil {
			return false, fmt.Sprintf("systemctl show: %v: %s", err, out)
		}
		usec, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			return false, fmt.Sprintf("InactiveExitTimestampMonotonic %q: %v", out, err)
		}
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
			t.Fatal(err)
		}
		since := time.Duration(now.Nano()) - time.Duration(usec)*time.Microsecond
		return since > time.Duration(args.StartLimitInterval), fmt.Sprintf("last start %v ago", since)
	})
	old, err := proto.ReadRegistry(regPath)
	if err != nil {
		t.Fatal(err)
	}

	armed.Store(true)
	args.Argv = []string{"/bin/sh", "-c", "echo second life; exec sleep 60"}
	second, err := c.Spawn(ctx, args)
	if err != nil {
		t.Fatalf("Spawn of the failed session's name: %v; want a new start", err)
	}
	select {
	case err := <-manual:
		if err == nil {
			t.Errorf("systemctl start %s, just before the new spec was written, succeeded; want the failed unit unloaded by then", first.Unit)
		} else {
			t.Logf("systemctl start %s in the window: %v", first.Unit, err)
		}
	default:
		t.Fatal("the hook before the spec write did not run")
	}
	if second != first {
		t.Errorf("second Spawn = %+v; want the same name, id and unit as the first, %+v", second, first)
	}
	s, err := c.Status(ctx, "again")
	if err != nil || s.State != api.StateRunning {
		t.Errorf("status after the new start = %+v, %v; want running", s, err)
	}
	poll(t, ctx, "the registry entry of the new start, with a new token and a running child", func() (bool, string) {
		r, err := proto.ReadRegistry(regPath)
		return err == nil && r.Token != old.Token && r.ChildPID != 0, fmt.Sprintf("%+v, %v", r, err)
	})
	pruned, err := os.ReadDir(filepath.Join(ip.h.opts.StateDir, prunedDir))
	if err != nil || len(pruned) != 1 {
		t.Errorf("pruned entries: %v, %v; want the earlier life's entry", pruned, err)
	}
}

// TestStatusInstructions: what a worker's agent was told (the spawn's
// Instructions) is what sessions.status shows, and only status: the list
// stays small.
func TestStatusInstructions(t *testing.T) {
	sdtest.Start(t)
	ip := startInProcessOn(t, nil, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := ip.client(t)
	args := testLaunch("told", "/bin/sh", "-c", "exec sleep 60")
	args.Instructions = "# Legion: plan DEMO-1 (team t)\n\n```sh\nlegion issue show t DEMO-1\n```\n"
	if _, err := c.Spawn(ctx, args); err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	s, err := c.Status(ctx, "told")
	if err != nil || s.Instructions != args.Instructions {
		t.Errorf("Status(told).Instructions = %q, %v; want %q", s.Instructions, err, args.Instructions)
	}
	l, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Sessions {
		if s.Instructions != "" {
			t.Errorf("List has the instructions of %s; want them in status only", s.Name)
		}
	}
}

// TestSpawnMaxLive: spawns with the machine's cap (MaxLive) are admitted
// one at a time against the live sessions of all teams: of several asked
// at once with room for one more, exactly one starts and the others are
// refused with no_room, naming the cap; once a session ended there is
// room again.
func TestSpawnMaxLive(t *testing.T) {
	sdtest.Start(t)
	ip := startInProcessOn(t, nil, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := ip.client(t)
	first := testLaunch("busy-1", "/bin/sleep", "600")
	if _, err := c.Spawn(ctx, first); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			a := testLaunch(fmt.Sprintf("capped-%d", i), "/bin/sleep", "600")
			a.MaxLive = 2
			_, err := ip.client(t).Spawn(ctx, a)
			errs <- err
		}()
	}
	started, refused := 0, 0
	for range 4 {
		switch err := <-errs; {
		case err == nil:
			started++
		case errors.Is(err, api.ErrNoRoom) && strings.Contains(err.Error(), "session_limit 2"):
			refused++
		default:
			t.Errorf("Spawn: %v; want success or no_room", err)
		}
	}
	if started != 1 || refused != 3 {
		t.Errorf("%d started, %d refused; want 1 and 3 (room for one more beside busy-1)", started, refused)
	}
	if _, err := c.Kill(ctx, "busy-1"); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "busy-1 ended", func() (bool, string) {
		s, err := c.Status(ctx, "busy-1")
		return err == nil && s.State.Ended(), fmt.Sprintf("%+v, %v", s, err)
	})
	a := testLaunch("capped-after", "/bin/sleep", "600")
	a.MaxLive = 2
	if _, err := c.Spawn(ctx, a); err != nil {
		t.Errorf("Spawn after busy-1 ended: %v; want room", err)
	}
}

// teamDispatch is the dispatch (a reused spawn, as a controller sends) of
// issue's worker in mode for team demo of id teamID: a sleep, its ID the
// worker's deterministic one.
func teamDispatch(teamID uuid.UUID, issue, mode string) api.SpawnArgs {
	a := testLaunch(issue+"-"+mode, "/bin/sleep", "600")
	a.Team, a.TeamID, a.Issue, a.Mode, a.Role, a.Reuse = "demo", teamID.String(), issue, mode, "worker", true
	a.ID = uuid.NewSHA1(teamID, []byte(issue+":"+mode)).String()
	return a
}

// TestSpawnIssueBusy: a dispatch is refused (issue_busy, naming the unit)
// while another phase's worker unit of the same issue is loaded and not
// failed, whatever the session table says: running, or killed -9 and
// waiting out its restart cooldown (the chaos run: the next phase started
// while systemd was about to restart the last). Another issue, and the
// same issue once that unit has ended, start.
func TestSpawnIssueBusy(t *testing.T) {
	sdtest.Start(t)
	ip := startInProcessOn(t, nil, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := ip.client(t)
	teamID := uuid.MustParse("6f1c2b9e-0000-4000-8000-000000000001")
	dispatch := func(issue, mode string) api.SpawnArgs {
		a := teamDispatch(teamID, issue, mode)
		a.Cooldown = new(api.Duration(time.Minute)) // the kill -9 below leaves it waiting
		return a
	}
	review, err := c.Spawn(ctx, dispatch("ENG-4", "review"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Spawn(ctx, dispatch("ENG-5", "plan")); err != nil {
		t.Errorf("dispatch of another issue: %v; want it started", err)
	}
	busy := func(when string) {
		t.Helper()
		_, err := c.Spawn(ctx, dispatch("ENG-4", "retro"))
		if !errors.Is(err, api.ErrIssueBusy) || !strings.Contains(err.Error(), review.Unit) {
			t.Errorf("dispatch of ENG-4's retro while its reviewer %s: %v; want issue_busy naming %s", when, err, review.Unit)
		}
	}
	busy("runs")
	st, err := ip.h.mgr.State(ctx, review.Unit)
	if err != nil || st.MainPID == 0 {
		t.Fatalf("the reviewer's unit: %v, %v", st, err)
	}
	if err := unix.Kill(int(st.MainPID), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the reviewer's unit waiting to restart", func() (bool, string) {
		st, err := ip.h.mgr.State(ctx, review.Unit)
		return err == nil && st.AutoRestart(), fmt.Sprintf("%s, %v", st, err)
	})
	busy("waits to restart")
	if _, err := c.Kill(ctx, review.Name); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the reviewer's unit gone", func() (bool, string) {
		st, err := ip.h.mgr.State(ctx, review.Unit)
		return err == nil && st.Stopped(), fmt.Sprintf("%s, %v", st, err)
	})
	if _, err := c.Spawn(ctx, dispatch("ENG-4", "retro")); err != nil {
		t.Errorf("dispatch of ENG-4's retro once its reviewer ended: %v; want it started", err)
	}
}

// TestSpawnIssueHeld: a worker unit of the issue that runs but is no
// session of the helper (recovery could not adopt it: its registry entry
// and spec garbled, as the third 30-minute chaos run had a planner) holds
// the issue: a dispatch of its next phase is refused with issue_held,
// naming the unit and how to stop it, not issue_busy (a wait that ends by
// itself). Once a person stopped it, the dispatch starts.
func TestSpawnIssueHeld(t *testing.T) {
	sdtest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	before := startInProcessOn(t, nil, Options{})
	c := before.client(t)
	teamID := uuid.MustParse("6f1c2b9e-0000-4000-8000-000000000002")
	dispatch := func(issue, mode string) api.SpawnArgs { return teamDispatch(teamID, issue, mode) }
	plan, err := c.Spawn(ctx, dispatch("CC-1", "plan"))
	if err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the planner to run", func() (bool, string) {
		s, err := c.Status(ctx, plan.Name)
		return err == nil && s.State == api.StateRunning, fmt.Sprintf("%+v, %v", s, err)
	})
	stateDir := before.h.opts.StateDir
	before.stop(t)
	for _, p := range []string{filepath.Join(stateDir, registryDir, plan.ID+".json"), filepath.Join(stateDir, specDir, plan.ID+".json")} {
		if err := os.WriteFile(p, []byte("\x00garbled{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	after := startInProcessOn(t, nil, Options{})
	c = after.client(t)
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list.Quarantined, func(q api.Quarantined) bool { return q.Name == plan.Unit }) {
		t.Fatalf("after recovery: quarantined %+v; want the planner's unit %s, left running", list.Quarantined, plan.Unit)
	}
	_, err = c.Spawn(ctx, dispatch("CC-1", "implement"))
	if !errors.Is(err, api.ErrIssueHeld) || !strings.Contains(err.Error(), "systemctl --user stop '"+plan.Unit+"'") {
		t.Fatalf("dispatch of CC-1's implementer beside its unadopted planner: %v; want issue_held naming `systemctl --user stop '%s'`", err, plan.Unit)
	}
	// The planner dispatched again: its own unit runs, but as no session
	// of this helper, which cannot reach it. It used to be reported as
	// started (a dispatch is idempotent), and the controller, which then
	// lists no worker of the issue, dispatched it every tick for ever (the
	// 30-minute chaos run with seed 6376168855303454753, CC-1's
	// implementer).
	_, err = c.Spawn(ctx, dispatch("CC-1", "plan"))
	if !errors.Is(err, api.ErrIssueHeld) || !strings.Contains(err.Error(), "systemctl --user stop '"+plan.Unit+"'") {
		t.Fatalf("dispatch of CC-1's planner again, its unit unadopted: %v; want issue_held naming `systemctl --user stop '%s'`", err, plan.Unit)
	}
	if err := after.h.mgr.Stop(ctx, plan.Unit); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the planner's unit gone", func() (bool, string) {
		st, err := after.h.mgr.State(ctx, plan.Unit)
		return err == nil && st.Stopped(), fmt.Sprintf("%s, %v", st, err)
	})
	if _, err := c.Spawn(ctx, dispatch("CC-1", "implement")); err != nil {
		t.Errorf("dispatch of CC-1's implementer once its planner was stopped: %v; want it started", err)
	}
}
