// Package layout_test holds the repository's import rules, checked on
// what each package links (go list -deps: every package below it, not
// only its direct imports), and the lists of what each shipped binary
// links, checked in (testdata/*.deps) so that a new dependency shows in
// review (refresh with -update).
package layout_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.deps from go list")

const module = "github.com/legion-dev/legion"

// deps is what each package of the module links: its import path (module
// prefix cut) → the paths of everything below it, Legion's cut the same
// way, others' in full.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	// The test runs in its package's directory, inside the module.
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	m := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var ds []string
		for _, d := range f[1:] {
			ds = append(ds, short(d))
		}
		m[short(f[0])] = ds
	}
	return m
}

// short is p without the module's prefix ("" for the module itself).
func short(p string) string {
	if p == module {
		return "."
	}
	return strings.TrimPrefix(p, module+"/")
}

// matches says whether dep is pattern or, for a pattern ending in "/...",
// below it (or it).
func matches(dep, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return dep == base || strings.HasPrefix(dep, base+"/")
	}
	return dep == pattern
}

// TestImportRules: each rule names a package and what it must not link,
// and why. A failure names the rule and the dependency that breaks it.
func TestImportRules(t *testing.T) {
	all := deps(t)
	rules := []struct {
		pkg    string
		never  []string
		reason string
	}{
		{"activation", []string{"config", "controller/...", "agent", "dashboard/...", "cli/...", "contrib/..."},
			"the helper is a session supervisor that knows no teams, trackers, agent kinds, dashboard or CLI tools: callers plan launches"},
		{"activation/api", []string{"..."},
			"the helper's API imports nothing of Legion's, so a client links no server"},
		{"controller/service", []string{"activation"},
			"the team controller uses the helper's client (activation/api), not its server"},
		{"cli/attachterm", []string{"activation"}, "the attach terminal is a client of the helper, not its server"},
		{"cli/tmuxview", []string{"activation"}, "legion tmux's view and follower are a client of the helper, not its server"},
		{"dashboard", []string{"activation"}, "the dashboard is a client of the helper, not its server"},
		{"cmd/legion-pty-worker", []string{"github.com/godbus/dbus/v5", "github.com/spf13/cobra", "github.com/BurntSushi/toml", "config", "units", "units/sandbox", "controller/...", "activation"},
			"a worker stays resident for each session: it links no D-Bus, CLI, config or unit code"},
		{"config", []string{"ptyworker", "activation", "units", "controller/..."},
			"every reader of legion.toml links config: it links no worker daemon, helper or unit code"},
		{"units", []string{"config", "ptyworker", "controller/...", "activation"},
			"the unit model takes plain structs: it links no config or worker daemon"},
		{"units/hardening", []string{"units", "config", "ptyworker"},
			"the catalog of directives is plain data"},
		{"units/hostprobe", []string{"units", "config", "ptyworker", "activation"},
			"the host probe runs systemd-run and reads /proc: plain data out"},
		{"ptyworker/proto", []string{"ptyworker", "activation/api"},
			"what others know of the worker without linking it"},
	}
	// The controller reaches systemd only through the helper: no D-Bus
	// client, no units.Manager (unit names come from units/unitname).
	for pkg := range all {
		if matches(pkg, "controller/...") {
			rules = append(rules, struct {
				pkg    string
				never  []string
				reason string
			}{pkg, []string{"units", "github.com/godbus/dbus/v5", "github.com/coreos/go-systemd/v22/dbus"},
				"the controller reaches systemd only through the helper"})
		}
	}
	for _, r := range rules {
		ds, ok := all[r.pkg]
		if !ok {
			t.Errorf("rule for %s: no such package", r.pkg)
			continue
		}
		for _, d := range ds {
			for _, n := range r.never {
				// "..." is every package of the module.
				if n == "..." && isLegion(d, all) || matches(d, n) {
					t.Errorf("%s links %s (rule: %s)", r.pkg, d, r.reason)
				}
			}
		}
	}
	// The dashboard is linked by the legion command only, and for now by
	// the demo, which serves it (`legion demo --web`) and is linked by
	// the legion command alone.
	for pkg, ds := range all {
		if strings.HasPrefix(pkg, "cmd/") || matches(pkg, "dashboard/...") || pkg == "contrib/demo" {
			continue
		}
		if slices.ContainsFunc(ds, func(d string) bool { return matches(d, "dashboard/...") }) {
			t.Errorf("%s links the dashboard: only cmd/legion (and the demo) may", pkg)
		}
	}
}

// TestBinaryDeps: what each shipped binary links, Legion's packages and
// others' modules, is testdata/<binary>.deps.
func TestBinaryDeps(t *testing.T) {
	all := deps(t)
	for _, bin := range []string{"legion", "legion-pty-worker"} {
		var lines []string
		for _, d := range all["cmd/"+bin] {
			// Not the standard library, whose paths ("net/http") have no
			// dot in their first element, as Legion's cut ones do not.
			if isLegion(d, all) || strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
				lines = append(lines, d)
			}
		}
		slices.Sort(lines)
		got := strings.Join(lines, "\n") + "\n"
		path := filepath.Join("testdata", bin+".deps")
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/layout -update)", err)
		}
		if got != string(want) {
			t.Errorf("%s links other packages than %s lists (review the change, then go test ./internal/layout -update):\n%s", bin, path, diffLines(string(want), got))
		}
	}
}

// isLegion says whether d is one of the module's packages.
func isLegion(d string, all map[string][]string) bool {
	_, ok := all[d]
	return ok
}

// diffLines lists the lines only in want ("-") or only in got ("+").
func diffLines(want, got string) string {
	w, g := strings.Split(strings.TrimSpace(want), "\n"), strings.Split(strings.TrimSpace(got), "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
