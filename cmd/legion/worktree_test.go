package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller/workspace"
)

// TestWorktreeListBroken: legion worktree list shows a directory under the
// team's worktree directory that is not a worktree, with its path and what
// is wrong, instead of failing on it.
func TestWorktreeListBroken(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := sandboxXDG(t)
	cfg := filepath.Join(dir, "legion.toml")
	ws := t.TempDir()
	if out, err := exec.Command("git", "-C", ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	out, _, err := legion(t, "--config", cfg, "team", "add", "demo", "--workspace", ws, "--json")
	if err != nil {
		t.Fatalf("team add: %v", err)
	}
	var team teamJSON
	if err := json.Unmarshal([]byte(out), &team); err != nil {
		t.Fatalf("team add --json printed %q: %v", out, err)
	}
	broken := filepath.Join(os.Getenv("XDG_STATE_HOME"), "legion", "worktrees", team.ShortID, "DEMO-1")
	if err := os.MkdirAll(broken, 0o700); err != nil {
		t.Fatal(err)
	}

	out, _, err = legion(t, "--config", cfg, "worktree", "list", "demo")
	if err != nil || !strings.Contains(out, broken+" (broken)") || !strings.Contains(out, "not a git repository") {
		t.Errorf("worktree list = %q, %v; want DEMO-1 listed as broken with what is wrong", out, err)
	}
	out, _, err = legion(t, "--config", cfg, "worktree", "list", "demo", "--json")
	var wts []workspace.Worktree
	if err != nil || json.Unmarshal([]byte(out), &wts) != nil || len(wts) != 1 || wts[0].Path != broken || wts[0].Problem == "" {
		t.Errorf("worktree list --json = %q, %v; want DEMO-1 at %s with its problem", out, err, broken)
	}
}
