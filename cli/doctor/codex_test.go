package doctor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	check := func(env ...string) Check {
		return checkCodexKey("/cfg/legion.toml", team, workerEnv{env: append([]string{"HOME=" + home}, env...)})
	}
	expect(t, check(), Warn, "no "+filepath.Join(dir, "auth.json")+" and no OPENAI_API_KEY", "codex login")
	if c := check(); !strings.Contains(c.Fix, "environment.d") {
		t.Errorf("fix %q; want the environment.d way", c.Fix)
	}
	expect(t, check("OPENAI_API_KEY=sk-x"), OK, "OPENAI_API_KEY is set", "")

	cfg := "model_provider = \"fake\"\n[model_providers.fake]\nbase_url = \"http://127.0.0.1:9/v1\"\nenv_key = \"FAKE_KEY\"\n"
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, check("OPENAI_API_KEY=sk-x"), Warn, "no FAKE_KEY", "FAKE_KEY=")
	expect(t, check("FAKE_KEY=k"), OK, "FAKE_KEY is set", "")

	if err := os.WriteFile(filepath.Join(dir, "auth.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, check(), OK, "codex login", "")
	other := t.TempDir()
	expect(t, check("CODEX_HOME="+other), Warn, filepath.Join(other, "auth.json"), "codex login")

	if err := os.WriteFile(filepath.Join(other, "config.toml"), []byte("model = \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, check("CODEX_HOME="+other), Fail, filepath.Join(other, "config.toml")+" cannot be read", "fix")
	if c := checkCodexKey("/cfg/legion.toml", team, workerEnv{err: errors.New("no bus")}); c.Status != Warn {
		t.Errorf("without the manager's environment: %+v; want a warning", c)
	}
}
