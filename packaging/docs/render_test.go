package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/legion-dev/legion/units/sdtest"
)

// renderer formats a man page file to plain text and reports every
// warning of the formatter on stderr.
type renderer struct {
	name string
	args func(path string) []string
}

// findRenderer picks man(1) (man-db, with all of groff's warnings), else
// groff itself, else mandoc's linter. None installed: the test skips. It
// does not fail with CI=true: nothing in the build installs a formatter
// (scripts/check-deps does not name one), so a CI machine without one is
// not a broken setup.
func findRenderer(t *testing.T) renderer {
	t.Helper()
	if _, err := exec.LookPath("man"); err == nil {
		if _, err := exec.LookPath("groff"); err == nil {
			return renderer{"man", func(p string) []string {
				return []string{"man", "--warnings=w", "-E", "UTF-8", "-l", p}
			}}
		}
	}
	if _, err := exec.LookPath("groff"); err == nil {
		return renderer{"groff", func(p string) []string {
			return []string{"groff", "-man", "-ww", "-K", "utf8", "-Tutf8", p}
		}}
	}
	if _, err := exec.LookPath("mandoc"); err == nil {
		return renderer{"mandoc", func(p string) []string {
			return []string{"mandoc", "-T", "utf8", "-W", "warning", p}
		}}
	}
	sdtest.Require(t, "a man page formatter (Debian package man-db; scripts/check-deps installs it)", false)
	return renderer{}
}

// render formats the page at path and fails the test on any warning.
func (r renderer) render(t *testing.T, path string) string {
	t.Helper()
	argv := r.args(path)
	cmd := exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat", "MAN_KEEP_FORMATTING=", "LC_ALL=C.UTF-8", "GROFF_NO_SGR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("%s %s: warnings on stderr:\n%s", r.name, filepath.Base(path), stderr.String())
	}
	// man strips bold and underline when stdout is no terminal; groff and
	// mandoc overstrike.
	return string(stripOverstrike(stdout.Bytes()))
}

// stripOverstrike removes nroff's "c\bc" bold and "_\bc" underline.
func stripOverstrike(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); i++ {
		if i+1 < len(b) && b[i+1] == '\b' {
			i++ // skip the char and the backspace; the next one stays
			continue
		}
		out = append(out, b[i])
	}
	return out
}
