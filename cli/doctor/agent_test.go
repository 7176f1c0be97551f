package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestAgentManagerPath: the agent is in a directory on this shell's PATH
// but not on the user manager's (as ~/.local/bin, where Claude Code's
// installer puts claude). Doctor fails with a fix, and each way the fix
// names works: for doctor, and for a real unit of the manager, which looks
// the program up in its environment as a worker does.
func TestAgentManagerPath(t *testing.T) {
	m := sdtest.Start(t)
	s := newSandbox(t)
	s.useManager(t, m)
	ctx, cancel := context.WithTimeout(t.Context(), sdtestTimeout)
	defer cancel()
	mgr, err := units.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()

	bin := filepath.Join(s.dir, "localbin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(bin, "legion-test-agent")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	bare := `agent.new = ["legion-test-agent", "{prompt}"]` + "\nagent.resume = [\"legion-test-agent\"]\n"
	s.writeConfig(t, bare)

	check := func() Check { return find(t, Run(t.Context(), s.opts), agentCheckName("demo")) }
	// runs reports whether a unit of the manager finds the agent by name:
	// env(1) looks it up in the unit's PATH, as the pty-worker does.
	n := 0
	runs := func() bool {
		n++
		err := mgr.StartTransient(ctx, units.Unit{Name: fmt.Sprintf("agent-lookup-%d.service", n), Options: []units.Option{
			units.String("Service", "Type", "oneshot"),
			units.Exec("ExecStart", []string{"/usr/bin/env", "legion-test-agent"}),
		}})
		return err == nil
	}

	c := check()
	expect(t, c, Fail, "legion-test-agent not found in the user manager's PATH", "set-environment")
	expect(t, c, Fail, "this shell finds "+agent, agent)
	if runs() {
		t.Fatal("a unit of the manager found the agent before any fix; the test proves nothing")
	}
	fix := c.Fix
	t.Logf("detail: %s\nfix: %s", c.Detail, fix)
	commands := regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(fix, -1)
	command := func(prefix string) []string {
		t.Helper()
		for _, c := range commands {
			if strings.HasPrefix(c[1], prefix) {
				return strings.Fields(c[1])
			}
		}
		t.Fatalf("fix %q has no `%s...`", fix, prefix)
		return nil
	}

	t.Run("absolute path in the config", func(t *testing.T) {
		s.writeConfig(t, fmt.Sprintf("agent.new = [%q, \"{prompt}\"]\nagent.resume = [%q]\n", agent, agent))
		expect(t, check(), OK, agent, "")
		s.writeConfig(t, bare)
	})

	t.Run("set-environment", func(t *testing.T) {
		set := command("systemctl --user set-environment PATH=")
		if _, err := m.Systemctl(t, set[2:]...); err != nil {
			t.Fatal(err)
		}
		expect(t, check(), OK, agent+" (in the user manager's PATH", "")
		if !runs() {
			t.Errorf("after %s a unit does not find the agent", strings.Join(set, " "))
		}
		unset := command("systemctl --user unset-environment PATH")
		if _, err := m.Systemctl(t, unset[2:]...); err != nil {
			t.Fatal(err)
		}
		expect(t, check(), Fail, "not found in the user manager's PATH", "")
	})

	t.Run("environment.d", func(t *testing.T) {
		line := regexp.MustCompile("put the line `([^`]*)` in (\\S+),").FindStringSubmatch(fix)
		if line == nil {
			t.Fatalf("fix %q names no environment.d line and file", fix)
		}
		want := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "environment.d", "60-legion-path.conf")
		if line[2] != want {
			t.Errorf("fix names %s; want %s (where the manager reads environment.d)", line[2], want)
		}
		if err := os.MkdirAll(filepath.Dir(line[2]), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(line[2], []byte(line[1]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		reload := command("systemctl --user daemon-reload")
		if _, err := m.Systemctl(t, reload[2:]...); err != nil {
			t.Fatal(err)
		}
		expect(t, check(), OK, agent+" (in the user manager's PATH", "")
		if !runs() {
			t.Errorf("after %s in %s and a daemon-reload a unit does not find the agent", line[1], line[2])
		}
	})
}

func TestCheckInstructions(t *testing.T) {
	dir := t.TempDir()
	team := config.Team{Name: "web"}
	if _, ok := checkInstructions("legion.toml", team); ok {
		t.Errorf("checkInstructions without agent.instructions_dir: want no check")
	}
	team.Agent.InstructionsDir = dir
	if err := os.WriteFile(filepath.Join(dir, "review.md"), []byte("{{template \"header\" .}}\nlook at it\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, ok := checkInstructions("legion.toml", team)
	if !ok || c.Status != Fail || !strings.Contains(c.Detail, filepath.Join(dir, "review.md")) || !strings.Contains(c.Detail, "worker-approved") || c.Fix == "" {
		t.Errorf("checkInstructions(review.md without the outcomes) = %+v; want a failure naming the file and the command, with a fix", c)
	}
	if err := os.WriteFile(filepath.Join(dir, "review.md"), []byte("ok\n```sh\n{{.Legion}} issue label {{.Team}} {{.Issue}} worker-approved\n```\n```sh\n{{.Legion}} issue label {{.Team}} {{.Issue}} worker-changes-requested\n```\n```sh\n{{.Legion}} issue label {{.Team}} {{.Issue}} worker-done\n```\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, _ := checkInstructions("legion.toml", team); c.Status != OK || !strings.Contains(c.Detail, "your own for review") {
		t.Errorf("checkInstructions(a good review.md) = %+v; want ok, naming review as the team's own", c)
	}
}
