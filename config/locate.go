package config

import (
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// BurntSushi/toml records the position of every key but does not export it
// (only a ParseError carries one, for the first error). So the locator scans
// the document itself: a small tokenizer that knows just enough TOML (keys,
// table headers, strings of all four kinds, arrays, inline tables, comments)
// to list every key in document order with its line. The list must equal
// toml's MetaData.Keys(); if it does not, the locator reports no lines
// rather than wrong ones (FuzzLoad checks that the two agree).

// keyLine is one key of the document and the line it is defined on.
type keyLine struct {
	key  []string
	line int
}

// locator answers "on which line is this key?".
type locator struct {
	keys  []keyLine
	first map[string]int // joined key -> line of its first appearance
}

// newLocator scans src; want is toml's list of keys of the same document.
func newLocator(src string, want []toml.Key) *locator {
	keys := scanKeys(src)
	if len(keys) != len(want) {
		return &locator{}
	}
	l := &locator{keys: keys, first: make(map[string]int, len(keys))}
	for i, k := range keys {
		if !slices.Equal(k.key, want[i]) {
			return &locator{}
		}
		if _, ok := l.first[joinKey(k.key)]; !ok {
			l.first[joinKey(k.key)] = k.line
		}
	}
	return l
}

// line returns the line where path is defined. A key that is not in the
// document (a missing key, or a table only implied by its sub-keys) gets
// the line of its first sub-key, or else of its nearest defined parent.
// 0 means unknown.
func (l *locator) line(path []string) int {
	if n, ok := l.first[joinKey(path)]; ok {
		return n
	}
	for _, k := range l.keys {
		if len(k.key) > len(path) && slices.Equal(k.key[:len(path)], path) {
			return k.line
		}
	}
	for n := len(path) - 1; n > 0; n-- {
		if line, ok := l.first[joinKey(path[:n])]; ok {
			return line
		}
	}
	return 0
}

// scanner is the tokenizer behind scanKeys. It never fails: on input that is
// not TOML it still ends, with a list that will not match toml's.
type scanner struct {
	s    string
	i    int
	line int
	out  []keyLine
}

// scanKeys lists every key of src in document order, as toml's
// MetaData.Keys does: table headers, keys of key/value pairs with their
// table prefix, and keys inside inline tables (also inside arrays).
func scanKeys(src string) []keyLine {
	sc := &scanner{s: src, line: 1}
	var table []string
	for {
		sc.skipBlank(true)
		if sc.eof() {
			return sc.out
		}
		start := sc.i
		if sc.s[sc.i] == '[' {
			line := sc.line
			sc.i++
			arr := sc.peek('[')
			if arr {
				sc.i++
			}
			table = sc.key()
			sc.skipBlank(false)
			sc.consume(']')
			if arr {
				sc.consume(']')
			}
			sc.out = append(sc.out, keyLine{table, line})
		} else {
			sc.pair(table)
		}
		if sc.i == start { // not TOML; make progress
			sc.i++
		}
	}
}

// pair scans "key = value" inside the table prefix.
func (sc *scanner) pair(prefix []string) {
	line := sc.line
	k := sc.key()
	if k == nil {
		return
	}
	full := append(slices.Clip(prefix), k...)
	sc.out = append(sc.out, keyLine{full, line})
	sc.skipBlank(false)
	sc.consume('=')
	sc.skipBlank(false)
	sc.value(full)
}

// value skips one value; inline tables in it add their keys under path.
func (sc *scanner) value(path []string) {
	if sc.eof() {
		return
	}
	switch rest := sc.s[sc.i:]; {
	case strings.HasPrefix(rest, `"""`):
		sc.multiline(`"""`, true)
	case strings.HasPrefix(rest, `'''`):
		sc.multiline(`'''`, false)
	case rest[0] == '"':
		sc.quoted('"', true)
	case rest[0] == '\'':
		sc.quoted('\'', false)
	case rest[0] == '[':
		sc.list(']', sc.value, path)
	case rest[0] == '{':
		sc.list('}', sc.pair, path)
	default: // number, boolean, datetime (which may hold a space)
		for !sc.eof() && !strings.ContainsRune(",]}#\r\n", rune(sc.s[sc.i])) {
			sc.i++
		}
	}
}

// key scans a possibly dotted key, bare or quoted parts; nil if none.
func (sc *scanner) key() []string {
	var parts []string
	for {
		sc.skipBlank(false)
		if sc.eof() {
			return parts
		}
		start := sc.i
		switch sc.s[sc.i] {
		case '"':
			sc.quoted('"', true)
			parts = append(parts, unquoteKey(sc.s[start:sc.i]))
		case '\'':
			sc.quoted('\'', false)
			raw := sc.s[start:sc.i]
			parts = append(parts, strings.TrimSuffix(strings.TrimPrefix(raw, "'"), "'"))
		default:
			for !sc.eof() && isBareKeyChar(sc.s[sc.i]) {
				sc.i++
			}
			if sc.i == start {
				return parts
			}
			parts = append(parts, sc.s[start:sc.i])
		}
		sc.skipBlank(false)
		if !sc.peek('.') {
			return parts
		}
		sc.i++
	}
}

// quoted skips a one-line string opened by q at sc.i.
func (sc *scanner) quoted(q byte, escapes bool) {
	sc.i++
	for !sc.eof() {
		c := sc.s[sc.i]
		switch {
		case c == '\n':
			return // not TOML
		case c == q:
			sc.i++
			return
		case c == '\\' && escapes && sc.i+1 < len(sc.s) && sc.s[sc.i+1] != '\n':
			sc.i += 2
		default:
			sc.i++
		}
	}
}

// multiline skips a multi-line string opened by delim at sc.i. Up to two
// quotes may precede the closing delimiter (`"""a"""""` is `a""`).
func (sc *scanner) multiline(delim string, escapes bool) {
	sc.i += len(delim)
	for !sc.eof() {
		c := sc.s[sc.i]
		switch {
		case c == '\n':
			sc.line++
			sc.i++
		case c == '\\' && escapes && sc.i+1 < len(sc.s):
			if sc.s[sc.i+1] == '\n' {
				sc.line++
			}
			sc.i += 2
		case strings.HasPrefix(sc.s[sc.i:], delim):
			sc.i += len(delim)
			for n := 0; n < 2 && sc.peek(delim[0]); n++ {
				sc.i++
			}
			return
		default:
			sc.i++
		}
	}
}

// skipBlank skips spaces, tabs and comments, and newlines if nl is set.
func (sc *scanner) skipBlank(nl bool) {
	for !sc.eof() {
		switch sc.s[sc.i] {
		case ' ', '\t':
			sc.i++
		case '\r':
			if !nl {
				return
			}
			sc.i++
		case '\n':
			if !nl {
				return
			}
			sc.line++
			sc.i++
		case '#':
			if !nl {
				return
			}
			for !sc.eof() && sc.s[sc.i] != '\n' {
				sc.i++
			}
		default:
			return
		}
	}
}

func (sc *scanner) eof() bool { return sc.i >= len(sc.s) }

func (sc *scanner) peek(c byte) bool { return sc.i < len(sc.s) && sc.s[sc.i] == c }

func (sc *scanner) consume(c byte) {
	if sc.peek(c) {
		sc.i++
	}
}

func isBareKeyChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// unquoteKey decodes a basic-string key ("a\u00e9") with toml itself, so
// escapes mean exactly what they mean to the parser.
func unquoteKey(quoted string) string {
	var v struct{ K string }
	if _, err := toml.Decode("K = "+quoted, &v); err != nil {
		return quoted
	}
	return v.K
}

// list scans an array ('[' … ']', items are values) or an inline table
// ('{' … '}', items are key = value pairs), from just before the opening
// bracket to just after close. An item that consumes nothing is skipped
// one byte, so a malformed list cannot stall the scan.
func (sc *scanner) list(close byte, item func(path []string), path []string) {
	sc.i++
	for {
		sc.skipBlank(true)
		if sc.eof() {
			return
		}
		switch sc.s[sc.i] {
		case close:
			sc.i++
			return
		case ',':
			sc.i++
			continue
		}
		start := sc.i
		item(path)
		if sc.i == start {
			sc.i++
		}
	}
}
