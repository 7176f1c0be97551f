package claudecode

import (
	"path/filepath"

	"github.com/legion-dev/legion/agent/cliversion"
)

// CLIVersion is the Claude Code CLI Legion is checked against and its
// tests and `legion demo --agent claude` run: cliversion.Claude's pin,
// which scripts/install-claude-code installs.
const CLIVersion = cliversion.ClaudeTested

// EnvCLI names the environment variable that, when set, is the path of
// the claude binary the tests and the demo run instead of the installed
// one.
const EnvCLI = "LEGION_CLAUDE_CODE"

// InstalledCLI is where scripts/install-claude-code puts the claude
// binary under the cache directory cacheDir (${XDG_CACHE_HOME:-~/.cache}):
// cacheDir/legion/claude-code/CLIVersion/node_modules/.bin/claude.
func InstalledCLI(cacheDir string) string {
	return filepath.Join(cacheDir, "legion", "claude-code", CLIVersion, "node_modules", ".bin", "claude")
}
