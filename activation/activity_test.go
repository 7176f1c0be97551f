package activation

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
)

// TestListShowsCurrentActivity: `legion sessions list` shows the watched
// file's newest mtime as soon as it changed, not as of the worker's last
// liveness tick (half the watchdog interval apart).
func TestListShowsCurrentActivity(t *testing.T) {
	e := startEnv(t)
	ctx := t.Context()
	file := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(file, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.mustLegion(ctx, "spawn", "--name", "watched", "--watch", file, "--stale-after", "1h", "--", "/bin/sleep", "600")
	e.poll(ctx, "watched running with a last activity", func() (bool, string) {
		for _, s := range e.list(ctx).Sessions {
			if s.Name == "watched" {
				return s.State == api.StateRunning && s.LastActivity != nil, string(s.State)
			}
		}
		return false, "not listed"
	})

	touched := time.Now()
	if err := os.Chtimes(file, touched, touched); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range e.list(ctx).Sessions {
		if s.Name != "watched" {
			continue
		}
		if s.LastActivity == nil || !s.LastActivity.Equal(st.ModTime()) {
			t.Errorf("sessions list: last activity of watched = %v after %s was touched; want its mtime %v", s.LastActivity, file, st.ModTime())
		}
		return
	}
	t.Fatalf("sessions list lost session watched")
}
