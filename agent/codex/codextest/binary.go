// Package codextest finds the real Codex CLI for tests: the version
// scripts/install-agent-clis pins (Version), at $LEGION_CODEX or in
// Legion's cache. Its fake API is package agent/codex/openaitest; its
// facts are agent/codex/FACTS.md.
package codextest

import (
	"path/filepath"
	"testing"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/units/sdtest"
)

// Version is the Codex CLI version the tests run: cliversion.Codex's pin,
// which scripts/install-agent-clis installs.
const Version = cliversion.CodexTested

// EnvBinary names the environment variable that, when set, is the path of
// the codex binary to run instead of the installed one.
var EnvBinary = cliversion.Codex.TestEnv

// cli is the Codex CLI the tests run.
var cli = sdtest.PinnedCLI{
	What:      "the Codex CLI",
	Want:      "Codex " + Version,
	EnvVar:    EnvBinary,
	Installed: InstalledPath(),
	Install:   "run scripts/install-agent-clis",
	VersionOK: func(v string) bool { got, err := cliversion.Codex.Parse(v); return err == nil && got == Version },
}

// InstalledPath is where scripts/install-agent-clis puts the codex binary:
// ${XDG_CACHE_HOME:-$HOME/.cache}/legion/codex/VERSION/node_modules/.bin/codex.
func InstalledPath() string {
	return filepath.Join(sdtest.StartCacheDir, "legion", "codex", Version, "node_modules", ".bin", "codex")
}

// Binary returns the path of the real Codex CLI: $LEGION_CODEX if set, else
// InstalledPath. It skips the test when there is no such executable, or
// when the installed one does not report Version; with CI=true it fails
// the test instead (sdtest.Require).
func Binary(t testing.TB) string {
	t.Helper()
	return cli.Path(t)
}
