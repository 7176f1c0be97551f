// Package layout_test holds the repository's import rules, checked on
// what each package links (go list -deps: every package below it, not
// only its direct imports), and the lists of what each shipped binary
// links, checked in (testdata/*.deps) so that a new dependency shows in
// review (refresh with -update).
//
// Test code (fakes of outside APIs, sandboxes, harnesses, the scripted
// agent, the demo: see testOnly) is linked only by tests and by the demo.
// The demo is fenced off by one build tag, "demo": cmd/legion/demo.go,
// which adds `legion demo` and `legion scripted-agent`, is built only
// with it (`make demo`, and sdtest.LegionBinary for the tests), and the
// tag changes what no other package links. The shipped binaries, as `make
// build`, `make install` and packaging/build.sh build them (no tags),
// link no test code; what the tag adds to legion is
// testdata/legion-demo.deps.
package layout_test

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.deps from go list")

const module = "github.com/legion-dev/legion"

// demoTag is the build tag of the demo (cmd/legion/demo.go, the
// Makefile's demo target, sdtest.LegionBinary).
const demoTag = "demo"

// testOnlyPackages are the module's test code whose path does not say so
// (see testOnly): what only tests and the demo link.
var testOnlyPackages = []string{
	"units/sandbox",        // a private systemd user manager (root only)
	"units/booted/...",     // a booted system in a container (nspawn)
	"internal/cgroups",     // the sandboxes' cgroups
	"ptyworker/scripted",   // the scripted stand-in for Claude Code
	"internal/followmodel", // the fake model APIs' follow mode
	"internal/waitfor",     // tests' wait for a condition
	"internal/benchreport", // what the benchmarks share
	"contrib/demo",         // `legion demo`, which runs all of the above
}

// workerClients are the packages that talk to workers, or write their
// specs, without running one (see TestImportRules).
var workerClients = []string{"activation/...", "ptyworker/workerunit", "controller/...", "dashboard/...", "cli/..."}

// testOnly says whether a package of the module is test code: an element
// of its path ends in "test" (the fakes anthropictest, openaitest,
// geminitest, githubtest, lineartest, gqltest; the harnesses sdtest,
// claudetest, codextest, opencodetest, webtest, bootedtest and what is
// below them; internal/systemtest), or it is one of testOnlyPackages.
func testOnly(pkg string) bool {
	for _, e := range strings.Split(pkg, "/") {
		if strings.HasSuffix(e, "test") {
			return true
		}
	}
	return slices.ContainsFunc(testOnlyPackages, func(p string) bool { return matches(pkg, p) })
}

// deps is what each package of the module links: its import path (module
// prefix cut) → the paths of everything below it, Legion's cut the same
// way, others' in full. Build tags, if any, are go build's -tags.
func deps(t *testing.T, tags ...string) map[string][]string {
	t.Helper()
	// The test runs in its package's directory, inside the module.
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, module+"/...")...)
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
		{"activation", []string{"config", "controller/...", "agent", "agent/kinds", "dashboard/...", "cli/...", "contrib/..."},
			"the helper is a session supervisor that knows no teams, trackers, agent kinds, dashboard or CLI tools: callers plan launches"},
		{"activation/api", []string{"..."},
			"the helper's API imports nothing of Legion's, so a client links no server"},
		{"controller/service", []string{"activation"},
			"the team controller uses the helper's client (activation/api), not its server"},
		{"cli/attachterm", []string{"activation"}, "the attach terminal is a client of the helper, not its server"},
		{"cli/tmuxview", []string{"activation"}, "legion tmux's view and follower are a client of the helper, not its server"},
		{"dashboard", []string{"activation"}, "the dashboard is a client of the helper, not its server"},
		{"cmd/legion-pty-worker", []string{"github.com/godbus/dbus/v5", "github.com/spf13/cobra", "github.com/BurntSushi/toml", "config", "units", "units/sandbox", "controller/...", "activation", "agent", "agent/kinds"},
			"a worker stays resident for each session: it links no D-Bus, CLI, config or unit code"},
		{"cmd/legion", []string{"activation/kube", "k8s.io/...", "sigs.k8s.io/..."},
			"every hook an agent runs starts legion: the Kubernetes client (4x its size, 2.5x its start) lives in legion-kube alone, reached through activation/kube/wire"},
		{"cmd/legion", []string{"packaging/image", "github.com/google/go-containerregistry/..."},
			"the worker image's recipe (an OCI library) is legion-kube image's, not in the binary every hook starts"},
		{"packaging/image", []string{"k8s.io/...", "sigs.k8s.io/...", "activation/...", "controller/..."},
			"the image recipe packs files: it links no Kubernetes client, helper or controller"},
		{"activation/kube/wire", []string{"k8s.io/...", "sigs.k8s.io/..."},
			"the helper's side of the Kubernetes engine imports nothing of Kubernetes"},
		{"config", []string{"ptyworker", "activation", "units", "controller/..."},
			"every reader of legion.toml links config: it links no worker daemon, helper or unit code"},
		{"units", []string{"config", "ptyworker", "controller/...", "activation"},
			"the unit model takes plain structs: it links no config or worker daemon"},
		{"units/hardening", []string{"units", "config", "ptyworker"},
			"the catalog of directives is plain data"},
		{"units/hostprobe", []string{"units", "config", "ptyworker", "activation"},
			"the host probe runs systemd-run and reads /proc: plain data out"},
		{"ptyworker/proto", []string{"ptyworker", "ptyworker/confine", "ptyworker/workerunit", "activation", "agent/...", "config", "units/...", "controller/..."},
			"the worker's protocol, client, spec and registry file: what others know of the worker without linking its daemon, an agent kind or Landlock"},
	}
	// The agent kinds are the packages the registry (agent/kinds) names.
	// The helper and the worker link none (they are handed data: a launch,
	// a spec), and no kind links another, the registry, a controller, the
	// helper, the worker daemon, the dashboard or the CLI's tools: a kind
	// is one directory that adds nothing but itself.
	for _, k := range kindPackages(all) {
		for _, pkg := range []string{"activation", "cmd/legion-pty-worker"} {
			rules = append(rules, struct {
				pkg    string
				never  []string
				reason string
			}{pkg, []string{k}, "the helper and the worker are handed launches and specs, and link no agent kind"})
		}
		var others []string
		for _, o := range kindPackages(all) {
			if o != k {
				others = append(others, o)
			}
		}
		rules = append(rules, struct {
			pkg    string
			never  []string
			reason string
		}{k, append(others, "agent/kinds", "controller/...", "activation", "ptyworker", "dashboard/...", "cli/..."),
			"a kind is one directory: it links the agent contract, config and its own facts, no other kind, registry or process"})
	}
	// Who only talks to workers links the protocol and its client
	// (ptyworker/proto), not the daemon: the helper, the unit a worker
	// runs in, the team controller, the dashboard and the CLI's tools.
	// Only the worker program, legion (which hosts a worker in
	// `legion pty-worker` and the agent controller) and
	// controller/agenthost (the agent controller's host) run one.
	for pkg := range all {
		if slices.ContainsFunc(workerClients, func(p string) bool { return matches(pkg, p) }) && pkg != "controller/agenthost" {
			rules = append(rules, struct {
				pkg    string
				never  []string
				reason string
			}{pkg, []string{"ptyworker"},
				"it talks to workers through ptyworker/proto and links no worker daemon (PTY, screen, hook handling)"})
		}
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
	if len(kindPackages(all)) < 5 {
		t.Errorf("agent/kinds links %q: want the five kinds' packages", kindPackages(all))
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
	// Test code is linked only by tests and the demo: by no package that
	// is not test code itself, the shipped binaries included.
	for _, pkg := range slices.Sorted(maps.Keys(all)) {
		if testOnly(pkg) {
			continue
		}
		for _, d := range all[pkg] {
			if isLegion(d, all) && testOnly(d) {
				t.Errorf("%s links %s, which is test code (rule: only tests and the demo, built with -tags %s, link test code; see testOnly)", pkg, d, demoTag)
			}
		}
	}
	// The dashboard is linked by the legion command only, and by the
	// demo, which serves it (`legion demo --web`) and is linked only by a
	// legion built with the demo tag.
	for pkg, ds := range all {
		if strings.HasPrefix(pkg, "cmd/") || matches(pkg, "dashboard/...") || pkg == "contrib/demo" {
			continue
		}
		if slices.ContainsFunc(ds, func(d string) bool { return matches(d, "dashboard/...") }) {
			t.Errorf("%s links the dashboard: only cmd/legion (and the demo) may", pkg)
		}
	}
}

// kindPackages are the agent kinds' packages: what agent/kinds, the
// registry, links directly below agent/ (agent/claude, agent/codex, …),
// not the contract (agent) or shared helpers below a kind's directory.
func kindPackages(all map[string][]string) []string {
	var out []string
	for _, d := range all["agent/kinds"] {
		if rest, ok := strings.CutPrefix(d, "agent/"); ok && !strings.Contains(rest, "/") && rest != "cliversion" && !testOnly(d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// TestBinaryDeps: what each shipped binary links, Legion's packages and
// others' modules, is testdata/<binary>.deps; what the demo tag adds to
// legion is testdata/legion-demo.deps.
func TestBinaryDeps(t *testing.T) {
	all := deps(t)
	for _, bin := range []string{"legion", "legion-pty-worker"} {
		checkList(t, bin+".deps", notStd(all["cmd/"+bin], all))
	}
	withDemo := deps(t, demoTag)
	shipped := all["cmd/legion"]
	var added []string
	for _, d := range notStd(withDemo["cmd/legion"], withDemo) {
		if !slices.Contains(shipped, d) {
			added = append(added, d)
		}
	}
	checkList(t, "legion-demo.deps", added)
}

// TestDemoTag: the demo tag changes what cmd/legion links and nothing
// else (one fence, in one place), and what it adds is test code.
func TestDemoTag(t *testing.T) {
	all, withDemo := deps(t), deps(t, demoTag)
	for _, pkg := range slices.Sorted(maps.Keys(withDemo)) {
		if ds := withDemo[pkg]; pkg != "cmd/legion" && !slices.Equal(ds, all[pkg]) {
			t.Errorf("%s links other packages with -tags %s (diff -without +with):\n%s(rule: the demo tag is cmd/legion's alone)",
				pkg, demoTag, diffLines(strings.Join(all[pkg], "\n"), strings.Join(ds, "\n")))
		}
	}
	for _, d := range withDemo["cmd/legion"] {
		if isLegion(d, withDemo) && !slices.Contains(all["cmd/legion"], d) {
			if !testOnly(d) {
				t.Errorf("-tags %s makes legion link %s, which is not test code: the shipped legion should link it, or it belongs in testOnlyPackages", demoTag, d)
			}
		}
	}
	if !slices.Contains(withDemo["cmd/legion"], "contrib/demo") {
		t.Errorf("legion built with -tags %s does not link contrib/demo", demoTag)
	}
}

// notStd is ds without the standard library, whose paths ("net/http")
// have no dot in their first element, as Legion's cut ones do not.
func notStd(ds []string, all map[string][]string) []string {
	var out []string
	for _, d := range ds {
		if isLegion(d, all) || strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
			out = append(out, d)
		}
	}
	return out
}

// checkList compares lines, sorted, with testdata/name (or writes it,
// with -update).
func checkList(t *testing.T, name string, lines []string) {
	t.Helper()
	lines = slices.Sorted(slices.Values(lines))
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/layout -update)", err)
	}
	if got != string(want) {
		t.Errorf("the list differs from %s (review the change, then go test ./internal/layout -update):\n%s", path, diffLines(string(want), got))
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
