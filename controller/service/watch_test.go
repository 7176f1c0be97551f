package service

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestWatcherFollowsLiveSessions: the watcher watches the units of live
// sessions only, wakes the loop when one changes state, stops watching a
// session once it is no longer live, and watches again a unit whose watch
// ended on its own.
func TestWatcherFollowsLiveSessions(t *testing.T) {
	sd := sdtest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	mgr, err := units.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	const unit = "legion-watch-test.service"
	if out, err := exec.CommandContext(ctx, "systemd-run", "--user", "--quiet", "--unit", unit, "sleep", "600").CombinedOutput(); err != nil {
		t.Fatalf("systemd-run: %v: %s", err, out)
	}
	t.Cleanup(func() { sd.Systemctl(t, "stop", unit) })

	wake := make(chan struct{}, 1)
	w := &watcher{mgr: mgr, wake: wake, log: slog.New(slog.NewTextHandler(io.Discard, nil)), watching: map[string]watch{}}
	defer w.stopAll()
	ended := controller.Session{Name: "old", Unit: "legion-ended.service", State: "exited"}
	failed := controller.Session{Name: "bad", Unit: "legion-failed.service", State: "failed"}
	running := controller.Session{Name: "live", Unit: unit, State: "running"}

	w.follow(ctx, []controller.Session{ended, failed, running})
	if len(w.watching) != 1 || w.watching[unit].ctx == nil {
		t.Fatalf("watching %v; want only %s (the other sessions are not live)", slices.Collect(maps.Keys(w.watching)), unit)
	}

	// A watch that ended on its own is started again.
	first := w.watching[unit]
	first.cancel()
	w.follow(ctx, []controller.Session{ended, failed, running})
	if cur := w.watching[unit]; cur.ctx == nil || cur.ctx.Err() != nil {
		t.Fatalf("the ended watch of %s was not started again", unit)
	}

	// A state change wakes the loop.
	select {
	case <-wake:
	default:
	}
	if _, err := sd.Systemctl(t, "stop", unit); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatalf("stopping %s did not wake the loop", unit)
	}

	// Once the session is no longer live, its watch ends.
	watched := w.watching[unit]
	running.State = "exited"
	w.follow(ctx, []controller.Session{ended, failed, running})
	if len(w.watching) != 0 || watched.ctx.Err() == nil {
		t.Errorf("watching %v after the session exited (its watch ended: %v); want none", slices.Collect(maps.Keys(w.watching)), watched.ctx.Err() != nil)
	}
}
