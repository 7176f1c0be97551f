package sdtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// StartCacheDir is the user's cache directory as the test process started,
// ${XDG_CACHE_HOME:-$HOME/.cache}: Start points both into its sandbox
// later, and the pinned agent CLIs the tests run are installed below the
// real one (scripts/install-claude-code, scripts/install-agent-clis).
var StartCacheDir = func() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return d
	}
	if h := os.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache")
	}
	return ""
}()

// PinnedCLI says where a test finds a real agent CLI and how to check it.
type PinnedCLI struct {
	What      string            // the CLI, e.g. "the Claude Code CLI"
	Want      string            // the pinned version as a person reads it, e.g. "Claude Code 2.1.330"
	EnvVar    string            // names a path to run instead of the installed one
	Installed string            // where the install script puts it
	Install   string            // how to install it, e.g. "run scripts/install-claude-code"
	VersionOK func(string) bool // whether `--version`'s trimmed output is the pinned version
}

// Path returns the CLI's path: $EnvVar as the test process started, if
// set, else Installed. It skips the test (fails it with CI=true: Require)
// when that does not run `--version`, or, for the installed one, reports
// another version than the pinned one.
func (c PinnedCLI) Path(t testing.TB) string {
	t.Helper()
	override := envAtStart(c.EnvVar)
	path := override
	if path == "" {
		path = c.Installed
	}
	out, err := exec.Command(path, "--version").Output()
	reported := strings.TrimSpace(string(out))
	switch {
	case err != nil:
		Require(t, c.What+" at "+path+" ("+c.Install+", or set "+c.EnvVar+"): "+err.Error(), false)
	case override == "" && !c.VersionOK(reported):
		Require(t, c.Want+" at "+path+", which reports "+reported+" ("+c.Install+")", false)
	}
	return path
}

// envAtStart is the variable's value in the test process's environment
// before any Start changed it.
func envAtStart(name string) string {
	for _, kv := range startEnv {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}
