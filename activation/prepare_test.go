package activation

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestPrepareUnderSystemd: a session's prepare commands run in its worker
// unit before the agent, which sees what they made; one that fails keeps
// the agent from starting, and the unit is restarted after its cooldown
// (not failed at once, as an agent that cannot start is) until its start
// limit, the session failed with the command's exit and stderr as cause.
func TestPrepareUnderSystemd(t *testing.T) {
	sdtest.Start(t)
	ip := startInProcessOn(t, nil, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := ip.client(t)
	dir := t.TempDir()

	args := testLaunch("prepared", "/bin/sh", "-c", `cat "$0" > seen; exec sleep 600`, filepath.Join(dir, "work", "prepared"))
	args.Cwd = dir
	args.Env = []string{"REPO=" + filepath.Join(dir, "work")}
	args.Prepare = [][]string{
		{"/bin/mkdir", "-p", filepath.Join(dir, "work")},
		{"/bin/sh", "-c", `echo "made in $PWD for $LEGION_SESSION_NAME" > "$REPO/prepared"`},
	}
	if _, err := c.Spawn(ctx, args); err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	poll(t, ctx, "the agent to copy what the prepare commands wrote", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(dir, "seen"))
		return err == nil && len(b) > 0, fmt.Sprintf("%q, %v", b, err)
	})
	if b, _ := os.ReadFile(filepath.Join(dir, "seen")); string(b) != "made in / for prepared\n" {
		t.Errorf("the agent saw %q; want %q", b, "made in / for prepared\n")
	}
	if s, err := c.Status(ctx, "prepared"); err != nil || s.State != api.StateRunning {
		t.Errorf("status = %+v, %v; want running", s, err)
	}

	started := filepath.Join(dir, "started")
	bad := testLaunch("unprepared", "/bin/touch", started)
	bad.Cooldown = new(api.Duration(50 * time.Millisecond))
	bad.StartLimitBurst, bad.StartLimitInterval = 2, api.Duration(time.Minute)
	bad.Prepare = [][]string{{"/bin/sh", "-c", "echo 'fatal: no worktree for ENG-9' >&2; exit 1", "legion", "worktree"}}
	// The unit's start waits for READY=1, which the worker sends once the
	// agent runs: the first run's failure is the spawn's answer, and the
	// unit lives on to restart.
	const cause = proto.StartFailedPrefix + "prepare: sh: exit 1: fatal: no worktree for ENG-9"
	if _, err := c.Spawn(ctx, bad); err == nil || !strings.Contains(err.Error(), "the worker said: "+cause) {
		t.Fatalf("Spawn = %v; want the first run's failure, saying %q", err, cause)
	}
	var s api.Session
	poll(t, ctx, "a session whose prepare always fails to fail at its start limit", func() (bool, string) {
		var err error
		s, err = c.Status(ctx, "unprepared")
		return err == nil && s.State == api.StateFailed, fmt.Sprintf("%+v, %v", s, err)
	})
	if s.Cause != cause || s.Restarts != 1 {
		t.Errorf("failed session: cause %q, %d restarts; want %q after 1 restart (the start limit of 2)", s.Cause, s.Restarts, cause)
	}
	if _, err := os.Stat(started); err == nil {
		t.Errorf("the agent was started though its prepare failed")
	}
	if !strings.Contains(s.Exit.Reason, "no worktree") {
		t.Errorf("last exit %+v; want the prepare's failure", s.Exit)
	}
}
