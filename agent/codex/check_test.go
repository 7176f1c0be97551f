package codex

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/config"
)

// TestCodexKey: a codex team's credentials are a `codex login` (auth.json
// in CODEX_HOME, else ~/.codex, of the user manager's environment) or the
// key variable of the provider of the user's config.toml (OPENAI_API_KEY
// without one) in that environment; neither warns and says how to fix it
// without putting the key on a command line; a broken config.toml fails.
func TestCodexKey(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".codex")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	team := config.Team{Name: "demo", Agent: config.Agent{Kind: config.AgentCodex}}
	check := func(env ...string) agent.Check {
		return (&Kind{}).Check(agent.CheckEnv{Team: team, Modes: modesOf(team), Env: append([]string{"HOME=" + home}, env...), EnvironmentDir: "/home/u/.config/environment.d"})
	}
	agenttest.ExpectCheck(t, check(), agent.CheckWarn, "no "+filepath.Join(dir, "auth.json")+" and no OPENAI_API_KEY", "codex login")
	if c := check(); !strings.Contains(c.Fix, "environment.d") {
		t.Errorf("fix %q; want the environment.d way", c.Fix)
	}
	agenttest.ExpectCheck(t, check("OPENAI_API_KEY=sk-x"), agent.CheckOK, "OPENAI_API_KEY is set", "")

	cfg := "model_provider = \"fake\"\n[model_providers.fake]\nbase_url = \"http://127.0.0.1:9/v1\"\nenv_key = \"FAKE_KEY\"\n"
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	agenttest.ExpectCheck(t, check("OPENAI_API_KEY=sk-x"), agent.CheckWarn, "no FAKE_KEY", "FAKE_KEY=")
	agenttest.ExpectCheck(t, check("FAKE_KEY=k"), agent.CheckOK, "FAKE_KEY is set", "")

	if err := os.WriteFile(filepath.Join(dir, "auth.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	agenttest.ExpectCheck(t, check(), agent.CheckOK, "codex login", "")
	other := t.TempDir()
	agenttest.ExpectCheck(t, check("CODEX_HOME="+other), agent.CheckWarn, filepath.Join(other, "auth.json"), "codex login")

	if err := os.WriteFile(filepath.Join(other, "config.toml"), []byte("model = \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agenttest.ExpectCheck(t, check("CODEX_HOME="+other), agent.CheckFail, filepath.Join(other, "config.toml")+" cannot be read", "fix")
}

// modesOf are the modes in which t runs this kind.
func modesOf(t config.Team) []string {
	var in []string
	for _, m := range config.WorkerModes() {
		if t.Agent.ForMode(m).Kind == config.AgentCodex {
			in = append(in, m)
		}
	}
	return in
}
