package tmuxview

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// testView starts the view on a tmux server of the test's own (-L), which
// the cleanup kills, with a follower that does nothing.
func testView(t *testing.T) View {
	t.Helper()
	v := newTestView(t)
	if err := v.Start(t.Context(), []string{"sh", "-c", "exec sleep 600"}); err != nil {
		t.Fatal(err)
	}
	return v
}

// newTestView is a view on a tmux server of the test's own; nothing is
// started yet.
func newTestView(t *testing.T) View {
	t.Helper()
	_, err := exec.LookPath("tmux")
	sdtest.Require(t, "tmux (Debian package tmux)", err == nil)
	v := View{Socket: fmt.Sprintf("legion-test-%d-%d", os.Getpid(), time.Now().UnixNano()), Session: "legion-abcd1234", Config: "/dev/null"}
	t.Cleanup(func() {
		// kill-server ends only this test's server (its own -L socket).
		exec.Command("tmux", "-L", v.Socket, "kill-server").Run()
	})
	return v
}

func win(name, role string) Window {
	return Window{Name: name, Role: role, Argv: []string{"sh", "-c", "echo " + name + "; exec sleep 600"}}
}

func TestSyncAddsAndRemovesWindows(t *testing.T) {
	v := testView(t)
	ctx := t.Context()
	steps := []struct {
		want  []Window
		names []string
	}{
		{[]Window{win("DEMO-1-plan", "plan")}, []string{"legion", "DEMO-1-plan"}},
		{[]Window{win("DEMO-1-plan", "plan"), win("DEMO-2-review", "review")}, []string{"legion", "DEMO-1-plan", "DEMO-2-review"}},
		{[]Window{win("DEMO-2-review", "review")}, []string{"legion", "DEMO-2-review"}},
		{nil, []string{"legion"}},
	}
	for i, s := range steps {
		if err := v.Sync(ctx, s.want); err != nil {
			t.Fatalf("step %d: Sync: %v", i, err)
		}
		got, err := v.Windows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, s.names) {
			t.Errorf("step %d: windows = %v; want %v", i, got, s.names)
		}
	}
}

func TestSyncStylesAndRunsTheCommand(t *testing.T) {
	v := testView(t)
	ctx := t.Context()
	if err := v.Sync(ctx, []Window{win("DEMO-1-implement", "implement")}); err != nil {
		t.Fatal(err)
	}
	style, err := v.tmux(ctx, "show-window-options", "-t", v.Session+":DEMO-1-implement", "-v", "window-status-style")
	if err != nil || strings.TrimSpace(style) != "fg="+Colour("implement") {
		t.Errorf("window-status-style = %q, %v; want fg=%s", style, err, Colour("implement"))
	}
	waitfor.Check(t, 60*time.Second, "the window's command to print", func() error {
		out, _ := v.tmux(ctx, "capture-pane", "-p", "-t", v.Session+":DEMO-1-implement")
		if !strings.Contains(out, "DEMO-1-implement") {
			return fmt.Errorf("pane:\n%s", out)
		}
		return nil
	})
	// Syncing again changes nothing.
	if err := v.Sync(ctx, []Window{win("DEMO-1-implement", "implement")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Windows(ctx); len(got) != 2 {
		t.Errorf("windows after a second Sync = %v; want 2", got)
	}
	if err := v.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if v.exists(ctx) {
		t.Error("session still exists after Kill")
	}
}

// TestStartRunsOneFollower: Start makes the session with the follower in
// its first window, with the view's Env; starting again runs a new
// follower in that same window.
func TestStartRunsOneFollower(t *testing.T) {
	v := newTestView(t)
	ctx := t.Context()
	out := filepath.Join(t.TempDir(), "follower")
	follower := []string{"sh", "-c", "echo $LEGION_TEST_RUN >> " + out + "; exec sleep 600"}
	for i, run := range []string{"1", "2"} {
		v.Env = []string{"LEGION_TEST_RUN=" + run}
		if err := v.Start(ctx, follower); err != nil {
			t.Fatalf("Start %d: %v", i, err)
		}
		waitfor.Check(t, 30*time.Second, fmt.Sprintf("Start %d: the follower's output to end with run %s", i, run), func() error {
			b, _ := os.ReadFile(out)
			if !strings.HasSuffix(string(b), run+"\n") {
				return fmt.Errorf("follower output %q", b)
			}
			return nil
		})
		if got, err := v.Windows(ctx); err != nil || !slices.Equal(got, []string{"legion"}) {
			t.Errorf("Start %d: windows = %v, %v; want [legion]", i, got, err)
		}
	}
}
