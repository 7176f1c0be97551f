package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legion-dev/legion/config"
)

// TestTeamAddAgentPath: team add writes the agent's absolute path when
// this shell's PATH finds it, and the bare name (with a note) when not.
func TestTeamAddAgentPath(t *testing.T) {
	dir := sandboxXDG(t)
	bin := filepath.Join(dir, "home", ".local", "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(bin, config.DefaultAgentProgram())
	if err := os.WriteFile(agent, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "legion.toml")

	t.Setenv("PATH", "/usr/bin:"+bin)
	out, errOut, err := legion(t, "--config", cfg, "team", "add", "found", "--workspace", t.TempDir(), "--json")
	if err != nil {
		t.Fatalf("team add: %v\n%s", err, errOut)
	}
	var got teamJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("team add --json printed %q: %v", out, err)
	}
	if got.Agent != agent {
		t.Errorf("team add with %s in PATH: agent = %q; want %q", agent, got.Agent, agent)
	}

	t.Setenv("PATH", "/nonexistent")
	_, errOut, err = legion(t, "--config", cfg, "team", "add", "missing", "--workspace", t.TempDir())
	if err != nil {
		t.Fatalf("team add: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "legion doctor") {
		t.Errorf("team add without the agent in PATH printed %q; want a note pointing to legion doctor", errOut)
	}
	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"found": agent, "missing": config.DefaultAgentProgram()} {
		tm, _ := c.Team(name)
		if tm.Agent.New[0] != want || tm.Agent.Resume[0] != want || !slices.Contains(tm.Agent.New, "{session_id}") {
			t.Errorf("team %s in %s: agent.new = %q, agent.resume = %q; want %s as the program, the default arguments", name, cfg, tm.Agent.New, tm.Agent.Resume, want)
		}
	}
}

// TestControllerWithHelperNeedsKubernetes: --with-helper (a helper
// without systemd, for the controller's pod) refuses a team whose
// sessions run on this machine, naming the engine and the file.
func TestControllerWithHelperNeedsKubernetes(t *testing.T) {
	dir := sandboxXDG(t)
	cfg := filepath.Join(dir, "legion.toml")
	if _, errOut, err := legion(t, "--config", cfg, "team", "add", "local", "--workspace", t.TempDir()); err != nil {
		t.Fatalf("team add: %v\n%s", err, errOut)
	}
	_, _, err := legion(t, "--config", cfg, "controller", "local", "--with-helper")
	if err == nil || !strings.Contains(err.Error(), `want engine = "kubernetes"`) || !strings.Contains(err.Error(), cfg) {
		t.Errorf("controller local --with-helper = %v; want a refusal naming engine = \"kubernetes\" and %s", err, cfg)
	}
}
