package claudetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/ptyworker/claude"
	"github.com/legion-dev/legion/units/sdtest"
)

// Version is the Claude Code version the tests run, the one
// scripts/install-claude-code installs (keep the two in step).
const Version = claude.CLIVersion

// EnvBinary names the environment variable that, when set, is the path of
// the claude binary to run instead of the installed one.
const EnvBinary = claude.EnvCLI

// cacheDir is the user's cache directory as the test process started:
// sdtest.Start points XDG_CACHE_HOME and HOME into its sandbox later.
var cacheDir = func() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return d
	}
	if h := os.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache")
	}
	return ""
}()

// envBinary is $LEGION_CLAUDE_CODE as the test process started.
var envBinary = os.Getenv(EnvBinary)

// InstalledPath returns where scripts/install-claude-code puts the claude
// binary: ${XDG_CACHE_HOME:-$HOME/.cache}/legion/claude-code/VERSION/node_modules/.bin/claude,
// as the test process's environment was at its start.
func InstalledPath() string {
	return claude.InstalledCLI(cacheDir)
}

// Binary returns the path of the real Claude Code CLI: $LEGION_CLAUDE_CODE
// if set, else InstalledPath. It skips the test when there is no such
// executable, or when it does not report Version (for the installed one);
// with CI=true it fails the test instead (sdtest.Require). Install it with
// scripts/install-claude-code (make test's check-deps step runs it).
func Binary(t testing.TB) string {
	t.Helper()
	path := envBinary
	if path == "" {
		path = InstalledPath()
	}
	out, err := exec.Command(path, "--version").Output()
	version, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	switch {
	case err != nil:
		sdtest.Require(t, "the Claude Code CLI at "+path+" (run scripts/install-claude-code, or set "+EnvBinary+"): "+err.Error(), false)
	case envBinary == "" && version != Version:
		sdtest.Require(t, "Claude Code "+Version+" at "+path+", which reports "+strings.TrimSpace(string(out))+" (run scripts/install-claude-code)", false)
	}
	return path
}
