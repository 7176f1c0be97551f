package docs

import (
	"strings"
	"testing"
)

// requests are the only roff requests the generators emit inside text.
var requests = []string{".PP", ".RS 4", ".nf", ".fi", ".RE", ".sp"}

// FuzzPlainText feeds arbitrary text (as a command's Long or a schema
// doc could hold) through plainText and checks the roff is safe: every
// line that starts a request is one of ours, no text line starts with a
// control character, and no backslash is left unescaped.
func FuzzPlainText(f *testing.F) {
	for _, s := range []string{
		"plain", ".TH evil\n'br\n", "a\\fBb", "  indented\n\tmore\n\nprose `code` end",
		"`unclosed", "x\n.\n..\n'\n", "\\\\n", "über ×", "\x00\x1b[31m",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := plainText(s)
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
				ok := false
				for _, r := range requests {
					ok = ok || line == r
				}
				if !ok {
					t.Fatalf("plainText(%q) has the line %q, which roff reads as a request", s, line)
				}
			}
			checkEscapes(t, s, line)
		}
	})
}

// checkEscapes fails on a backslash that does not start one of the escapes
// the generators write: \e \- \& \fB \fR \[uXXXX] (4 to 6 hex digits).
func checkEscapes(t *testing.T, in, line string) {
	t.Helper()
	for i := 0; i < len(line); i++ {
		if line[i] != '\\' {
			continue
		}
		rest := line[i+1:]
		switch {
		case strings.HasPrefix(rest, "e"), strings.HasPrefix(rest, "-"), strings.HasPrefix(rest, "&"):
			i++
		case strings.HasPrefix(rest, "fB"), strings.HasPrefix(rest, "fR"):
			i += 2
		case strings.HasPrefix(rest, "[u") && strings.Contains(rest, "]"):
			hex := rest[2:strings.Index(rest, "]")]
			if len(hex) < 4 || len(hex) > 6 || strings.Trim(hex, "0123456789ABCDEF") != "" {
				t.Fatalf("escaping %q gave %q: bad character escape \\[u%s]", in, line, hex)
			}
			i += 3 + len(hex)
		default:
			t.Fatalf("escaping %q gave %q: stray backslash at %d", in, line, i)
		}
	}
	for _, r := range line {
		if r < 0x20 || r == 0x7f || r > 0x7e {
			t.Fatalf("escaping %q gave %q: raw character %U", in, line, r)
		}
	}
}

// FuzzRoffCode checks the escaping of literals the same way.
func FuzzRoffCode(f *testing.F) {
	for _, s := range []string{"--flag", ".start", `a\b`, "x\ny", "ünï"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{roffCode(s), roffText(s), roffInline(s)} {
			if strings.Contains(out, "\n") {
				t.Fatalf("escaping %q gave a newline: %q", s, out)
			}
			if strings.HasPrefix(out, ".") || strings.HasPrefix(out, "'") {
				t.Fatalf("escaping %q gave %q, which starts a request", s, out)
			}
			checkEscapes(t, s, out)
		}
	})
}
