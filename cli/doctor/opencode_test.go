package doctor

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
	check := func(tm config.Team, env ...string) Check {
		return checkOpencode("/cfg/legion.toml", tm, workerEnv{env: append([]string{"HOME=" + home}, env...)})
	}
	expect(t, check(team), Warn, "no OPENAI_API_KEY", "environment.d")
	expect(t, check(team, "OPENAI_API_KEY=sk-x"), OK, "OPENAI_API_KEY is set", "")

	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "opencode.json"), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"model":"openai/gpt-5","provider":{"openai":{"options":{"baseURL":"http://127.0.0.1:9/v1","apiKey":"{env:FAKE_KEY}"}}}}`)
	expect(t, check(team, "OPENAI_API_KEY=sk-x"), Warn, "no FAKE_KEY", "FAKE_KEY=")
	expect(t, check(team, "FAKE_KEY=k"), OK, "FAKE_KEY is set", "")
	write(`{"model":"openai/gpt-5","provider":{"openai":{"options":{"apiKey":"sk-literal"}}}}`)
	expect(t, check(team), OK, "is in "+filepath.Join(dir, "opencode.json"), "")
	write("{ // jsonc\n}")
	expect(t, check(team), Warn, "not plain JSON", "by hand")

	mixed := config.Team{Name: "demo", Agent: config.Agent{Kind: config.AgentClaude, KindByMode: map[string]config.AgentKind{"plan": config.AgentOpencode}}}
	expect(t, check(mixed, "PATH=/nonexistent"), Fail, "not in the PATH", "npm install -g opencode-ai")
	if c := checkOpencode("/cfg/legion.toml", team, workerEnv{err: errors.New("no bus")}); c.Status != Warn {
		t.Errorf("without the manager's environment: %+v; want a warning", c)
	}
}
