package shellquote

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// splitEnv is the variables the tests' lookup knows.
var splitEnv = map[string]string{
	"LEGION_TEAM": "web", "LEGION_ISSUE": "DEMO-1", "LEGION_MODE": "plan",
	"SPACED": "a b", "GLOB": "x*", "EMPTY": "",
}

func lookup(name string) (string, bool) {
	v, ok := splitEnv[name]
	return v, ok
}

func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		name, cmd string
		want      []string // nil: not ok
	}{
		{"plain", `legion issue show web DEMO-1`, []string{"legion", "issue", "show", "web", "DEMO-1"}},
		{"double quoted text", `legion issue comment web DEMO-1 "Plan: x"`, []string{"legion", "issue", "comment", "web", "DEMO-1", "Plan: x"}},
		{"single quoted text", `legion issue comment web DEMO-1 'it''s $HOME; ok'`, []string{"legion", "issue", "comment", "web", "DEMO-1", "its $HOME; ok"}},
		{"variables", `legion issue comment $LEGION_TEAM $LEGION_ISSUE "x"`, []string{"legion", "issue", "comment", "web", "DEMO-1", "x"}},
		{"quoted variables", `legion issue label "$LEGION_TEAM" "${LEGION_ISSUE}" worker-done`, []string{"legion", "issue", "label", "web", "DEMO-1", "worker-done"}},
		{"braced unquoted", `legion state ${LEGION_TEAM} --json`, []string{"legion", "state", "web", "--json"}},
		{"variable inside text", `legion issue comment web DEMO-1 "mode $LEGION_MODE done"`, []string{"legion", "issue", "comment", "web", "DEMO-1", "mode plan done"}},
		{"joined parts", `x"$LEGION_TEAM"'-'$LEGION_ISSUE`, []string{"xweb-DEMO-1"}},
		{"escapes", `a\ b "q\"d\\e\$f\x"`, []string{"a b", `q"d\e$f\x`}},
		{"newline in quotes", "legion issue comment web DEMO-1 \"Plan:\n- one\n- two\"", []string{"legion", "issue", "comment", "web", "DEMO-1", "Plan:\n- one\n- two"}},
		{"empty quoted word", `a "" b`, []string{"a", "", "b"}},
		{"empty variable quoted", `a "$EMPTY"`, []string{"a", ""}},
		{"leading newline", "\nlegion state web", nil},
		{"blanks around", "  \tlegion state web \n", []string{"legion", "state", "web"}},
		{"flag with equals", `git log --format=%H`, []string{"git", "log", "--format=%H"}},
		{"absolute path", `/usr/local/bin/legion issue show web DEMO-1`, []string{"/usr/local/bin/legion", "issue", "show", "web", "DEMO-1"}},

		{"heredoc", "legion issue comment web DEMO-1 \"$(cat <<'EOF'\nPlan:\n- it's $HOME; `id` $(x)\n\nEOF\n)\"", []string{"legion", "issue", "comment", "web", "DEMO-1", "Plan:\n- it's $HOME; `id` $(x)"}},
		{"heredoc double-quoted delimiter", "c \"$(cat << \"END_1\"\nx\n  END_1\nEND_1\n)\" d", []string{"c", "x\n  END_1", "d"}},
		{"heredoc with text around", "c \"Plan: $(cat <<'EOF'\nx\nEOF\n) done\"", []string{"c", "Plan: x done"}},
		{"heredoc unquoted delimiter", "c \"$(cat <<EOF\n$HOME\nEOF\n)\"", nil},
		{"heredoc unquoted substitution", "c $(cat <<'EOF'\na b\nEOF\n)", nil},
		{"heredoc not closed", "c \"$(cat <<'EOF'\nx\nEOF\n\"", nil},
		{"heredoc no end", "c \"$(cat <<'EOF'\nx\n)\"", nil},
		{"heredoc then command", "c \"$(cat <<'EOF'\nx\nEOF\nrm -rf y\n)\"", nil},
		{"heredoc other program", "c \"$(sh <<'EOF'\nid\nEOF\n)\"", nil},
		{"heredoc text after delimiter", "c \"$(cat <<'EOF' /etc/passwd\nx\nEOF\n)\"", nil},
		{"heredoc dash", "c \"$(cat <<-'EOF'\nx\nEOF\n)\"", nil},
		{"empty", ``, nil},
		{"blank", " \t ", nil},
		{"and", `legion issue label web DEMO-1 worker-done && touch x`, nil},
		{"or", `legion state web || true`, nil},
		{"semicolon", `legion state web; rm -rf x`, nil},
		{"pipe", `legion state web | cat`, nil},
		{"background", `legion state web &`, nil},
		{"newline", "legion state web\nrm x", nil},
		{"command substitution", `legion issue comment web DEMO-1 "$(cat /etc/passwd)"`, nil},
		{"unquoted substitution", `legion issue show $(echo web) DEMO-1`, nil},
		{"backticks", "legion issue comment web DEMO-1 `id`", nil},
		{"backticks in quotes", "legion issue comment web DEMO-1 \"`id`\"", nil},
		{"redirection out", `legion state web > /tmp/x`, nil},
		{"redirection in", `legion state web < /tmp/x`, nil},
		{"other variable", `legion issue show $HOME DEMO-1`, nil},
		{"other variable quoted", `legion issue comment web DEMO-1 "$HOME"`, nil},
		{"positional", `legion issue comment web DEMO-1 "costs $5"`, nil},
		{"default expansion", `legion issue show ${LEGION_TEAM:-x} DEMO-1`, nil},
		{"ansi-c quote", `legion issue comment web DEMO-1 $'x\n'`, nil},
		{"longer name", `legion issue show $LEGION_TEAMS DEMO-1`, nil},
		{"spaced value unquoted", `a $SPACED`, nil},
		{"glob value unquoted", `a $GLOB`, nil},
		{"empty value unquoted", `a $EMPTY`, nil},
		{"glob", `legion issue label web DEMO-* x`, nil},
		{"tilde", `legion state ~web`, nil},
		{"brace expansion", `legion issue label web DEMO-1 {a,b}`, nil},
		{"comment", `legion state web #x`, nil},
		{"subshell", `(legion state web)`, nil},
		{"negation", `! legion state web`, nil},
		{"assignment", `LEGION_CONFIG=/tmp/x.toml legion state web`, nil},
		{"unterminated single", `legion issue comment web DEMO-1 'x`, nil},
		{"unterminated double", `legion issue comment web DEMO-1 "x`, nil},
		{"trailing backslash", `legion state web\`, nil},
		{"line continuation", "legion state \\\nweb", nil},
		{"nul", "legion state web\x00", nil},
		{"carriage return", "legion state web\r", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Split(tt.cmd, lookup)
			if !ok {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Split(%q) ok %v (-want +got):\n%s", tt.cmd, ok, diff)
			}
			if ok {
				assertBash(t, tt.cmd, got)
			}
		})
	}
}

// assertBash checks that bash, with splitEnv, passes the program of cmd
// exactly words.
func assertBash(t *testing.T, cmd string, words []string) {
	t.Helper()
	// printf prints the program's name too: it stands in as the program.
	// A directory of its own and a PATH with cat only: should Split ever
	// accept a command that runs something else, bash finds nothing but
	// its builtins.
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	// cat alone in the PATH: the here-document Split reads runs it.
	c := exec.Command(bash, "-c", `printf '%s\0' `+cmd)
	c.Dir = t.TempDir()
	bin := filepath.Join(c.Dir, "bin")
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatalf("cat: %v", err)
	}
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cat, filepath.Join(bin, "cat")); err != nil {
		t.Fatal(err)
	}
	c.Env = []string{"PATH=" + bin}
	for k, v := range splitEnv {
		c.Env = append(c.Env, k+"="+v)
	}
	out, err := c.Output()
	if err != nil {
		t.Fatalf("bash -c %q: %v", cmd, err)
	}
	got := strings.Split(string(bytes.TrimSuffix(out, []byte{0})), "\x00")
	if diff := cmp.Diff(words, got); diff != "" {
		t.Errorf("Split(%q) differs from bash's words (-split +bash):\n%s", cmd, diff)
	}
}

// TestSplitJoin: the words of Join come back from Split.
func TestSplitJoin(t *testing.T) {
	words := []string{"legion", "a b", "it's", "$HOME", "`x`", "\\", "", "*", "new\nline", "ü", "--x=y"}
	got, ok := Split(Join(words), lookup)
	if !ok {
		t.Fatalf("Split(%q) is not ok", Join(words))
	}
	if diff := cmp.Diff(words, got); diff != "" {
		t.Errorf("Split(Join(words)) (-want +got):\n%s", diff)
	}
}

// FuzzSplit: whatever Split accepts, bash splits into the same words.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		`legion issue comment $LEGION_TEAM $LEGION_ISSUE "Plan: x"`,
		`legion issue label "$LEGION_TEAM" "${LEGION_ISSUE}" worker-done`,
		`a\ b "q\"d\\e\$f\x" 'c'`, "a \"b\nc\"", `x"$LEGION_MODE"'-'$LEGION_ISSUE`,
		`a=b c`, `"a"=b c`, `a b=c`, `x $EMPTY`, `x "${EMPTY}"`,
		"c \"$(cat <<'EOF'\nx ) y\nEOF\n)\"", "c \"a$(cat <<\"E\"\n\n\nE\n)b\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		words, ok := Split(cmd, lookup)
		if !ok {
			return
		}
		if len(words) == 0 {
			t.Fatalf("Split(%q) is ok with no words", cmd)
		}
		if strings.ContainsRune(cmd, 0) {
			t.Fatalf("Split(%q) accepted a NUL byte", cmd)
		}
		// printf with one argument treats it as a format: only a program
		// name that is plain text is compared with bash's.
		assertBash(t, cmd, words)
	})
}
