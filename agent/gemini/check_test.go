package gemini

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/config"
)

// TestGemini: a team that runs the Gemini CLI in some mode needs its
// program and node in the user manager's PATH, and GEMINI_API_KEY in that
// environment or a Google sign-in; a settings.json Legion cannot copy
// fails.
func TestGemini(t *testing.T) {
	home, bin := t.TempDir(), t.TempDir()
	for _, p := range []string{"gemini", "node"} {
		if err := os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	argvNew, argvResume, _ := config.KindArgv(config.AgentGemini)
	team := config.Team{Name: "demo", Agent: config.Agent{Kind: config.AgentClaude, New: []string{"claude"}, Resume: []string{"claude"},
		KindByMode: map[string]config.AgentKind{"plan": config.AgentGemini}}}
	if m := modesOf(team); len(m) != 1 || m[0] != "plan" {
		t.Errorf("modesOf = %q; want plan", m)
	}
	check := func(env ...string) agent.Check {
		return (&Kind{}).Check(agent.CheckEnv{Team: team, Modes: modesOf(team), Env: append([]string{"HOME=" + home}, env...), EnvironmentDir: "/home/u/.config/environment.d"})
	}
	agenttest.ExpectCheck(t, check("PATH=/nowhere"), agent.CheckFail, "gemini not found in the user manager's PATH", "environment.d")
	agenttest.ExpectCheck(t, check("PATH="+bin), agent.CheckWarn, "no GEMINI_API_KEY", "GEMINI_API_KEY=")
	agenttest.ExpectCheck(t, check("PATH="+bin, "GEMINI_API_KEY=k"), agent.CheckOK, "GEMINI_API_KEY is set", "")
	if c := check("PATH="+bin, "GEMINI_API_KEY=secret-key"); c.Detail != "" && (contains(c.Detail, "secret-key") || contains(c.Fix, "secret-key")) {
		t.Errorf("the check shows the key: %+v", c)
	}
	if err := os.Mkdir(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "oauth_creds.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	agenttest.ExpectCheck(t, check("PATH="+bin), agent.CheckOK, "signed in with Google", "")
	settings := filepath.Join(home, ".gemini", "settings.json")
	if err := os.WriteFile(settings, []byte("{ // mine\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	agenttest.ExpectCheck(t, check("PATH="+bin), agent.CheckFail, settings+" is not a plain JSON object", "fix")

	team.Agent = config.Agent{Kind: config.AgentGemini, New: argvNew, Resume: argvResume}
	if m := modesOf(team); len(m) != 5 {
		t.Errorf("geminiModes of a gemini team = %q; want all five", m)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// modesOf are the modes in which t runs this kind.
func modesOf(t config.Team) []string {
	var in []string
	for _, m := range config.WorkerModes() {
		if t.Agent.ForMode(m).Kind == config.AgentGemini {
			in = append(in, m)
		}
	}
	return in
}
