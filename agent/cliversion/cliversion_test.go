package cliversion

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestParseProbed: what each tested release really prints for --version
// (testdata/KIND-VERSION.out, probed as the kinds' FACTS.md say) parses to
// that version, and every pin has its probed output.
func TestParseProbed(t *testing.T) {
	for _, c := range All() {
		t.Run(c.Kind, func(t *testing.T) {
			file := filepath.Join("testdata", c.Kind+"-"+c.Tested+".out")
			out, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%s pins %s %s, but its --version output was not recorded: %v (probe it: %s --version > %s)",
					c.Kind, c.Name, c.Tested, err, c.Program, file)
			}
			got, err := c.Parse(string(out))
			if err != nil || got != c.Tested {
				t.Errorf("%s.Parse(%q) = %q, %v; want %q", c.Kind, out, got, err, c.Tested)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		cli  CLI
		out  string
		want string // "" for an error
	}{
		{"claude newer", Claude, "2.1.332 (Claude Code)\n", "2.1.332"},
		{"claude without its name", Claude, "2.1.330\n", ""},
		{"claude prerelease", Claude, "2.2.0-beta.1 (Claude Code)\n", "2.2.0-beta.1"},
		{"codex", Codex, "codex-cli 0.171.0\n", "0.171.0"},
		{"codex bare", Codex, "0.171.0\n", ""},
		{"codex second line ignored", Codex, "codex-cli 0.169.0\nsomething else\n", "0.169.0"},
		{"gemini", Gemini, "0.62.0-preview.2\n", "0.62.0-preview.2"},
		{"gemini is not claude", Gemini, "2.1.330 (Claude Code)\n", ""},
		{"opencode", Opencode, "  1.18.40  \n", "1.18.40"},
		{"opencode two parts", Opencode, "1.18\n", ""},
		{"opencode leading zero", Opencode, "1.018.33\n", ""},
		{"empty", Opencode, "", ""},
		{"a usage text", Gemini, "Usage: gemini [options]\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cli.Parse(tt.out)
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Fatalf("%s.Parse(%q) = %q, %v; want %q", tt.cli.Kind, tt.out, got, err, tt.want)
			}
			if err != nil && !strings.Contains(err.Error(), tt.cli.Want("VERSION")) {
				t.Errorf("%s.Parse(%q) error %q does not say what was expected (%q)", tt.cli.Kind, tt.out, err, tt.cli.Want("VERSION"))
			}
		})
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"2.1.330", "2.1.330", 0},
		{"2.1.332", "2.1.330", 1},
		{"2.1.99", "2.1.330", -1},
		{"0.171.0", "0.169.0", 1},
		{"1.18.33", "1.18.4", 1},
		{"0.10.0", "0.9.9", 1},
		{"0.62.0-preview.2", "0.62.0", -1},
		{"0.62.0-preview.10", "0.62.0-preview.2", 1},
		{"0.62.0-nightly", "0.62.0-preview", -1},
		{"1.0.0-1", "1.0.0-alpha", -1},
		{"1.0.0-alpha", "1.0.0-alpha.1", -1},
		{"1.0.0+build.5", "1.0.0", 0},
	}
	for _, tt := range tests {
		got, err := Compare(tt.a, tt.b)
		if err != nil || got != tt.want {
			t.Errorf("Compare(%q, %q) = %d, %v; want %d", tt.a, tt.b, got, err, tt.want)
		}
		if back, _ := Compare(tt.b, tt.a); back != -tt.want {
			t.Errorf("Compare(%q, %q) = %d; want %d", tt.b, tt.a, back, -tt.want)
		}
	}
	for _, bad := range []string{"", "2.1", "2.1.x", "v2.1.330", "2.1.330-", "1.2.3.4", "-1.2.3", "+1.2.3"} {
		if _, err := Compare(bad, "1.0.0"); err == nil || !strings.Contains(err.Error(), "version") {
			t.Errorf("Compare(%q, 1.0.0): err = %v; want one naming the version", bad, err)
		}
	}
}

func TestFor(t *testing.T) {
	for _, c := range All() {
		if got, ok := For(c.Kind); !ok || got.Kind != c.Kind || got.Tested != c.Tested {
			t.Errorf("For(%q) = %+v, %v; want %+v", c.Kind, got, ok, c)
		}
	}
	if _, ok := For("custom"); ok {
		t.Error(`For("custom") found a CLI; a custom agent has none`)
	}
}

// TestScriptsInstallThePins: the install scripts install each CLI's
// Tested release of its Package, with the program and --version output
// this package expects, so the pins cannot drift apart.
func TestScriptsInstallThePins(t *testing.T) {
	read := func(t *testing.T, script string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "..", script))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t.Run("install-claude-code", func(t *testing.T) {
		s := read(t, Claude.Script)
		for _, want := range []string{
			"\nVERSION=" + Claude.Tested + "\n",
			"\nPACKAGE=" + Claude.Package + "\n",
			"/node_modules/.bin/" + Claude.Program + "\n",
			`"$VERSION "*)`, // accepts "VERSION (Claude Code)"
		} {
			if !strings.Contains(s, want) {
				t.Errorf("%s has no %q: keep it and cliversion.Claude (%s %s) in step", Claude.Script, strings.TrimSpace(want), Claude.Package, Claude.Tested)
			}
		}
	})
	t.Run("install-agent-clis", func(t *testing.T) {
		s := read(t, Codex.Script)
		// spec(): `codex) echo "@openai/codex 0.169.0 codex codex-cli" ;;`
		specs := map[string][]string{}
		for _, m := range regexp.MustCompile(`(?m)^\s*(\w+)\) echo "([^"]*)" ;;$`).FindAllStringSubmatch(s, -1) {
			specs[m[1]] = strings.Fields(m[2])
		}
		// The comment's table: `#   codex     @openai/codex       0.169.0  node_modules/.bin/codex`
		table := map[string][]string{}
		for _, m := range regexp.MustCompile(`(?m)^#\s+(\w+)\s+(\S+)\s+(\d\S*)\s+node_modules/\.bin/(\S+)$`).FindAllStringSubmatch(s, -1) {
			table[m[1]] = m[2:]
		}
		for _, c := range []CLI{Codex, Gemini, Opencode} {
			if c.Script != Codex.Script {
				t.Fatalf("%s is installed by %s; this test reads %s", c.Kind, c.Script, Codex.Script)
			}
			want := []string{c.Package, c.Tested, c.Program}
			if p := strings.TrimSpace(c.prefix); p != "" {
				want = append(want, p)
			}
			if got := specs[c.Kind]; strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s: spec %s = %q; want %q (cliversion.%s): keep the two in step", c.Script, c.Kind, got, want, c.Name)
			}
			if got, want := table[c.Kind], []string{c.Package, c.Tested, c.Program}; strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s: the comment's line of %s = %q; want %q", c.Script, c.Kind, got, want)
			}
		}
		if len(specs) != 3 {
			t.Errorf("%s: spec() has %d CLIs (%v); want codex, gemini and opencode", Codex.Script, len(specs), specs)
		}
	})
}
