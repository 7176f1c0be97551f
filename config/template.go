package config

import (
	"errors"
	"fmt"
	"strings"
)

// Vars are the values of an argv template's placeholders.
type Vars struct {
	SessionID string // {session_id}
	Prompt    string // {prompt}
	Issue     string // {issue}, e.g. DEMO-1; empty for the controller
	Mode      string // {mode}: plan, implement, review, retro, finish or controller
	Workspace string // {workspace}: the worktree the agent runs in
}

// Placeholders are the names an argv template may use, as {name}.
var Placeholders = []string{"session_id", "prompt", "issue", "mode", "workspace"}

func (v Vars) lookup(name string) (string, bool) {
	switch name {
	case "session_id":
		return v.SessionID, true
	case "prompt":
		return v.Prompt, true
	case "issue":
		return v.Issue, true
	case "mode":
		return v.Mode, true
	case "workspace":
		return v.Workspace, true
	}
	return "", false
}

// Expand fills in the placeholders of an argv template, word by word: each
// element of argv stays exactly one argument, whatever the values contain
// (no shell is involved). "{{" and "}}" stand for literal braces; a "}"
// on its own is literal too. An unknown placeholder or an unclosed "{" is
// an error naming the argument.
func Expand(argv []string, vars Vars) ([]string, error) {
	out := make([]string, len(argv))
	var errs []error
	for i, word := range argv {
		s, err := expandWord(word, vars)
		if err != nil {
			errs = append(errs, fmt.Errorf("argument %d %q: %w", i, word, err))
			continue
		}
		out[i] = s
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckTemplate reports what Expand would reject in argv, whatever the
// values.
func CheckTemplate(argv []string) error {
	_, err := Expand(argv, Vars{})
	return err
}

func expandWord(word string, vars Vars) (string, error) {
	if !strings.ContainsAny(word, "{}") {
		return word, nil
	}
	var b strings.Builder
	for i := 0; i < len(word); {
		switch {
		case strings.HasPrefix(word[i:], "{{"):
			b.WriteByte('{')
			i += 2
		case strings.HasPrefix(word[i:], "}}"):
			b.WriteByte('}')
			i += 2
		case word[i] == '{':
			end := strings.IndexAny(word[i+1:], "{}")
			if end < 0 || word[i+1+end] != '}' {
				return "", fmt.Errorf(`unclosed "{": write "{{" for a literal brace`)
			}
			name := word[i+1 : i+1+end]
			v, ok := vars.lookup(name)
			if !ok {
				return "", fmt.Errorf("unknown placeholder {%s}: expected one of {%s}", name, strings.Join(Placeholders, "}, {"))
			}
			b.WriteString(v)
			i += end + 2
		default:
			b.WriteByte(word[i])
			i++
		}
	}
	return b.String(), nil
}
