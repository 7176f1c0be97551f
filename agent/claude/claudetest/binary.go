package claudetest

import (
	"testing"

	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/units/sdtest"
)

// Version is the Claude Code version the tests run: cliversion.Claude's
// pin, which scripts/install-claude-code installs.
const Version = claudecode.CLIVersion

// EnvBinary names the environment variable that, when set, is the path of
// the claude binary to run instead of the installed one.
const EnvBinary = claudecode.EnvCLI

// cli is the Claude Code CLI the tests run.
var cli = sdtest.PinnedCLI{
	What:      "the Claude Code CLI",
	Want:      "Claude Code " + Version,
	EnvVar:    EnvBinary,
	Installed: InstalledPath(),
	Install:   "run scripts/install-claude-code",
	VersionOK: func(v string) bool { got, err := cliversion.Claude.Parse(v); return err == nil && got == Version },
}

// InstalledPath returns where scripts/install-claude-code puts the claude
// binary: ${XDG_CACHE_HOME:-$HOME/.cache}/legion/claude-code/VERSION/node_modules/.bin/claude,
// as the test process's environment was at its start.
func InstalledPath() string {
	return claudecode.InstalledCLI(sdtest.StartCacheDir)
}

// Binary returns the path of the real Claude Code CLI: $LEGION_CLAUDE_CODE
// if set, else InstalledPath. It skips the test when there is no such
// executable, or when it does not report Version (for the installed one);
// with CI=true it fails the test instead (sdtest.Require). Install it with
// scripts/install-claude-code (make test's check-deps step runs it).
func Binary(t testing.TB) string {
	t.Helper()
	return cli.Path(t)
}
