package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstructionsShow: legion instructions show prints what the agent of
// an issue is told, and the team's own template where it has one.
func TestInstructionsShow(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is required (apt-get install git)")
		}
		t.Skip("git not installed")
	}
	dir := sandboxXDG(t)
	cfg := filepath.Join(dir, "legion.toml")
	ws := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if _, _, err := legion(t, "--config", cfg, "team", "add", "web", "--workspace", ws); err != nil {
		t.Fatalf("team add: %v", err)
	}
	out, _, err := legion(t, "--config", cfg, "instructions", "show", "web", "review", "WEB-7")
	if err != nil || !strings.HasPrefix(out, "# Legion: review WEB-7 (team web)") || !strings.Contains(out, " issue label web WEB-7 worker-changes-requested\n") {
		t.Errorf("instructions show web review WEB-7 = %q, %v; want the review's instructions for WEB-7", out, err)
	}
	if _, _, err := legion(t, "--config", cfg, "instructions", "show", "web", "deploy"); err == nil {
		t.Errorf("instructions show web deploy succeeded; want an error naming the modes")
	}

	own := t.TempDir()
	if err := os.WriteFile(filepath.Join(own, "plan.md"), []byte("Our way.\n```sh\n{{.Legion}} issue label {{.Team}} {{.Issue}} worker-done\n```\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(data, []byte("agent.instructions_dir = \""+own+"\"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = legion(t, "--config", cfg, "instructions", "show", "web", "plan")
	if err != nil || !strings.HasPrefix(out, "Our way.") {
		t.Errorf("instructions show web plan with the team's plan.md = %q, %v; want the team's text", out, err)
	}
}
