// Package opencodetest finds the real opencode CLI for tests: the version
// scripts/install-agent-clis pins (Version), at $LEGION_OPENCODE or in
// Legion's cache. Its fake API is package agent/codex/openaitest (the
// OpenAI Responses API, which opencode's openai provider calls); its facts
// are agent/opencode/FACTS.md.
package opencodetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/units/sdtest"
)

// Version is the opencode version the tests run: cliversion.Opencode's
// pin, which scripts/install-agent-clis installs.
const Version = cliversion.OpencodeTested

// EnvBinary names the environment variable that, when set, is the path of
// the opencode binary to run instead of the installed one.
var EnvBinary = cliversion.Opencode.TestEnv

// cli is the opencode CLI the tests run.
var cli = sdtest.PinnedCLI{
	What:      "the opencode CLI",
	Want:      "opencode " + Version,
	EnvVar:    EnvBinary,
	Installed: InstalledPath(),
	Install:   "run scripts/install-agent-clis",
	VersionOK: func(v string) bool { got, err := cliversion.Opencode.Parse(v); return err == nil && got == Version },
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

// SeedDir is where scripts/install-agent-clis puts what opencode's first
// start installs into a config directory (FACTS O4a):
// @opencode-ai/plugin@Version with its package.json, package-lock.json and
// node_modules.
func SeedDir() string {
	return filepath.Join(sdtest.StartCacheDir, "legion", "opencode", Version, "config-seed")
}

// WriteUserConfig makes home/.config/opencode a user's config directory
// as it is after opencode's first start there: srv's opencode.json
// (openaitest.Server.WriteOpencodeUserConfig) and SeedDir's files, so that
// opencode finds its plugin package installed and does not install it
// from registry.npmjs.org at its start (about 20 s, and a test that
// depends on the network). It skips the test when the seed is missing
// (fails it with CI=true).
func WriteUserConfig(t testing.TB, srv *openaitest.Server, home string) {
	t.Helper()
	if err := srv.WriteOpencodeUserConfig(home); err != nil {
		t.Fatal(err)
	}
	seed := SeedDir()
	if _, err := os.Stat(filepath.Join(seed, "package-lock.json")); err != nil {
		sdtest.Require(t, "opencode's config seed in "+seed+" (run scripts/install-agent-clis): "+err.Error(), false)
	}
	dir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// node_modules (64 MB) is linked file by file (cp -al), as a copy
	// would cost every test; opencode does not write to it when its
	// package-lock.json says the package is installed. Across file
	// systems it is copied.
	for _, name := range []string{"package.json", "package-lock.json", "node_modules"} {
		src := filepath.Join(seed, name)
		if name == "node_modules" {
			if exec.Command("cp", "-al", src, dir).Run() == nil {
				continue
			}
			// What was linked goes before the copy, which would write
			// through the links into the seed.
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := exec.Command("cp", "-a", src, dir).CombinedOutput(); err != nil {
			t.Fatalf("seed %s: cp -a %s: %v\n%s", dir, src, err, out)
		}
	}
}
