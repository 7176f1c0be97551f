package codex

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"
	"github.com/legion-dev/legion/agent"
)

// CheckName is "codex credentials".
func (*Kind) CheckName() string { return "codex credentials" }

// Check: can the Codex agents of the team authenticate? Each
// conversation's Codex home links the user's auth.json (a `codex login`)
// and copies the user's config.toml, whose model provider reads its key
// from an environment variable (env_key; OPENAI_API_KEY for OpenAI's own),
// which workers take from the user manager's environment. One of the two
// is enough; neither is a warning, since a provider may need no key.
func (*Kind) Check(e agent.CheckEnv) agent.Check {
	var c agent.Check
	dir := e.Getenv("CODEX_HOME")
	if !filepath.IsAbs(dir) {
		home := e.Getenv("HOME")
		if !filepath.IsAbs(home) {
			c.Status, c.Detail = agent.CheckWarn, "the user manager's environment has no absolute HOME: cannot find ~/.codex"
			c.Fix = "set HOME in the user manager's environment"
			return c
		}
		dir = filepath.Join(home, ".codex")
	}
	auth := filepath.Join(dir, "auth.json")
	if _, err := os.Stat(auth); err == nil {
		c.Status, c.Detail = agent.CheckOK, auth+" (codex login)"
		return c
	}
	userConfig := filepath.Join(dir, "config.toml")
	var cfg struct {
		ModelProvider  string `toml:"model_provider"`
		ModelProviders map[string]struct {
			EnvKey string `toml:"env_key"`
		} `toml:"model_providers"`
	}
	if _, err := toml.DecodeFile(userConfig, &cfg); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.Status, c.Detail = agent.CheckFail, fmt.Sprintf("%s cannot be read: %v (Legion copies it into every conversation's Codex home)", userConfig, err)
		c.Fix = "fix " + userConfig
		return c
	}
	key := "OPENAI_API_KEY"
	if p, ok := cfg.ModelProviders[cfg.ModelProvider]; ok && p.EnvKey != "" {
		key = p.EnvKey
	}
	if e.Getenv(key) != "" {
		c.Status, c.Detail = agent.CheckOK, key+" is set in the user manager's environment, which workers get"
		return c
	}
	c.Status = agent.CheckWarn
	c.Detail = fmt.Sprintf("no %s and no %s in the user manager's environment (the key of the model provider of %s)", auth, key, userConfig)
	c.Fix = fmt.Sprintf("run `codex login` as this user (Legion links %s into every conversation's Codex home), "+
		"or put %s=... in a file of %s (then `systemctl --user daemon-reload`), never on a command line",
		auth, key, e.EnvironmentDir)
	return c
}
