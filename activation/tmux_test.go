package activation

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/cli/tmuxview"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestTmuxFollowsSessions: `legion tmux` makes the view on a tmux server
// of the test's own (-L, killed at cleanup) from the CLI, and its
// follower window adds a window for a spawned session and removes it when
// the session is killed, as the helper pushes the events. Stopping the
// helper (socket-activated, as installed) leaves the tmux server running;
// the follower subscribes again and keeps following. Closing the tmux
// session ends the follower.
func TestTmuxFollowsSessions(t *testing.T) {
	_, err := exec.LookPath("tmux")
	sdtest.Require(t, "tmux (Debian package tmux)", err == nil)
	e := startEnv(t)
	ctx := t.Context()
	v := tmuxview.View{Socket: fmt.Sprintf("legion-test-%d-%d", os.Getpid(), time.Now().UnixNano()), Session: "legion-" + config.AdhocTeamID.String()[:8]}
	t.Cleanup(func() { exec.Command("tmux", "-L", v.Socket, "kill-server").Run() })
	windows := func() string {
		w, err := v.Windows(ctx)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(w)
	}

	e.mustLegion(ctx, "tmux", config.AdhocTeam, "--socket", v.Socket)
	e.mustLegion(ctx, "spawn", "--team", config.AdhocTeam, "--name", "napper", "--", "/bin/sh", "-c", "exec sleep 600")
	e.poll(ctx, "the follower adds window napper", func() (bool, string) {
		w := windows()
		return strings.Contains(w, "napper") && strings.Contains(w, "legion"), w
	})
	e.mustLegion(ctx, "sessions", "kill", "napper")
	e.poll(ctx, "the follower removes window napper", func() (bool, string) {
		w := windows()
		return !strings.Contains(w, "napper") && strings.Contains(w, "legion"), w
	})

	// The helper's stop job ends when every process of legion.service is
	// gone: a tmux server in its cgroup would be dead by now.
	e.stopHelper(ctx)
	if ok, err := v.Exists(ctx); !ok || err != nil {
		t.Fatalf("after the helper stopped, tmux session %s exists = %v (%v); want the tmux server untouched", v.Session, ok, err)
	}
	e.mustLegion(ctx, "spawn", "--team", config.AdhocTeam, "--name", "sleeper", "--", "/bin/sh", "-c", "exec sleep 600")
	e.poll(ctx, "the follower, subscribed again, adds window sleeper", func() (bool, string) {
		w := windows()
		return strings.Contains(w, "sleeper"), w
	})
	e.mustLegion(ctx, "sessions", "kill", "sleeper")

	// Closing the view ends the follower.
	pane, err := exec.CommandContext(ctx, "tmux", "-L", v.Socket, "display-message", "-p", "-t", v.Session+":legion", "#{pane_pid}").Output()
	if err != nil {
		t.Fatalf("tmux display-message: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pane)))
	if err != nil {
		t.Fatalf("pane pid %q: %v", pane, err)
	}
	if err := v.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	e.poll(ctx, "the follower to end with its tmux session", func() (bool, string) {
		err := syscall.Kill(pid, 0)
		return errors.Is(err, syscall.ESRCH), fmt.Sprintf("kill(%d, 0) = %v", pid, err)
	})
}
