package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestDocsWritesEveryPage runs `legion docs` and checks that every
// visible command got its page, legion.toml(5) names every key of the
// schema, and the three completion scripts are there.
func TestDocsWritesEveryPage(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1795000000")
	man, comp := t.TempDir(), t.TempDir()
	if _, stderr, err := legion(t, "docs", "--man", man, "--completions", comp); err != nil {
		t.Fatalf("legion docs: %v\n%s", err, stderr)
	}

	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		want = append(want, "man1/"+strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
				walk(sub)
			}
		}
	}
	root := newRootCmd()
	root.InitDefaultCompletionCmd() // as Execute does
	walk(root)
	want = append(want, "man5/legion.toml.5")
	for _, p := range want {
		if _, err := os.Stat(filepath.Join(man, p)); err != nil {
			t.Errorf("legion docs did not write %s: %v", p, err)
		}
	}
	for _, p := range []string{"man1/legion-docs.1", "man1/legion-__complete.1"} {
		if _, err := os.Stat(filepath.Join(man, p)); err == nil {
			t.Errorf("legion docs wrote %s for a hidden command", p)
		}
	}

	page, err := os.ReadFile(filepath.Join(man, "man5", "legion.toml.5"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range config.Schema {
		key := `\fB` + strings.ReplaceAll(s.Key, "-", `\-`) + `\fR (`
		if !bytes.Contains(page, []byte(key)) {
			t.Errorf("legion.toml(5) does not document %s.%s", s.Table, s.Key)
		}
	}
	root1, err := os.ReadFile(filepath.Join(man, "man1", "legion.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"Nov 2026"`, `.SH "EXIT STATUS"`, `\fBlegion.toml\fR(5)`} {
		if !bytes.Contains(root1, []byte(w)) {
			t.Errorf("legion(1) lacks %q", w)
		}
	}
	for _, p := range []string{"bash/legion", "zsh/_legion", "fish/legion.fish"} {
		if fi, err := os.Stat(filepath.Join(comp, p)); err != nil || fi.Size() == 0 {
			t.Errorf("legion docs did not write the completion %s (%v)", p, err)
		}
	}
}

func TestDocsNeedsADirectory(t *testing.T) {
	_, _, err := legion(t, "docs")
	var ue usageError
	if !errors.As(err, &ue) {
		t.Errorf("legion docs without flags: err = %v; want a usage error", err)
	}
}

// TestBashCompletion loads the generated bash script into a real bash
// with bash-completion, as a login shell would, and completes `legion
// ins<TAB>` and `legion sessions l<TAB>`. The script asks the binary
// (legion __complete ...), so this runs the built binary.
func TestBashCompletion(t *testing.T) {
	bin := sdtest.LegionBinary(t)

	// The binary's own answer, without any shell.
	out, err := exec.CommandContext(t.Context(), bin, "__complete", "ins").Output()
	if err != nil {
		t.Fatalf("legion __complete ins: %v", err)
	}
	if first, _, _ := strings.Cut(string(out), "\t"); first != "install" {
		t.Errorf("legion __complete ins = %q; want install first", out)
	}

	const bashCompletion = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(bashCompletion); err != nil {
		sdtest.Require(t, "bash-completion (Debian package bash-completion; scripts/check-deps installs it)", false)
	}
	dir := t.TempDir()
	if out, err := exec.CommandContext(t.Context(), bin, "docs", "--completions", dir).CombinedOutput(); err != nil {
		t.Fatalf("legion docs --completions: %v\n%s", err, out)
	}
	script := filepath.Join(dir, "bash", "legion")
	if out, err := exec.CommandContext(t.Context(), "bash", "-n", script).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("bash -n %s: %v\n%s", script, err, out)
	}

	tests := []struct {
		line string
		want string
	}{
		{"legion ins", "install"},
		{"legion doc", "doctor"},
		{"legion sessions l", "list"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			// COMP_* as bash sets them on <TAB> at the end of the line;
			// the function is the one `complete -F` registered.
			prog := `source "$1"; source "$2"
COMP_LINE=$3; COMP_POINT=${#COMP_LINE}
read -r -a COMP_WORDS <<<"$COMP_LINE"; COMP_CWORD=$((${#COMP_WORDS[@]}-1))
fn=$(complete -p legion | sed -n 's/.*-F \([^ ]*\).*/\1/p')
"$fn" legion "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"`
			cmd := exec.CommandContext(t.Context(), "bash", "--norc", "--noprofile", "-c", prog, "bash", bashCompletion, script, tt.line)
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("bash: %v\n%s", err, stderr.String())
			}
			got := strings.Fields(stdout.String())
			if !slices.Contains(got, tt.want) {
				t.Errorf("completing %q gave %q; want %q among them (stderr: %s)", tt.line, got, tt.want, stderr.String())
			}
		})
	}
}
