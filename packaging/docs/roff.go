package docs

import (
	"fmt"
	"strings"
)

// Roff escaping for text that comes from elsewhere (the schema's
// documentation, defaults, types). Text is always put on text lines, never
// into macro arguments, so only these matter: a backslash starts an escape;
// a '.' or '\'' at the start of a line starts a request; '-' is a hyphen
// to groff, while on a command line or in a value it must be a minus (\-)
// so that it can be copied; anything beyond ASCII goes in as \[uXXXX], so
// groff needs no preprocessor to read it.

// roffText escapes prose.
func roffText(s string) string { return escape(s, false) }

// roffCode escapes a literal (a key, a value, a command): like roffText,
// with '-' as a minus sign.
func roffCode(s string) string { return escape(s, true) }

func escape(s string, code bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-' && code:
			b.WriteString(`\-`)
		case r == '\n' || r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f:
			// Control characters have no place in a page; drop them.
		case r > 0x7e:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if strings.HasPrefix(out, ".") || strings.HasPrefix(out, "'") {
		out = `\&` + out
	}
	return out
}

// roffInline escapes prose in which `backquoted` spans are literals, set
// in bold as man pages set commands. An unpaired backquote is kept as is.
func roffInline(s string) string {
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 { // odd number of backquotes: no spans
		return roffText(s)
	}
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 0 {
			b.WriteString(escape(p, false))
		} else {
			b.WriteString(`\fB` + escape(p, true) + `\fR`)
		}
	}
	return b.String()
}

// bold sets a literal in bold.
func bold(s string) string { return `\fB` + roffCode(s) + `\fR` }

// italic sets a placeholder or path in italics.
func italic(s string) string { return `\fI` + roffCode(s) + `\fR` }
