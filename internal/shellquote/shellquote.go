// Package shellquote quotes words for a POSIX shell: for a command a
// person copies from Legion's output into a shell, or a hook command a
// shell runs; and it splits back the words of a command simple enough to
// be read without a shell (an agent's command the worker decides on,
// [Split]). It never runs a shell.
package shellquote

import "strings"

// Quote quotes s for a POSIX shell: as is when it holds only characters
// no shell treats specially, else in single quotes, inside which nothing
// is special but the quote itself, written as a closing quote, a
// backslash-escaped quote and an opening one. That is the whole of the
// rule, so no library is needed for it.
func Quote(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word and joins them with spaces.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}
