package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/linear/lineartest"
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

// TestIssueCommandsLinear: the commands agents use (show, move, label,
// unlabel, comment) work on a Linear team too, through the real Linear
// client against a local Linear; add and list stay local-only.
func TestIssueCommandsLinear(t *testing.T) {
	dir := sandboxXDG(t)
	srv := lineartest.NewServer(t, "lin_api_TESTKEY0123456789", "ENG")
	t.Setenv("LEGION_TEST_LINEAR_API_KEY", "lin_api_TESTKEY0123456789")
	is := srv.AddIssue("Write the parser", "Todo")
	cfg := filepath.Join(dir, "legion.toml")
	toml := fmt.Sprintf(`[teams.web]
id = "6f1c2b9e-0000-4000-8000-000000000001"
workspace = %q
tracker = "linear"
linear.team_key = "ENG"
linear.api_key_env = "LEGION_TEST_LINEAR_API_KEY"
linear.api_url = %q
`, t.TempDir(), srv.URL)
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"issue", "move", "web", is.Identifier, "In Progress"},
		{"issue", "label", "web", is.Identifier, "worker-done"},
		{"issue", "label", "web", is.Identifier, "worker-approved"},
		{"issue", "unlabel", "web", is.Identifier, "worker-approved"},
		{"issue", "comment", "web", is.Identifier, "plan: write it"},
	} {
		if _, stderr, err := legion(t, append([]string{"--config", cfg}, args...)...); err != nil {
			t.Fatalf("legion %v: %v\n%s", args, err, stderr)
		}
	}
	if got := srv.StateName(srv.Issue(is.Identifier).StateID); got != "In Progress" {
		t.Errorf("Linear state of %s = %q; want In Progress", is.Identifier, got)
	}
	out, _, err := legion(t, "--config", cfg, "issue", "show", "web", is.Identifier, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got controller.TrackedIssue
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("issue show --json printed %q: %v", out, err)
	}
	if got.Status != controller.StatusInProgress || strings.Join(got.Labels, ",") != "worker-done" ||
		len(got.Comments) != 1 || got.Comments[0].Author != controller.AuthorLegion || got.Comments[0].Text != "plan: write it" {
		t.Errorf("issue show = %+v; want In Progress, [worker-done], Legion's comment", got)
	}

	_, _, err = legion(t, "--config", cfg, "issue", "show", "web", "ENG-999")
	if !errors.Is(err, controller.ErrIssueNotFound) {
		t.Errorf("show of an unknown issue = %v; want ErrIssueNotFound", err)
	}
	_, _, err = legion(t, "--config", cfg, "issue", "comment", "web", is.Identifier, "hi", "--author", "ana")
	var ue usageError
	if !errors.As(err, &ue) {
		t.Errorf("comment --author on Linear = %v; want a usage error", err)
	}
	_, _, err = legion(t, "--config", cfg, "issue", "add", "web", "New")
	if err == nil || !strings.Contains(err.Error(), "linear tracker") {
		t.Errorf("add on a Linear team = %v; want it refused, naming the tracker", err)
	}
}
