package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// Settings is what the agent reads from Claude Code's settings JSON
// (--settings FILE): the hooks it runs and the permission rules it checks.
// Other keys are ignored, as Claude Code ignores what it does not know.
type Settings struct {
	Hooks       map[string][]HookMatcher // by event name, e.g. "PreToolUse"
	Permissions Permissions
}

// HookMatcher is one entry of hooks.<Event>: the hooks to run when the
// event's subject (a tool name, a notification type, a source...) matches.
type HookMatcher struct {
	Matcher string // as written; "" and "*" match everything
	match   *regexp.Regexp
	Hooks   []Hook
}

// Hook is one command hook: run with sh -c, the event's payload on stdin.
type Hook struct {
	Command string
	Timeout time.Duration // 0: the event's default
}

// Permissions are the permission rules of a settings file.
type Permissions struct {
	Allow, Deny, Ask []Rule
	DefaultMode      string // "" when the file sets none
}

// Permission modes the agent knows (--permission-mode and
// permissions.defaultMode). Only bypassPermissions and dontAsk change what
// it does: every other mode asks for what no rule allows.
var permissionModes = []string{"default", "auto", "manual", "acceptEdits", "plan", "dontAsk", "bypassPermissions"}

// settingsFile is the JSON form of Settings.
type settingsFile struct {
	Hooks       map[string][]matcherJSON `json:"hooks"`
	Permissions *struct {
		Allow       []string `json:"allow"`
		Deny        []string `json:"deny"`
		Ask         []string `json:"ask"`
		DefaultMode string   `json:"defaultMode"`
	} `json:"permissions"`
}

type matcherJSON struct {
	Matcher string     `json:"matcher"`
	Hooks   []hookJSON `json:"hooks"`
}

type hookJSON struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Timeout *float64 `json:"timeout"` // seconds
}

// ReadSettings reads and parses a settings file. Errors name the file.
func ReadSettings(path string) (*Settings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	s, err := ParseSettings(data)
	if err != nil {
		return nil, fmt.Errorf("settings %s: %w", path, err)
	}
	return s, nil
}

// ParseSettings parses Claude Code settings JSON. It keeps hooks of type
// "command" (other types, which need a model or a server, are skipped) and
// rejects what Claude Code could not run either: a command hook without a
// command, a timeout that is not a positive number of seconds, a matcher
// that is not a valid regular expression, a permission rule that is not
// Tool or Tool(specifier), an unknown defaultMode. Errors name the key.
func ParseSettings(data []byte) (*Settings, error) {
	var f settingsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a settings JSON object: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a settings JSON object: data after the object")
	}
	s := &Settings{Hooks: map[string][]HookMatcher{}}
	for event, matchers := range f.Hooks {
		for i, mj := range matchers {
			key := fmt.Sprintf("hooks.%s[%d]", event, i)
			m := HookMatcher{Matcher: mj.Matcher}
			re, err := compileMatcher(mj.Matcher)
			if err != nil {
				return nil, fmt.Errorf("%s.matcher %q: %w", key, mj.Matcher, err)
			}
			m.match = re
			for j, hj := range mj.Hooks {
				hkey := fmt.Sprintf("%s.hooks[%d]", key, j)
				if hj.Type != "command" {
					if hj.Type == "" {
						return nil, fmt.Errorf("%s.type: missing; want \"command\"", hkey)
					}
					continue // prompt, agent, http...: not run by the scripted agent
				}
				if strings.TrimSpace(hj.Command) == "" {
					return nil, fmt.Errorf("%s.command: missing; want a shell command", hkey)
				}
				h := Hook{Command: hj.Command}
				if hj.Timeout != nil {
					t := *hj.Timeout
					if !(t > 0) || t > 1e9 {
						return nil, fmt.Errorf("%s.timeout %v: want a positive number of seconds", hkey, t)
					}
					h.Timeout = time.Duration(t * float64(time.Second))
				}
				m.Hooks = append(m.Hooks, h)
			}
			s.Hooks[event] = append(s.Hooks[event], m)
		}
	}
	if p := f.Permissions; p != nil {
		var err error
		if s.Permissions.Allow, err = parseRules("permissions.allow", p.Allow); err != nil {
			return nil, err
		}
		if s.Permissions.Deny, err = parseRules("permissions.deny", p.Deny); err != nil {
			return nil, err
		}
		if s.Permissions.Ask, err = parseRules("permissions.ask", p.Ask); err != nil {
			return nil, err
		}
		if p.DefaultMode != "" {
			if err := checkMode(p.DefaultMode); err != nil {
				return nil, fmt.Errorf("permissions.defaultMode: %w", err)
			}
		}
		s.Permissions.DefaultMode = p.DefaultMode
	}
	return s, nil
}

// checkMode reports an error unless mode is a known permission mode.
func checkMode(mode string) error {
	for _, m := range permissionModes {
		if m == mode {
			return nil
		}
	}
	return fmt.Errorf("permission mode %q: want one of %s", mode, strings.Join(permissionModes, ", "))
}

// plainMatcher is a matcher of tool names and alternatives only (Bash,
// Edit|Write), matched exactly; anything else is a regular expression.
var plainMatcher = regexp.MustCompile(`^[A-Za-z0-9_|]+$`)

// compileMatcher turns a hook matcher into a regular expression over the
// whole subject; nil matches everything.
func compileMatcher(m string) (*regexp.Regexp, error) {
	if m == "" || m == "*" {
		return nil, nil
	}
	if plainMatcher.MatchString(m) {
		alts := strings.Split(m, "|")
		for i, a := range alts {
			alts[i] = regexp.QuoteMeta(a)
		}
		return regexp.Compile("^(?:" + strings.Join(alts, "|") + ")$")
	}
	return regexp.Compile("^(?:" + m + ")$")
}

// matches reports whether the matcher applies to subject.
func (m HookMatcher) matches(subject string) bool {
	return m.match == nil || m.match.MatchString(subject)
}

// Rule is one permission rule: a tool, and for Bash a command pattern.
type Rule struct {
	Tool string // e.g. "Bash"
	// Spec is what is in the parentheses, "" for the whole tool. For Bash:
	// "CMD:*" allows CMD alone or followed by arguments, a * elsewhere
	// matches any text, anything else is the exact command.
	Spec string
}

func (r Rule) String() string {
	if r.Spec == "" {
		return r.Tool
	}
	return r.Tool + "(" + r.Spec + ")"
}

// ruleForm is a rule as written: a tool name, then optionally a specifier
// in parentheses.
var ruleForm = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_-]*)(?:\((.*)\))?$`)

// ParseRule parses one rule such as "Bash", "Bash(git:*)" or
// "Bash(make test)".
func ParseRule(s string) (Rule, error) {
	m := ruleForm.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Rule{}, fmt.Errorf("rule %q: want Tool or Tool(specifier), e.g. Bash(git:*)", s)
	}
	spec := m[2]
	if spec == "*" {
		spec = ""
	}
	return Rule{Tool: m[1], Spec: spec}, nil
}

func parseRules(key string, list []string) ([]Rule, error) {
	var rules []Rule
	for i, s := range list {
		r, err := ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// parseToolList parses the values of --allowedTools: rules separated by
// commas or spaces outside parentheses.
func parseToolList(values []string) ([]Rule, error) {
	var rules []Rule
	for _, v := range values {
		depth, start := 0, 0
		flush := func(end int) error {
			if s := strings.TrimSpace(v[start:end]); s != "" {
				r, err := ParseRule(s)
				if err != nil {
					return err
				}
				rules = append(rules, r)
			}
			return nil
		}
		for i := 0; i < len(v); i++ {
			switch c := v[i]; {
			case c == '(':
				depth++
			case c == ')' && depth > 0:
				depth--
			case (c == ',' || c == ' ') && depth == 0:
				if err := flush(i); err != nil {
					return nil, err
				}
				start = i + 1
			}
		}
		if err := flush(len(v)); err != nil {
			return nil, err
		}
	}
	return rules, nil
}

// matchesBash reports whether r covers the Bash command cmd (one simple
// command, see subcommands).
func (r Rule) matchesBash(cmd string) bool {
	if r.Tool != "Bash" {
		return false
	}
	if r.Spec == "" {
		return true
	}
	if prefix, ok := strings.CutSuffix(r.Spec, ":*"); ok {
		return cmd == prefix || strings.HasPrefix(cmd, prefix+" ")
	}
	if !strings.Contains(r.Spec, "*") {
		return cmd == r.Spec
	}
	parts := strings.Split(r.Spec, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re, err := regexp.Compile("^" + strings.Join(parts, ".*") + "$")
	return err == nil && re.MatchString(cmd)
}

// subcommands splits a shell command line at &&, ||, ;, | and newlines
// outside quotes, as Claude Code checks each part of a compound command
// on its own. Parts are trimmed; empty parts are dropped.
func subcommands(cmd string) []string {
	var (
		parts []string
		cur   strings.Builder
		quote byte
	)
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			parts = append(parts, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(cmd) {
				cur.WriteByte(c)
				i++
				c = cmd[i]
			}
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote = c
			cur.WriteByte(c)
		case c == ';' || c == '\n' || c == '|' || c == '&' && i+1 < len(cmd) && cmd[i+1] == '&':
			if (c == '|' || c == '&') && i+1 < len(cmd) && cmd[i+1] == c {
				i++
			}
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return parts
}
