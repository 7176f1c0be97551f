package main

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller"
)

func TestIssueCommands(t *testing.T) {
	dir := sandboxXDG(t)
	cfg := filepath.Join(dir, "legion.toml")
	ws := t.TempDir()
	if _, _, err := legion(t, "--config", cfg, "team", "add", "demo", "--workspace", ws); err != nil {
		t.Fatalf("team add: %v", err)
	}
	out, _, err := legion(t, "--config", cfg, "issue", "add", "demo", "Write the parser")
	if err != nil || strings.TrimSpace(out) != "DEMO-1" {
		t.Fatalf("issue add = %q, %v; want DEMO-1", out, err)
	}
	for _, args := range [][]string{
		{"issue", "move", "demo", "DEMO-1", "In Progress"},
		{"issue", "label", "demo", "DEMO-1", "worker-done"},
		{"issue", "label", "demo", "DEMO-1", "worker-done"},
		{"issue", "comment", "demo", "DEMO-1", "looks good", "--author", "ana"},
	} {
		if _, _, err := legion(t, append([]string{"--config", cfg}, args...)...); err != nil {
			t.Fatalf("legion %v: %v", args, err)
		}
	}
	out, _, err = legion(t, "--config", cfg, "issue", "show", "demo", "DEMO-1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var is controller.TrackedIssue
	if err := json.Unmarshal([]byte(out), &is); err != nil {
		t.Fatalf("issue show --json printed %q: %v", out, err)
	}
	if is.Status != controller.StatusInProgress || len(is.Labels) != 1 || is.LatestHumanComment() != "looks good" {
		t.Errorf("issue show = %+v; want In Progress, [worker-done], a comment by ana", is)
	}

	_, _, err = legion(t, "--config", cfg, "issue", "move", "demo", "DEMO-7", "Done")
	if !errors.Is(err, controller.ErrIssueNotFound) {
		t.Errorf("move of an unknown issue = %v; want ErrIssueNotFound", err)
	}
	_, _, err = legion(t, "--config", cfg, "issue", "list", "nosuchteam")
	if err == nil || !strings.Contains(err.Error(), `team "nosuchteam" is not in`) {
		t.Errorf("list of an unknown team = %v; want it named", err)
	}
	_, _, err = legion(t, "--config", cfg, "issue", "add", "demo")
	var ue usageError
	if !errors.As(err, &ue) {
		t.Errorf("add without a title = %v; want a usage error", err)
	}
}
