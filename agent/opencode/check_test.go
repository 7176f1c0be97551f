package opencode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/config"
)

// TestOpencode: an opencode team's key is the {env:VAR} of its model's
// provider in the user's opencode.json (VAR in the user manager's
// environment), a literal key there, or the provider's own variable; a
// missing one warns with the environment.d fix; opencode by kind_by_mode
// must be on the manager's PATH.
func TestOpencode(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	team := config.Team{Name: "demo", Agent: config.Agent{Kind: config.AgentOpencode}}
	check := func(tm config.Team, env ...string) agent.Check {
		return (&Kind{}).Check(agent.CheckEnv{Team: tm, Modes: modesOf(tm), Env: append([]string{"HOME=" + home}, env...), EnvironmentDir: "/home/u/.config/environment.d"})
	}
	agenttest.ExpectCheck(t, check(team), agent.CheckWarn, "no OPENAI_API_KEY", "environment.d")
	agenttest.ExpectCheck(t, check(team, "OPENAI_API_KEY=sk-x"), agent.CheckOK, "OPENAI_API_KEY is set", "")

	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "opencode.json"), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"model":"openai/gpt-5","provider":{"openai":{"options":{"baseURL":"http://127.0.0.1:9/v1","apiKey":"{env:FAKE_KEY}"}}}}`)
	agenttest.ExpectCheck(t, check(team, "OPENAI_API_KEY=sk-x"), agent.CheckWarn, "no FAKE_KEY", "FAKE_KEY=")
	agenttest.ExpectCheck(t, check(team, "FAKE_KEY=k"), agent.CheckOK, "FAKE_KEY is set", "")
	write(`{"model":"openai/gpt-5","provider":{"openai":{"options":{"apiKey":"sk-literal"}}}}`)
	agenttest.ExpectCheck(t, check(team), agent.CheckOK, "is in "+filepath.Join(dir, "opencode.json"), "")
	write("{ // jsonc\n}")
	agenttest.ExpectCheck(t, check(team), agent.CheckWarn, "not plain JSON", "by hand")

	mixed := config.Team{Name: "demo", Agent: config.Agent{Kind: config.AgentClaude, KindByMode: map[string]config.AgentKind{"plan": config.AgentOpencode}}}
	agenttest.ExpectCheck(t, check(mixed, "PATH=/nonexistent"), agent.CheckFail, "not in the PATH", "npm install -g opencode-ai")
}

// modesOf are the modes in which t runs this kind.
func modesOf(t config.Team) []string {
	var in []string
	for _, m := range config.WorkerModes() {
		if t.Agent.ForMode(m).Kind == config.AgentOpencode {
			in = append(in, m)
		}
	}
	return in
}
