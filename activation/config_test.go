package activation

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrokenConfigDoesNotStopTheHelper: a legion.toml the helper cannot
// load (here a bad [helper] value) leaves it on the built-in settings,
// with a warning naming the file; it serves sessions.list. Before, the
// helper failed at start, and legion.socket failed for good at its start
// limit.
func TestBrokenConfigDoesNotStopTheHelper(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion", "legion.toml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("[helper]\nidle_exit = \"soon\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // each a new helper: the start limit would show
		if r := e.list(ctx); r.DaemonID == "" {
			t.Fatalf("sessions list #%d = %+v; want the helper's answer", i+1, r)
		}
		e.stopHelper(ctx)
	}
	b, err := os.ReadFile(e.helperLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "legion.toml cannot be loaded") || !strings.Contains(string(b), cfg) {
		t.Errorf("helper log:\n%s\nwant a warning that %s cannot be loaded", tail(string(b), 20), cfg)
	}
}
