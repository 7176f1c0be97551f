package activation

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
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
// the tmux view. That the controller opens no
// D-Bus connection of its own is TestControllerNamesUnitsOnly's.
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
		{module + "/activation/attachterm", func(d string) bool {
			return d == module+"/activation"
		}, "the attach terminal is a client (activation/api), not the helper's server"},
		{module + "/activation/tmuxview", func(d string) bool {
			return d == module+"/activation"
		}, "legion tmux's view and follower are a client (activation/api), not the helper's server"},
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

// TestControllerNamesUnitsOnly: the controller reaches systemd only through
// the helper. Of package units, controller/... uses the unit names
// (units/names.go: WorkerUnit, ControllerUnit, ...) and nothing else, so
// no controller code connects to the user manager. go list -deps still
// shows godbus for controller/service: units' name functions share their
// package with the manager, and config takes the units' restart policy
// type from it; the linked code is not called.
func TestControllerNamesUnitsOnly(t *testing.T) {
	fset := token.NewFileSet()
	namesFile, err := parser.ParseFile(fset, filepath.Join("..", "units", "names.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, decl := range namesFile.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.IsExported() {
				allowed[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch sp := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						if n.IsExported() {
							allowed[n.Name] = true
						}
					}
				case *ast.TypeSpec:
					if sp.Name.IsExported() {
						allowed[sp.Name.Name] = true
					}
				}
			}
		}
	}
	if !allowed["WorkerUnit"] || !allowed["ControllerUnit"] {
		t.Fatalf("units/names.go declares %v; want the unit name functions among them", allowed)
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", module+"/controller/...").Output()
	if err != nil {
		t.Fatalf("go list %s/controller/...: %v", module, err)
	}
	for _, dir := range strings.Fields(string(out)) {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			local := ""
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == module+"/units" {
					local = "units"
					if imp.Name != nil {
						local = imp.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && !allowed[sel.Sel.Name] {
					t.Errorf("%s: uses units.%s; the controller may use units' names only (units/names.go) and reaches systemd through the helper", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}
