package activation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestGarbledSpecResumes: a worker whose spec file was garbled while it
// ran, then killed -9 (the chaos run's garble-spec: seed 11 found it),
// moves the spec aside on its restart and exits with
// proto.ExitSpecUnreadable, which systemd does not restart; the helper
// reports the session exited (not failed for good, which would wait for a
// person), and the next dispatch of it starts a fresh worker on a new
// spec that resumes the same conversation. Before, the worker exited 1
// at every restart until its start limit, and the dispatch was refused
// (failedErr) until someone ran reset-failed.
func TestGarbledSpecResumes(t *testing.T) {
	ip := startInProcess(t, true, Options{})
	ctx := t.Context()
	c := ip.client(t)

	dir := t.TempDir()
	log := filepath.Join(dir, "runs")
	sessionFile := filepath.Join(dir, "session.jsonl")
	plan := testLaunch("eng-9-plan", "/bin/sh", "-c", fmt.Sprintf("touch %s && echo new >> %s && exec sleep 600", sessionFile, log))
	plan.ArgvResume = []string{"/bin/sh", "-c", fmt.Sprintf("echo resume >> %s && exec sleep 600", log)}
	plan.Watch, plan.StartupGrace, plan.StaleAfter = sessionFile, new(api.Duration(time.Minute)), api.Duration(time.Hour)
	plan.Cooldown = new(api.Duration(100 * time.Millisecond))
	plan.Reuse = true
	res, err := c.Spawn(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	runs := func(want string) {
		t.Helper()
		waitfor.Check(t, waitFor, "the agent's runs "+want, func() error {
			b, _ := os.ReadFile(log)
			if got := strings.Fields(string(b)); strings.Join(got, " ") != want {
				return fmt.Errorf("%s holds %q", log, got)
			}
			return nil
		})
	}
	runs("new")

	specPath := filepath.Join(ip.h.opts.StateDir, specDir, res.ID+".json")
	b, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specPath, append(b[:len(b)/2], "\x00\xff garbled"...), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := ip.h.mgr.State(ctx, res.Unit)
	if err != nil || st.MainPID == 0 {
		t.Fatalf("state of %s: %v, %v; want its worker running", res.Unit, st, err)
	}
	if err := syscall.Kill(int(st.MainPID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	var v api.Session
	waitfor.Check(t, waitFor, "the session exited with its spec unreadable", func() error {
		v, err = c.Status(ctx, plan.Name)
		if err != nil {
			return err
		}
		if v.State != api.StateExited || v.Exit == nil || v.Exit.Code == nil || *v.Exit.Code != proto.ExitSpecUnreadable {
			return fmt.Errorf("session %s is %s (exit %v, cause %q)", plan.Name, v.State, v.Exit, v.Cause)
		}
		return nil
	})
	if !strings.HasPrefix(v.Exit.Reason, proto.ExitReasonSpecUnreadable) {
		t.Errorf("exit reason %q; want it to begin with %q", v.Exit.Reason, proto.ExitReasonSpecUnreadable)
	}
	st, err = ip.h.mgr.State(ctx, res.Unit)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Failed() || st.NRestarts != 1 {
		t.Errorf("unit %s after the garbled spec: %s; want failed after the one restart that read it (none after)", res.Unit, st)
	}
	aside, _ := filepath.Glob(specPath + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("quarantined specs %v; want the garbled %s moved aside once", aside, specPath)
	}
	if q, err := os.ReadFile(aside[0]); err != nil || !strings.HasSuffix(string(q), "garbled") {
		t.Errorf("quarantined spec %s = %q, %v; want the garbled bytes kept", aside[0], q, err)
	}

	// The controller's next dispatch: a fresh worker, the conversation
	// resumed.
	again, err := c.Spawn(ctx, plan)
	if err != nil {
		t.Fatalf("dispatch after the garbled spec: %v; want a fresh start", err)
	}
	if !again.Started || again.ID != res.ID {
		t.Errorf("dispatch again = %+v; want session %s started", again, res.ID)
	}
	runs("new resume")
	if _, err := proto.ReadSpec(specPath); err != nil {
		t.Errorf("the new spec: %v", err)
	}
	waitfor.Check(t, waitFor, "the session running again", func() error {
		v, err = c.Status(ctx, plan.Name)
		if err == nil && v.State != api.StateRunning {
			err = fmt.Errorf("session %s is %s", plan.Name, v.State)
		}
		return err
	})
	if _, err := c.Kill(ctx, plan.Name); err != nil {
		t.Fatal(err)
	}
}
