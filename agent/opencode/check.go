package opencode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
)

// CheckName is "opencode".
func (*Kind) CheckName() string { return "opencode" }

// opencodeKeyEnv is the variable opencode reads a provider's key from
// when its config gives none (the providers Legion knows of).
var opencodeKeyEnv = map[string]string{
	"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "google": "GOOGLE_GENERATIVE_AI_API_KEY",
	"openrouter": "OPENROUTER_API_KEY", "groq": "GROQ_API_KEY", "mistral": "MISTRAL_API_KEY", "xai": "XAI_API_KEY",
}

// Check: can the opencode agents of the team start and
// authenticate? A mode that runs opencode by agent.kind_by_mode runs
// "opencode" from the user manager's PATH (checkAgent checks agent.new's
// program otherwise). The key: the user's opencode.json (which every
// conversation's config is merged over) names the model's provider; its
// apiKey is "{env:VAR}" (VAR must be in the user manager's environment),
// or a literal key, or none (then the provider's own variable, e.g.
// OPENAI_API_KEY, or an `opencode auth login` in
// ~/.local/share/opencode/auth.json).
func (*Kind) Check(e agent.CheckEnv) agent.Check {
	t := e.Team
	var c agent.Check
	var found string
	if own := t.Agent.Kind == config.AgentOpencode; !own {
		if found = e.LookPath("opencode"); found == "" {
			c.Status, c.Detail = agent.CheckFail, "agent.kind_by_mode runs opencode, which is not in the PATH of the user manager's environment ("+e.Getenv("PATH")+")"
			c.Fix = fmt.Sprintf("install opencode (npm install -g opencode-ai) and put its directory in PATH in a file of %s (then `systemctl --user daemon-reload`)", e.EnvironmentDir)
			return c
		}
		found += "; "
	}
	home := e.Getenv("HOME")
	cfgDir := e.Getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(cfgDir) {
		if !filepath.IsAbs(home) {
			c.Status, c.Detail = agent.CheckWarn, "the user manager's environment has no absolute HOME: cannot find ~/.config/opencode"
			c.Fix = "set HOME in the user manager's environment"
			return c
		}
		cfgDir = filepath.Join(home, ".config")
	}
	userConfig := filepath.Join(cfgDir, "opencode", "opencode.json")
	var cfg struct {
		Model    string `json:"model"`
		Provider map[string]struct {
			Options struct {
				APIKey string `json:"apiKey"`
			} `json:"options"`
		} `json:"provider"`
	}
	b, err := os.ReadFile(userConfig)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.Status, c.Detail, c.Fix = agent.CheckFail, fmt.Sprintf("%s cannot be read: %v", userConfig, err), "fix "+userConfig
		return c
	}
	if err == nil {
		if err := json.Unmarshal(b, &cfg); err != nil {
			c.Status, c.Detail = agent.CheckWarn, fmt.Sprintf("%s is not plain JSON (%v): cannot tell which key its provider needs", userConfig, err)
			c.Fix = "check by hand that the key of its model's provider is in the user manager's environment"
			return c
		}
	}
	provider, _, _ := strings.Cut(cfg.Model, "/")
	if provider == "" {
		provider = "openai"
	}
	key := cfg.Provider[provider].Options.APIKey
	env, ok := strings.CutPrefix(key, "{env:")
	switch {
	case ok && strings.HasSuffix(env, "}"):
		key = strings.TrimSuffix(env, "}")
	case key != "":
		c.Status, c.Detail = agent.CheckOK, found+"the key of provider "+provider+" is in "+userConfig
		return c
	default:
		key = opencodeKeyEnv[provider]
		if filepath.IsAbs(home) {
			auth := filepath.Join(home, ".local", "share", "opencode", "auth.json")
			if d := e.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
				auth = filepath.Join(d, "opencode", "auth.json")
			}
			if _, err := os.Stat(auth); err == nil {
				c.Status, c.Detail = agent.CheckOK, found+auth+" (opencode auth login)"
				return c
			}
		}
	}
	if key == "" {
		c.Status, c.Detail = agent.CheckWarn, fmt.Sprintf("%sprovider %s of %s: Legion cannot tell where its key comes from", found, provider, userConfig)
		c.Fix = fmt.Sprintf(`give it "apiKey": "{env:VAR}" in %s and VAR=... in a file of %s`, userConfig, e.EnvironmentDir)
		return c
	}
	if e.Getenv(key) != "" {
		c.Status, c.Detail = agent.CheckOK, found+key+" is set in the user manager's environment, which workers get"
		return c
	}
	c.Status = agent.CheckWarn
	c.Detail = fmt.Sprintf("%sno %s in the user manager's environment (the key of provider %s of %s)", found, key, provider, userConfig)
	c.Fix = fmt.Sprintf("put %s=... in a file of %s (then `systemctl --user daemon-reload`), never on a command line", key, e.EnvironmentDir)
	return c
}
