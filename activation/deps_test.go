package activation

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/legion-dev/legion"

// deps returns the packages pkg depends on, itself included, as `go list
// -deps` lists them (non-test imports, the whole graph).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}

// TestDependencyRules: the arrows of the layout run one way. The helper
// (activation) does not depend on the controller or on legion.toml's
// package; the API package depends on nothing of Legion's, so a client
// links no server; the team controller (controller/service) links the
// API's client, not the helper's server, and so do the attach terminal and
// the tmux view. The controller (controller/...) reaches systemd only
// through the helper: it links no D-Bus client at all, so it can open no
// connection to the user manager of its own (unit names come from
// units/unitname, which needs none).
func TestDependencyRules(t *testing.T) {
	tests := []struct {
		pkg    string
		forbid func(dep string) bool
		rule   string
	}{
		{module + "/activation", func(d string) bool {
			return d == module+"/controller" || strings.HasPrefix(d, module+"/controller/")
		}, "the helper must not depend on controller/...: callers plan launches"},
		{module + "/activation/api", func(d string) bool {
			return (d == module || strings.HasPrefix(d, module+"/")) && d != module+"/activation/api"
		}, "the API package imports nothing of Legion's"},
		{module + "/controller/service", func(d string) bool {
			return d == module+"/activation"
		}, "controller/service uses the client (activation/api), not the helper's server"},
		{module + "/controller/...", func(d string) bool {
			return d == module+"/units" || d == "github.com/godbus/dbus/v5" || d == "github.com/coreos/go-systemd/v22/dbus"
		}, "the controller reaches systemd only through the helper: no D-Bus client, no units.Manager"},
		{module + "/activation/attachterm", func(d string) bool {
			return d == module+"/activation"
		}, "the attach terminal is a client (activation/api), not the helper's server"},
		{module + "/activation/tmuxview", func(d string) bool {
			return d == module+"/activation"
		}, "legion tmux's view and follower are a client (activation/api), not the helper's server"},
		{module + "/activation/web", func(d string) bool {
			return d == module+"/activation"
		}, "the dashboard is a client (activation/api), not the helper's server"},
	}
	// The helper reads no legion.toml of its own for a launch: the caller
	// sends every value. (It links package config through units, which
	// takes its restart policy type from there, and `legion helper` passes
	// it the [helper] table.)
	t.Run("activation imports config", func(t *testing.T) {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, module+"/activation").Output()
		if err != nil {
			t.Fatalf("go list %s/activation: %v", module, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if imp == module+"/config" {
				t.Errorf("activation imports %s: callers plan launches from legion.toml, the helper takes what they send", imp)
			}
		}
	})
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			for _, d := range deps(t, tt.pkg) {
				if tt.forbid(d) {
					t.Errorf("%s depends on %s: %s", tt.pkg, d, tt.rule)
				}
			}
		})
	}
}
