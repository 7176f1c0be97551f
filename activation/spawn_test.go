package activation

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legion-dev/legion/ptyworker"
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
	defaults := Team{StartLimitBurst: 2, StartLimitInterval: time.Second}
	ip := startInProcessOn(t, nil, Options{Defaults: defaults, beforeSpecWrite: func(unit string) {
		if armed.CompareAndSwap(true, false) {
			_, err := sd.Systemctl(t, "start", unit)
			manual <- err
		}
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := ip.client(t)

	args := SpawnArgs{Name: "again", Cwd: "/", Argv: []string{"/bin/sh", "-c", "exit 3"}, Cooldown: Duration(50 * time.Millisecond)}
	first, err := c.Spawn(ctx, args)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	regPath := filepath.Join(ip.h.opts.StateDir, "registry", first.ID+".json")
	deadline := time.Now().Add(waitFor)
	for {
		s, err := c.Status(ctx, "again")
		if err == nil && s.State == StateFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of a session that always exits 3 = %+v, %v; want failed after the start limit", s, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, err := ip.h.mgr.State(ctx, first.Unit); err != nil || st.ActiveState != "failed" {
		t.Fatalf("unit %s: %+v, %v; want it loaded and failed", first.Unit, st, err)
	}
	time.Sleep(2 * defaults.StartLimitInterval)
	old, err := ptyworker.ReadRegistry(regPath)
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
	if err != nil || s.State != StateRunning {
		t.Errorf("status after the new start = %+v, %v; want running", s, err)
	}
	deadline = time.Now().Add(waitFor)
	for {
		r, err := ptyworker.ReadRegistry(regPath)
		if err == nil && r.Token != old.Token && r.ChildPID != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry of the new start = %+v, %v; want a new token and a running child", r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	pruned, err := os.ReadDir(filepath.Join(ip.h.opts.StateDir, prunedDir))
	if err != nil || len(pruned) != 1 {
		t.Errorf("pruned entries: %v, %v; want the earlier life's entry", pruned, err)
	}
}
