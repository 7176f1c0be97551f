package activation

import (
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
)

func TestDeriveState(t *testing.T) {
	unit := func(active, sub string) units.State {
		return units.State{Name: "u", LoadState: "loaded", ActiveState: active, SubState: sub}
	}
	stopping := func(result string) units.State {
		return units.State{Name: "u", LoadState: "loaded", ActiveState: "deactivating", SubState: "stop-sigterm", Result: result}
	}
	gone := units.State{Name: "u", LoadState: "not-found", ActiveState: "inactive", SubState: "dead"}
	running := &proto.Info{State: proto.StateRunning, Running: true}
	tests := []struct {
		name string
		us   units.State
		in   *proto.Info
		reg  *proto.Registry
		want api.State
	}{
		{"running", unit("active", "running"), running, nil, api.StateRunning},
		{"running, no info yet", unit("active", "running"), nil, nil, api.StateRunning},
		{"waiting on a human", unit("active", "running"), &proto.Info{Running: true, Waiting: true}, nil, api.StateWaitingInput},
		{"stale", unit("active", "running"), &proto.Info{Running: true, Stale: true}, nil, api.StateStale},
		{"waiting beats stale", unit("active", "running"), &proto.Info{Running: true, Waiting: true, Stale: true}, nil, api.StateWaitingInput},
		// A run over while its worker lingers is not the session's end: a
		// kill -9 now still has systemd restart the phase (workerLeaving).
		{"agent exited 0, worker lingering", unit("active", "running"), &proto.Info{State: proto.StateExited, Exit: &proto.ExitInfo{Code: 0}}, nil, api.StateRunning},
		{"agent exited 0, worker gone", gone, nil, &proto.Registry{State: proto.StateExited, LastExit: &proto.ExitInfo{Code: 0}}, api.StateExited},
		{"agent failed, restart coming", unit("active", "running"), &proto.Info{State: proto.StateExited, Exit: &proto.ExitInfo{Code: 4}}, nil, api.StateStarting},
		{"agent killed, restart coming", unit("active", "running"), &proto.Info{State: proto.StateExited, Exit: &proto.ExitInfo{Signal: "SIGKILL"}}, nil, api.StateStarting},
		{"session stopped", unit("deactivating", "stop-sigterm"), &proto.Info{State: proto.StateStopped, Exit: &proto.ExitInfo{Signal: "SIGHUP"}}, nil, api.StateExited},
		{"session removed, worker lingering", unit("active", "running"), &proto.Info{State: proto.StateRemoved, Exit: &proto.ExitInfo{Signal: "SIGHUP"}}, nil, api.StateRunning},
		{"session removed, unit stopping", unit("deactivating", "stop-sigterm"), &proto.Info{State: proto.StateRemoved, Exit: &proto.ExitInfo{Signal: "SIGHUP"}}, nil, api.StateExited},
		{"worker starting its agent", unit("active", "running"), &proto.Info{State: proto.StateStarting}, nil, api.StateStarting},
		{"unit starting", unit("activating", "start"), nil, nil, api.StateStarting},
		{"restart cooldown", unit("activating", "auto-restart"), nil, nil, api.StateStarting},
		{"watchdog stop", unit("deactivating", "stop-watchdog"), nil, nil, api.StateStale},
		{"stopping", stopping("success"), nil, nil, api.StateExited},
		// A listing has no Result: unitStates reads a deactivating unit
		// whole, and a unit whose Result is still unknown is taken as
		// restarting, never as exited (the chaos run, seed 202, again:
		// the rows below had their Result, the helper's listing had not).
		{"stopping, result unknown", unit("deactivating", "stop-sigterm"), nil, nil, api.StateStarting},
		{"stopping after a clean end, result unknown", unit("deactivating", "stop-post"), nil, &proto.Registry{State: proto.StateExited, LastExit: &proto.ExitInfo{Code: 0}}, api.StateStarting},
		// The worker killed -9 mid-run: its registry still says running,
		// systemd kills what is left of the unit, then restarts it (the
		// chaos run: the controller took it as exited and started the
		// next phase, which then ran beside the restarted old one).
		{"worker killed, unit cleaning up before its restart", units.State{Name: "u", LoadState: "loaded", ActiveState: "deactivating", SubState: "stop-sigterm", Result: "signal"},
			nil, &proto.Registry{State: proto.StateRunning}, api.StateStarting},
		{"worker killed, ExecStopPost running", units.State{Name: "u", LoadState: "loaded", ActiveState: "deactivating", SubState: "stop-post", Result: "signal"},
			nil, &proto.Registry{State: proto.StateRunning}, api.StateStarting},
		// The worker killed -9 after its agent's clean end was recorded,
		// before it exited 0: systemd restarts it all the same, and the
		// restarted worker resumes the agent (the chaos run, seed 202: the
		// retro read as exited, the finisher started and removed the
		// worktree, and the restarted retro beside it exited 78).
		{"worker killed after a clean end, unit cleaning up before its restart", units.State{Name: "u", LoadState: "loaded", ActiveState: "deactivating", SubState: "stop-sigterm", Result: "signal"},
			nil, &proto.Registry{State: proto.StateExited, LastExit: &proto.ExitInfo{Code: 0}}, api.StateStarting},
		{"stop job that had to kill", units.State{Name: "u", LoadState: "loaded", ActiveState: "deactivating", SubState: "final-sigkill", Result: "timeout"},
			nil, &proto.Registry{State: proto.StateRunning}, api.StateExited},
		{"stopping after a failed run", unit("deactivating", "stop-sigterm"), nil, &proto.Registry{State: proto.StateExited, LastExit: &proto.ExitInfo{Code: 4}}, api.StateStarting},
		{"stopping after a clean exit", stopping("success"), nil, &proto.Registry{State: proto.StateExited, LastExit: &proto.ExitInfo{Code: 0}}, api.StateExited},
		{"stopped by kill", stopping("success"), nil, &proto.Registry{State: proto.StateStopped, LastExit: &proto.ExitInfo{Signal: "SIGHUP"}}, api.StateExited},
		{"run ended cleanly, worker closed its socket", unit("active", "running"), nil, &proto.Registry{State: proto.StateExited, LastExit: &proto.ExitInfo{Code: 0}}, api.StateRunning},
		{"run failed, worker closed its socket", unit("active", "running"), nil, &proto.Registry{State: proto.StateExited, LastExit: &proto.ExitInfo{Code: 4}}, api.StateStarting},
		{"running, worker does not answer", unit("active", "running"), nil, &proto.Registry{State: proto.StateRunning}, api.StateRunning},
		{"gave up", unit("failed", "failed"), nil, nil, api.StateFailed},
		{"unit gone", gone, nil, nil, api.StateExited},
		{"unit inactive", unit("inactive", "dead"), nil, nil, api.StateExited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deriveState(tt.us, tt.in, tt.reg); got != tt.want {
				t.Errorf("deriveState(%s/%s, %+v) = %s; want %s", tt.us.ActiveState, tt.us.SubState, tt.in, got, tt.want)
			}
		})
	}
}

func TestExitString(t *testing.T) {
	code := 3
	at := time.Date(2026, 2, 11, 10, 0, 0, 0, time.Local)
	tests := []struct {
		e    *api.Exit
		want string
	}{
		{nil, "no exit recorded"},
		{&api.Exit{Code: &code, Time: at, Reason: "exited"}, "exit code 3 at 2026-02-11 10:00:00 (exited)"},
		{&api.Exit{Signal: "SIGKILL", Time: at}, "killed by signal SIGKILL at 2026-02-11 10:00:00"},
		{&api.Exit{Reason: "watchdog: stale for 612s"}, "ended (watchdog: stale for 612s)"},
	}
	for _, tt := range tests {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("%+v.String() = %q; want %q", tt.e, got, tt.want)
		}
	}
}

func TestExitView(t *testing.T) {
	at := time.Now()
	if got := exitView(&proto.ExitInfo{Code: 0, Reason: "exited", Time: at}); got.Code == nil || *got.Code != 0 || got.Signal != "" {
		t.Errorf("exitView(code 0) = %+v; want code 0 set", got)
	}
	if got := exitView(&proto.ExitInfo{Code: -1, Signal: "SIGHUP", Time: at}); got.Code != nil || got.Signal != "SIGHUP" {
		t.Errorf("exitView(signal) = %+v; want the signal and no code", got)
	}
	if exitView(nil) != nil {
		t.Errorf("exitView(nil) != nil")
	}
}
