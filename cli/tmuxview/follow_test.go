package tmuxview

import (
	"slices"
	"testing"

	"github.com/legion-dev/legion/activation/api"
)

func TestSessionWindows(t *testing.T) {
	ss := []api.Session{
		{Name: "DEMO-1-plan", Team: "demo", Issue: "DEMO-1", Mode: "plan", State: api.StateRunning},
		{Name: "DEMO-2-review", Team: "demo", Issue: "DEMO-2", Mode: "review", State: api.StateExited},
		{Name: "other", Team: "x", Mode: "spawn", State: api.StateRunning},
		{Name: "shell", Team: "demo", Mode: "spawn", State: api.StateStarting},
	}
	got := SessionWindows("demo", "/bin/legion", ss)
	want := []Window{
		{Name: "DEMO-1-plan", Role: "plan", Argv: []string{"/bin/legion", "attach", "DEMO-1-plan"}},
		{Name: "shell", Role: "spawn", Argv: []string{"/bin/legion", "attach", "shell"}},
	}
	if !slices.EqualFunc(got, want, func(a, b Window) bool {
		return a.Name == b.Name && a.Role == b.Role && slices.Equal(a.Argv, b.Argv)
	}) {
		t.Errorf("SessionWindows = %v; want %v", got, want)
	}
}
