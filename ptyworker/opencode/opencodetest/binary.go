// Package opencodetest finds the real opencode CLI for tests: the version
// scripts/install-agent-clis pins (Version), at $LEGION_OPENCODE or in
// Legion's cache. Its fake API is package ptyworker/codex/openaitest (the
// OpenAI Responses API, which opencode's openai provider calls); its facts
// are ptyworker/opencode/FACTS.md.
package opencodetest

import (
	"path/filepath"
	"testing"

	"github.com/legion-dev/legion/units/sdtest"
)

// Version is the opencode version the tests run, the one
// scripts/install-agent-clis installs (keep the two in step).
const Version = "1.18.33"

// EnvBinary names the environment variable that, when set, is the path of
// the opencode binary to run instead of the installed one.
const EnvBinary = "LEGION_OPENCODE"

// cli is the opencode CLI the tests run.
var cli = sdtest.PinnedCLI{
	What:      "the opencode CLI",
	Want:      "opencode " + Version,
	EnvVar:    EnvBinary,
	Installed: InstalledPath(),
	Install:   "run scripts/install-agent-clis",
	VersionOK: func(v string) bool { return v == Version },
}

// InstalledPath is where scripts/install-agent-clis puts the opencode
// binary: ${XDG_CACHE_HOME:-$HOME/.cache}/legion/opencode/VERSION/node_modules/.bin/opencode.
func InstalledPath() string {
	return filepath.Join(sdtest.StartCacheDir, "legion", "opencode", Version, "node_modules", ".bin", "opencode")
}

// Binary returns the path of the real opencode CLI: $LEGION_OPENCODE if
// set, else InstalledPath. It skips the test when there is no such
// executable, or when the installed one does not report Version; with
// CI=true it fails the test instead (sdtest.Require).
func Binary(t testing.TB) string {
	t.Helper()
	return cli.Path(t)
}
