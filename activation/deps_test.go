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
// API's client, not the helper's server.
func TestDependencyRules(t *testing.T) {
	tests := []struct {
		pkg    string
		forbid func(dep string) bool
		rule   string
	}{
		{module + "/activation", func(d string) bool {
			return d == module+"/controller" || strings.HasPrefix(d, module+"/controller/") || d == module+"/config"
		}, "the helper must not import controller/... or config: callers plan launches"},
		{module + "/activation/api", func(d string) bool {
			return (d == module || strings.HasPrefix(d, module+"/")) && d != module+"/activation/api"
		}, "the API package imports nothing of Legion's"},
		{module + "/controller/service", func(d string) bool {
			return d == module+"/activation"
		}, "controller/service uses the client (activation/api), not the helper's server"},
	}
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
