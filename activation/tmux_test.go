package activation

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/tmuxview"
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
	v := tmuxview.View{Socket: fmt.Sprintf("legion-test-%d-%d", os.Getpid(), time.Now().UnixNano()), Session: "legion-" + AdhocTeamID.String()[:8], Config: "/dev/null"}
	t.Cleanup(func() { exec.Command("tmux", "-L", v.Socket, "kill-server").Run() })
	o := TmuxOptions{Team: AdhocTeam, View: v, Bin: e.bin, Once: true}

	e.mustLegion(ctx, "spawn", "--team", AdhocTeam, "--name", "sleeper", "--", "/bin/sh", "-c", "echo hi; exec sleep 600")
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
	ss := []Session{
		{Name: "DEMO-1-plan", Team: "demo", Issue: "DEMO-1", Mode: "plan", State: StateRunning},
		{Name: "DEMO-2-review", Team: "demo", Issue: "DEMO-2", Mode: "review", State: StateExited},
		{Name: "other", Team: "x", Mode: "spawn", State: StateRunning},
		{Name: "shell", Team: "demo", Mode: "spawn", State: StateStarting},
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
