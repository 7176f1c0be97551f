package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/agent/codex/codextest"
	"github.com/legion-dev/legion/cli/doctor"
)

// TestDoctorJSON runs `legion doctor --json` where nothing is set up: the
// output is the documented JSON, and the command fails.
func TestDoctorJSON(t *testing.T) {
	dir := sandboxXDG(t)
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+dir+"/no-bus")
	stdout, _, err := legion(t, "doctor", "--json")
	if err == nil || !strings.Contains(err.Error(), "checks failed") {
		t.Errorf("legion doctor with no manager: err = %v; want checks failed", err)
	}
	var got struct {
		OK     bool           `json:"ok"`
		Checks []doctor.Check `json:"checks"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("legion doctor --json printed no JSON: %v\n%s", err, stdout)
	}
	if got.OK {
		t.Errorf("legion doctor --json: ok = true; want false")
	}
	status := map[string]doctor.Status{}
	for _, c := range got.Checks {
		status[c.Name] = c.Status
	}
	for name, want := range map[string]doctor.Status{doctor.CheckConfig: doctor.Warn, doctor.CheckManager: doctor.Fail} {
		if status[name] != want {
			t.Errorf("check %q: status %q; want %q (all: %v)", name, status[name], want, status)
		}
	}
}

func TestDoctorText(t *testing.T) {
	dir := sandboxXDG(t)
	t.Setenv("XDG_RUNTIME_DIR", dir)
	stdout, _, _ := legion(t, "doctor")
	for _, want := range []string{"warn  config", "FAIL  systemd user manager", "fix: legion install"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("legion doctor output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestDoctorKindByMode: `legion doctor` for a team that plans with Codex
// (agent.kind_by_mode) and finishes under "ask" prints the team's policy
// per mode and the version of both CLIs it runs, the real pinned ones
// (missing: skipped, or failed with CI=true), found here in this shell's
// PATH (there is no user manager); --json carries the same.
func TestDoctorKindByMode(t *testing.T) {
	dir := sandboxXDG(t)
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+dir+"/no-bus")
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"claude": claudetest.Binary(t), "codex": codextest.Binary(t)} {
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config", "legion", "legion.toml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("[teams.web]\nid = \"6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f\"\nworkspace = %q\n"+
		"agent.permissions = \"allowlist\"\nagent.kind_by_mode = { plan = \"codex\" }\nagent.permissions_by_mode = { finish = \"ask\" }\n", ws)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	stdout, _, _ := legion(t, "doctor")
	lines := map[string]string{} // check name: its line
	for _, l := range strings.Split(stdout, "\n") {
		for _, name := range []string{"permissions of team web", "claude version of team web", "codex version of team web", "codex credentials of team web"} {
			if strings.Contains(l, "  "+name+"  ") {
				lines[name] = l
			}
		}
	}
	for name, want := range map[string]string{
		"permissions of team web": "allowlist in plan (codex): what Codex's own workspace-write sandbox allows (commands that write only in the worktree and the repository's git directory, with the network) and Legion's own commands for its issue, " +
			"anything else waits for a person (agent.allow is not used); allowlist in implement, review, retro (claude): Legion's own commands, git, " +
			"file edits in the worktree and agent.allow, anything else waits for a person; ask in finish (claude): only legion issue, every other call waits for a person",
		"claude version of team web":    "Claude Code " + cliversion.ClaudeTested + " at " + filepath.Join(bin, "claude"),
		"codex version of team web":     "Codex " + cliversion.CodexTested + " at " + filepath.Join(bin, "codex"),
		"codex credentials of team web": "the user manager's environment, which workers get, cannot be read",
	} {
		if !strings.Contains(lines[name], want) {
			t.Errorf("legion doctor's line of %q = %q; want it to contain %q\n%s", name, lines[name], want, stdout)
		}
	}
	for _, name := range []string{"permissions of team web", "claude version of team web", "codex version of team web"} {
		if !strings.HasPrefix(lines[name], "ok  ") {
			t.Errorf("legion doctor: %q is not ok: %q", name, lines[name])
		}
	}

	stdout, _, _ = legion(t, "doctor", "--json")
	var got struct {
		Checks []doctor.Check `json:"checks"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("legion doctor --json printed no JSON: %v\n%s", err, stdout)
	}
	byName := map[string]doctor.Check{}
	for _, c := range got.Checks {
		byName[c.Name] = c
	}
	wantPolicies := []doctor.PolicyUse{
		{Policy: "allowlist", Kind: "codex", Modes: []string{"plan"}},
		{Policy: "allowlist", Kind: "claude", Modes: []string{"implement", "review", "retro"}},
		{Policy: "ask", Kind: "claude", Modes: []string{"finish"}},
	}
	gotPolicies := byName["permissions of team web"].Policies
	for i := range gotPolicies {
		if gotPolicies[i].Unasked == "" {
			t.Errorf("policy %+v: no unasked line", gotPolicies[i])
		}
		gotPolicies[i].Unasked = ""
	}
	if diff := cmp.Diff(wantPolicies, gotPolicies); diff != "" {
		t.Errorf("--json policies of team web (-want +got):\n%s", diff)
	}
	wantCLI := &doctor.InstalledCLI{Kind: "codex", Modes: []string{"plan"}, Program: "codex", Path: filepath.Join(bin, "codex"),
		Version: cliversion.CodexTested, Tested: cliversion.CodexTested}
	if diff := cmp.Diff(wantCLI, byName["codex version of team web"].CLI); diff != "" {
		t.Errorf("--json cli of codex (-want +got):\n%s", diff)
	}
	if c := byName["codex version of team web"]; c.Team != "web" || c.Detail == "" {
		t.Errorf("--json codex version check = %+v; want team web and a detail", c)
	}
}
