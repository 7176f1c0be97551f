package activation

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/units/unitname"
)

// gitWorkspace is a git repository with one commit, for a team's workspace.
func gitWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"commit", "-q", "--allow-empty", "-m", "first"},
	} {
		cmd := exec.Command("git", append([]string{"-C", ws, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return ws
}

// TestZeroCooldownEverywhere: restart_cooldown = "0s" in a team's table is
// RestartSec=0 for the team's controller legion@TEAM and for a worker
// dispatched for the team, as the real manager reports them. The values
// come from legion.toml alone: the helper used to replace a zero cooldown
// with its own default of 10s.
func TestZeroCooldownEverywhere(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	e.mustLegion(ctx, "team", "add", "zero", "--workspace", gitWorkspace(t))
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion", "legion.toml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("restart_cooldown = \"0s\"\n")
	f.WriteString("agent.kind = \"custom\"\n") // a shell, not Claude Code: no --settings
	f.WriteString("agent.new = [\"/bin/sh\", \"-c\", \"exec sleep 600\"]\n")
	f.WriteString("agent.resume = [\"/bin/sh\", \"-c\", \"exec sleep 600\"]\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	e.mustLegion(ctx, "install")
	issue := strings.TrimSpace(e.mustLegion(ctx, "issue", "add", "zero", "Anything"))
	var res api.SpawnResult
	out := e.mustLegion(ctx, "dispatch", "zero", issue, "plan", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("dispatch --json printed %q: %v", out, err)
	}
	controller, err := unitname.ControllerUnit("zero")
	if err != nil {
		t.Fatal(err)
	}
	for _, unit := range []string{controller, res.Unit} {
		got, err := e.sd.Systemctl(t, "show", "--property=RestartUSec", "--value", unit)
		if err != nil {
			t.Fatalf("systemctl show %s: %v", unit, err)
		}
		if got = strings.TrimSpace(got); got != "0" {
			t.Errorf("RestartUSec of %s = %q; want 0 (restart_cooldown = \"0s\")", unit, got)
		}
	}
}
