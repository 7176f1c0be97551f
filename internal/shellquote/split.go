package shellquote

import "strings"

// Split returns the words bash would pass to the program of cmd, when cmd
// is one simple command written with nothing but plain characters,
// single and double quotes, backslashes and the variables $NAME or
// ${NAME} that lookup knows; ok is false for anything else, whose words
// could not be known without running a shell:
//
//   - a second command or a pipeline (;, &, |, an unquoted newline), a
//     redirection (<, >), a subshell or group ((, ), {, });
//   - a command substitution ($(…), `…`), arithmetic, any other
//     expansion ($1, $?, ${NAME:-x}, $'…'), a variable lookup does not
//     know, or one it knows whose value unquoted would be split or
//     globbed (whitespace, *, ?, [);
//   - words bash would change: a glob (*, ?, [, ]), a tilde, a brace
//     expansion, a comment (#), history or negation (!), a variable
//     assignment in front of the command (NAME=value, which is only a
//     word here and so never the program's name the caller looks for);
//   - an unterminated quote, a NUL byte.
//
// A newline inside quotes is part of its word, as in bash; blanks around
// the command and newlines after it are ignored. One command substitution
// is read, inside double quotes only: the here-document
//
//	"$(cat <<'EOF'
//	any text, taken as it is
//	EOF
//	)"
//
// (the delimiter quoted, so that its body is literal), which models write
// for text of several lines; it gives the body without its trailing
// newlines, as bash does, provided cat is cat.
func Split(cmd string, lookup func(name string) (string, bool)) (words []string, ok bool) {
	var (
		word    strings.Builder
		inWord  bool // a word has begun (it may still be empty: "")
		i       int
		s       = strings.TrimRight(strings.TrimLeft(cmd, " \t"), " \t\n")
		special = func(c byte) bool { return strings.IndexByte("|&;()<>{}`*?[]~#!", c) >= 0 }
	)
	end := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	// variable reads $NAME or ${NAME} at s[i] ('$'); it returns the value
	// and the index after it.
	variable := func(i int) (string, int, bool) {
		j := i + 1
		braced := j < len(s) && s[j] == '{'
		if braced {
			j++
		}
		k := j
		for k < len(s) && (s[k] == '_' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= 'a' && s[k] <= 'z' || k > j && s[k] >= '0' && s[k] <= '9') {
			k++
		}
		if k == j {
			return "", 0, false
		}
		name := s[j:k]
		if braced {
			if k >= len(s) || s[k] != '}' {
				return "", 0, false
			}
			k++
		}
		v, ok := lookup(name)
		if !ok || strings.IndexByte(v, 0) >= 0 {
			return "", 0, false
		}
		return v, k, true
	}
	if strings.IndexByte(s, 0) >= 0 {
		return nil, false
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			end()
			i++
		case c == '\n' || c == '\r' || special(c):
			return nil, false
		case c == '\\':
			if i+1 >= len(s) || s[i+1] == '\n' {
				return nil, false
			}
			word.WriteByte(s[i+1])
			inWord = true
			i += 2
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			word.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 2
		case c == '"':
			i++
			for {
				if i >= len(s) {
					return nil, false
				}
				c := s[i]
				switch {
				case c == '`':
					return nil, false
				case c == '"':
					i++
				case c == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0:
					word.WriteByte(s[i+1])
					i += 2
					continue
				case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
					return nil, false
				case c == '$' && strings.HasPrefix(s[i:], heredocOpen):
					body, next, ok := heredoc(s, i)
					if !ok {
						return nil, false
					}
					word.WriteString(body)
					i = next
					continue
				case c == '$':
					v, next, ok := variable(i)
					if !ok {
						return nil, false
					}
					word.WriteString(v)
					i = next
					continue
				default:
					word.WriteByte(c)
					i++
					continue
				}
				break
			}
			inWord = true
		case c == '$':
			v, next, ok := variable(i)
			if !ok || v == "" || strings.ContainsAny(v, " \t\n*?[]") {
				// Unquoted, an empty value is no word at all, and one with
				// blanks or glob characters is split or globbed.
				return nil, false
			}
			word.WriteString(v)
			inWord = true
			i = next
		default:
			// Only an assignment before the program matters; a word
			// with '=' later on is plain (--flag=value).
			if c == '=' && len(words) == 0 && isName(word.String()) {
				return nil, false // NAME=value before the program: an assignment
			}
			word.WriteByte(c)
			inWord = true
			i++
		}
	}
	end()
	return words, len(words) > 0
}

// isName reports whether s is a shell variable name.
func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// heredocOpen begins the one command substitution Split reads.
const heredocOpen = "$(cat <<"

// heredoc reads, at s[i] inside double quotes, the command substitution
// $(cat <<'D' newline body newline D newline ) (or <<"D", blanks allowed
// before the delimiter): a quoted delimiter keeps the body literal. It
// returns the body without its trailing newlines, as the substitution
// gives it, and the index after the closing parenthesis. Any other form
// (an unquoted delimiter, whose body bash expands; text after the
// delimiter's word or line; no closing parenthesis right after the
// delimiter's line) is not ok.
func heredoc(s string, i int) (string, int, bool) {
	j := i + len(heredocOpen)
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if j >= len(s) || s[j] != '\'' && s[j] != '"' {
		return "", 0, false
	}
	q := s[j]
	j++
	k := j
	for k < len(s) && (s[k] == '_' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= 'a' && s[k] <= 'z' || k > j && s[k] >= '0' && s[k] <= '9') {
		k++
	}
	if k == j || k+1 >= len(s) || s[k] != q || s[k+1] != '\n' {
		return "", 0, false
	}
	delim := s[j:k]
	start := k + 2
	for line := start; ; {
		nl := strings.IndexByte(s[line:], '\n')
		if nl < 0 {
			return "", 0, false
		}
		if s[line:line+nl] == delim {
			after := line + nl + 1
			if after >= len(s) || s[after] != ')' {
				return "", 0, false
			}
			return strings.TrimRight(s[start:line], "\n"), after + 1, true
		}
		line += nl + 1
	}
}
