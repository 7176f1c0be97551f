package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units/sdtest"
)

var testOptions = PageOptions{
	Source: "Legion 1.2.3",
	Manual: "Legion Manual",
	Date:   time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC),
	RootSections: []Section{
		{Title: "EXIT STATUS", Items: []Item{{Tag: "`0`", Text: "Success."}, {Tag: "`2`", Text: "Bad flags."}}},
		{Title: "FILES", Text: "Files `legion` reads:\n\n    ~/.config/legion/legion.toml\n"},
	},
	RootSeeAlso: []string{"legion.toml(5)", "systemctl(1)"},
}

// testTree is a command tree shaped like Legion's: flags of every kind,
// a nested command, a hidden one and one with an example.
func testTree() *cobra.Command {
	noop := func(*cobra.Command, []string) error { return nil }
	root := &cobra.Command{Use: "legion", Short: "Run a backlog through agents",
		Long: "Legion runs agents.\nSecond line of the paragraph.\n\nA paragraph about `legion-<short>.slice` and \\ backslashes.\n.A line starting with a dot.\n\n.Dot paragraph.\n\n  indented example\n    more indented\n"}
	root.PersistentFlags().String("config", "/home/u/.config/legion/legion.toml", "path of `legion.toml`")
	install := &cobra.Command{Use: "install [--dry-run] [--unit-dir DIR]", Short: "Install the units", RunE: noop,
		Example: "  legion install --dry-run\n  legion install --enable demo"}
	install.Flags().Bool("dry-run", false, "print, change nothing")
	install.Flags().String("unit-dir", "", "unit directory `DIR`")
	install.Flags().StringArray("enable", nil, "enable team `TEAM`")
	install.Flags().Bool("packaged", false, "for packages")
	if err := install.Flags().MarkHidden("packaged"); err != nil {
		panic(err)
	}
	team := &cobra.Command{Use: "team", Short: "Manage teams"}
	add := &cobra.Command{Use: "add NAME --workspace DIR", Short: "Add a team", RunE: noop}
	add.Flags().StringP("workspace", "w", "", "the team's repository")
	team.AddCommand(add)
	hidden := &cobra.Command{Use: "docs", Hidden: true, RunE: noop}
	root.AddCommand(install, team, hidden)
	return root
}

func TestCommandPagesNames(t *testing.T) {
	files, err := CommandPages(testTree(), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	want := []string{"man1/legion-install.1", "man1/legion-team-add.1", "man1/legion-team.1", "man1/legion.1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CommandPages paths (-want +got):\n%s", diff)
	}
}

func TestCommandPagesContent(t *testing.T) {
	files, err := CommandPages(testTree(), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, f := range files {
		pages[f.Path] = string(f.Data)
	}
	tests := []struct {
		page       string
		want, not_ []string
	}{
		{"man1/legion.1",
			[]string{
				`.TH "LEGION" "1" "Nov 2026" "Legion 1.2.3" "Legion Manual"`,
				".SH NAME\nlegion \\- Run a backlog through agents\n",
				"Legion runs agents. Second line of the paragraph.",
				`\fBlegion\-<short>.slice\fR and \e backslashes.`,
				"backslashes. .A line starting with a dot.\n",
				".PP\n\\&.Dot paragraph.\n",
				".nf\nindented example\n  more indented\n.fi",
				`.SH "EXIT STATUS"`,
				".TP\n\\fB0\\fR\nSuccess.\n",
				`\fB\-\-config\fR \fIlegion.toml\fR`,
				`(default: \fB/home/u/.config/legion/legion.toml\fR)`,
				".SH COMMANDS\n.TP\n\\fBinstall\\fR\n",
				`\fBlegion\-install\fR(1), \fBlegion\-team\fR(1), \fBlegion.toml\fR(5), \fBsystemctl\fR(1)`,
			},
			[]string{"docs"}},
		{"man1/legion-install.1",
			[]string{
				`\fBlegion install\fR [\-\-dry\-run] [\-\-unit\-dir DIR]` + "\n",
				".SH OPTIONS\n",
				".TP\n\\fB\\-\\-dry\\-run\\fR\nprint, change nothing\n",
				`\fB\-\-unit\-dir\fR \fIDIR\fR`,
				`\fB\-\-enable\fR \fITEAM\fR`,
				".SH GLOBAL OPTIONS\n",
				".SH EXAMPLES\n",
				"legion install \\-\\-enable demo\n",
				".SH SEE ALSO\n\\fBlegion\\fR(1)\n",
			},
			[]string{"packaged", "EXIT STATUS", "(default: \\fBfalse"}},
		{"man1/legion-team-add.1",
			[]string{`\fB\-w\fR, \fB\-\-workspace\fR \fIstring\fR`, `\fBlegion team add\fR NAME \-\-workspace DIR [\fIflags\fR]`},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.page, func(t *testing.T) {
			page, ok := pages[tt.page]
			if !ok {
				t.Fatalf("no page %s", tt.page)
			}
			for _, w := range tt.want {
				if !strings.Contains(page, w) {
					t.Errorf("page lacks %q; page:\n%s", w, page)
				}
			}
			for _, n := range tt.not_ {
				if strings.Contains(page, n) {
					t.Errorf("page has %q; page:\n%s", n, page)
				}
			}
		})
	}
}

func TestConfigPageMentionsEveryKey(t *testing.T) {
	page := string(ConfigPage(config.Schema, testOptions).Data)
	for _, s := range config.Schema {
		if tag := ".TP\n" + bold(s.Key) + " ("; !strings.Contains(page, tag) {
			t.Errorf("legion.toml(5) has no entry for %s.%s (want %q)", s.Table, s.Key, tag)
		}
		if !strings.Contains(page, roffInline(s.Doc)) {
			t.Errorf("legion.toml(5) lacks the documentation of %s.%s", s.Table, s.Key)
		}
		if s.Default != "" && !strings.Contains(page, "default "+bold(s.Default)) {
			t.Errorf("legion.toml(5) lacks the default %s of %s.%s", s.Default, s.Table, s.Key)
		}
	}
}

// TestConfigExampleLoads checks that legion.toml(5)'s EXAMPLE is a valid
// config, its workspaces made real.
func TestConfigExampleLoads(t *testing.T) {
	demo, web := t.TempDir(), t.TempDir()
	text := strings.NewReplacer(`"~/src/demo"`, `"`+demo+`"`, `"~/src/web"`, `"`+web+`"`).Replace(configExample)
	cfg, err := config.Parse("example.toml", []byte(text))
	if err != nil {
		t.Fatalf("the man page's example does not load: %v", err)
	}
	if len(cfg.Teams) != 2 {
		t.Errorf("example has %d teams; want 2", len(cfg.Teams))
	}
}

func TestRoffEscape(t *testing.T) {
	tests := []struct {
		in, text, code string
	}{
		{"plain", "plain", "plain"},
		{`a\b`, `a\eb`, `a\eb`},
		{"--flag", "--flag", `\-\-flag`},
		{".start", `\&.start`, `\&.start`},
		{"'start", `\&'start`, `\&'start`},
		{"a × b", `a \[u00D7] b`, `a \[u00D7] b`},
		{"tab\there", "tab here", "tab here"},
		{"bell\x07", "bell", "bell"},
	}
	for _, tt := range tests {
		if got := roffText(tt.in); got != tt.text {
			t.Errorf("roffText(%q) = %q; want %q", tt.in, got, tt.text)
		}
		if got := roffCode(tt.in); got != tt.code {
			t.Errorf("roffCode(%q) = %q; want %q", tt.in, got, tt.code)
		}
	}
	inline := []struct{ in, want string }{
		{"run `legion install` now", `run \fBlegion install\fR now`},
		{"`a-b` and `c`", `\fBa\-b\fR and \fBc\fR`},
		{"one ` backquote", "one ` backquote"},
	}
	for _, tt := range inline {
		if got := roffInline(tt.in); got != tt.want {
			t.Errorf("roffInline(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// TestPagesRender formats every page with a real formatter: no warnings,
// and the text says what the source says.
func TestPagesRender(t *testing.T) {
	r := findRenderer(t)
	files, err := CommandPages(testTree(), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, ConfigPage(config.Schema, testOptions))
	dir := t.TempDir()
	if err := WriteTree(dir, files); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(f.Path, func(t *testing.T) {
			text := r.render(t, filepath.Join(dir, f.Path))
			if !strings.Contains(text, "NAME") || !strings.Contains(text, "Legion 1.2.3") {
				t.Errorf("rendered %s lacks NAME or the footer:\n%s", f.Path, text)
			}
			if f.Path != "man5/legion.toml.5" {
				return
			}
			flat := strings.Join(strings.Fields(text), " ")
			for _, s := range config.Schema {
				if !strings.Contains(flat, s.Key+" (") {
					t.Errorf("rendered legion.toml(5) lacks the key %s", s.Key)
				}
			}
			if !strings.Contains(flat, `"ctrl-\\"`) {
				t.Errorf("rendered legion.toml(5) lacks detach_key's default \"ctrl-\\\\\" verbatim")
			}
		})
	}
}

func TestCompletionsParse(t *testing.T) {
	files, err := Completions(testTree())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteTree(dir, files); err != nil {
		t.Fatal(err)
	}
	shells := map[string][]string{
		"bash/legion":      {"bash", "-n"},
		"zsh/_legion":      {"zsh", "-n"},
		"fish/legion.fish": {"fish", "--no-execute"},
	}
	if len(files) != len(shells) {
		t.Errorf("Completions made %d files; want %d", len(files), len(shells))
	}
	for _, f := range files {
		t.Run(f.Path, func(t *testing.T) {
			argv, ok := shells[f.Path]
			if !ok {
				t.Fatalf("unexpected completion file %s", f.Path)
			}
			if _, err := exec.LookPath(argv[0]); err != nil {
				if argv[0] == "bash" {
					t.Fatalf("bash not installed: %v", err)
				}
				sdtest.Require(t, argv[0]+" (Debian package "+argv[0]+"; scripts/check-deps installs it)", false)
			}
			out, err := exec.CommandContext(t.Context(), argv[0], append(argv[1:], filepath.Join(dir, f.Path))...).CombinedOutput()
			if err != nil || len(out) > 0 {
				t.Errorf("%s %s: %v\n%s", strings.Join(argv, " "), f.Path, err, out)
			}
		})
	}
}

func TestWriteTree(t *testing.T) {
	dir := t.TempDir()
	if err := WriteTree(dir, []File{{Path: "man1/x.1", Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "man1", "x.1"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode of a written page = %v; want 0644", fi.Mode().Perm())
	}
	for _, bad := range []string{"", "/etc/x", "../x", "a/../../x"} {
		if err := WriteTree(dir, []File{{Path: bad, Data: nil}}); err == nil {
			t.Errorf("WriteTree(%q) = nil; want an error", bad)
		}
	}
}
