// Package codextest finds the real Codex CLI for tests: the version
// scripts/install-agent-clis pins (Version), at $LEGION_CODEX or in
// Legion's cache. Its fake API is package ptyworker/codex/openaitest; its
// facts are ptyworker/codex/FACTS.md.
package codextest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/units/sdtest"
)

// Version is the Codex CLI version the tests run, the one
// scripts/install-agent-clis installs (keep the two in step).
const Version = "0.169.0"

// EnvBinary names the environment variable that, when set, is the path of
// the codex binary to run instead of the installed one.
const EnvBinary = "LEGION_CODEX"

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

var envBinary = os.Getenv(EnvBinary)

// InstalledPath is where scripts/install-agent-clis puts the codex binary:
// ${XDG_CACHE_HOME:-$HOME/.cache}/legion/codex/VERSION/node_modules/.bin/codex.
func InstalledPath() string {
	return filepath.Join(cacheDir, "legion", "codex", Version, "node_modules", ".bin", "codex")
}

// Binary returns the path of the real Codex CLI: $LEGION_CODEX if set, else
// InstalledPath. It skips the test when there is no such executable, or
// when the installed one does not report Version; with CI=true it fails
// the test instead (sdtest.Require).
func Binary(t testing.TB) string {
	t.Helper()
	path := envBinary
	if path == "" {
		path = InstalledPath()
	}
	out, err := exec.Command(path, "--version").Output()
	switch {
	case err != nil:
		sdtest.Require(t, "the Codex CLI at "+path+" (run scripts/install-agent-clis, or set "+EnvBinary+"): "+err.Error(), false)
	case envBinary == "" && strings.TrimSpace(string(out)) != "codex-cli "+Version:
		sdtest.Require(t, "Codex "+Version+" at "+path+", which reports "+strings.TrimSpace(string(out))+" (run scripts/install-agent-clis)", false)
	}
	return path
}
