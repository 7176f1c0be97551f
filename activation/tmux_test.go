package activation

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/tmuxview"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestTmuxViewFollowsSessions: against a real tmux server of its own (-L,
// killed at cleanup), a window appears for a session spawned with
// `legion spawn --team` and goes when the session is killed.
func TestTmuxViewFollowsSessions(t *testing.T) {
	_, err := exec.LookPath("tmux")
	sdtest.Require(t, "tmux (Debian package tmux)", err == nil)
	e := startEnv(t)
	ctx := t.Context()
	v := tmuxview.View{Socket: fmt.Sprintf("legion-test-%d-%d", os.Getpid(), time.Now().UnixNano()), Session: "legion-" + config.AdhocTeamID.String()[:8], Config: "/dev/null"}
	t.Cleanup(func() { exec.Command("tmux", "-L", v.Socket, "kill-server").Run() })
	o := TmuxOptions{Team: config.AdhocTeam, View: v, Bin: e.bin, Once: true}

	e.mustLegion(ctx, "spawn", "--team", config.AdhocTeam, "--name", "sleeper", "--", "/bin/sh", "-c", "echo hi; exec sleep 600")
	windows := func() []string {
		if err := RunTmux(ctx, o); err != nil {
			t.Fatalf("RunTmux: %v", err)
		}
		w, err := v.Windows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	e.poll(ctx, "window sleeper appears", func() (bool, string) {
		w := windows()
		return slices.Contains(w, "sleeper"), fmt.Sprint(w)
	})
	e.mustLegion(ctx, "sessions", "kill", "sleeper")
	e.poll(ctx, "window sleeper goes", func() (bool, string) {
		w := windows()
		return !slices.Contains(w, "sleeper") && slices.Contains(w, "legion"), fmt.Sprint(w)
	})
}

func TestTmuxWindows(t *testing.T) {
	ss := []api.Session{
		{Name: "DEMO-1-plan", Team: "demo", Issue: "DEMO-1", Mode: "plan", State: api.StateRunning},
		{Name: "DEMO-2-review", Team: "demo", Issue: "DEMO-2", Mode: "review", State: api.StateExited},
		{Name: "other", Team: "x", Mode: "spawn", State: api.StateRunning},
		{Name: "shell", Team: "demo", Mode: "spawn", State: api.StateStarting},
	}
	got := TmuxWindows("demo", "/bin/legion", ss)
	want := []tmuxview.Window{
		{Name: "DEMO-1-plan", Role: "plan", Argv: []string{"/bin/legion", "attach", "DEMO-1-plan"}},
		{Name: "shell", Role: "spawn", Argv: []string{"/bin/legion", "attach", "shell"}},
	}
	if !slices.EqualFunc(got, want, func(a, b tmuxview.Window) bool {
		return a.Name == b.Name && a.Role == b.Role && slices.Equal(a.Argv, b.Argv)
	}) {
		t.Errorf("TmuxWindows = %v; want %v", got, want)
	}
}

// TestHelperKeepsTmuxView: `legion tmux` hands the view to the helper,
// which adds and removes windows by itself as sessions come and go, and
// forgets the view once its tmux session is closed.
func TestHelperKeepsTmuxView(t *testing.T) {
	_, err := exec.LookPath("tmux")
	sdtest.Require(t, "tmux (Debian package tmux)", err == nil)
	e := startEnv(t)
	ctx := t.Context()
	v := tmuxview.View{Socket: fmt.Sprintf("legion-test-%d-%d", os.Getpid(), time.Now().UnixNano()), Session: "legion-" + config.AdhocTeamID.String()[:8]}
	t.Cleanup(func() { exec.Command("tmux", "-L", v.Socket, "kill-server").Run() })

	e.mustLegion(ctx, "tmux", config.AdhocTeam, "--socket", v.Socket)
	windows := func() string {
		w, err := v.Windows(ctx)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(w)
	}
	e.mustLegion(ctx, "spawn", "--team", config.AdhocTeam, "--name", "napper", "--", "/bin/sh", "-c", "exec sleep 600")
	e.poll(ctx, "the helper adds window napper", func() (bool, string) {
		w := windows()
		return strings.Contains(w, "napper"), w
	})
	e.mustLegion(ctx, "sessions", "kill", "napper")
	e.poll(ctx, "the helper removes window napper", func() (bool, string) {
		w := windows()
		return !strings.Contains(w, "napper") && strings.Contains(w, "legion"), w
	})
	if err := v.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	state := os.Getenv("XDG_STATE_HOME")
	e.poll(ctx, "the helper forgets the closed view", func() (bool, string) {
		data, err := os.ReadFile(state + "/legion/" + viewsFile)
		return err == nil && strings.TrimSpace(string(data)) == "[]", string(data)
	})
}
