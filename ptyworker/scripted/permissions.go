package scripted

import (
	"context"
	"strconv"
	"strings"
)

// verdict is what the permission rules say about a tool call.
type verdict int

const (
	verdictAsk   verdict = iota // no rule decides: ask (PermissionRequest, then the dialog)
	verdictAllow                // a rule or the mode allows it
	verdictDeny                 // a deny rule, or dontAsk mode with no allow rule
)

// policy is the session's permission state: the mode and the rules of the
// settings file, --allowedTools and --disallowedTools, and the rules added
// by "don't ask again" in a dialog.
type policy struct {
	mode             string
	allow, deny, ask []Rule
}

// newPolicy combines the command line's mode and rules with the settings.
func newPolicy(a Args, s *Settings) *policy {
	p := &policy{mode: a.PermissionMode}
	if s != nil {
		p.allow = append(p.allow, s.Permissions.Allow...)
		p.deny = append(p.deny, s.Permissions.Deny...)
		p.ask = append(p.ask, s.Permissions.Ask...)
		if p.mode == "" {
			p.mode = s.Permissions.DefaultMode
		}
	}
	p.allow = append(p.allow, a.AllowedTools...)
	p.deny = append(p.deny, a.DisallowedTools...)
	switch p.mode {
	case "":
		p.mode = "auto" // Claude Code's default (its hook payloads say so)
	case "manual":
		p.mode = "default" // the same mode; payloads say "default"
	}
	return p
}

// readOnly are commands Claude Code runs with no rule and no prompt in any
// mode, as read-only (a few of its built-in list, matched like Bash(X:*)).
var readOnly = []Rule{
	{"Bash", "echo:*"}, {"Bash", "pwd:*"}, {"Bash", "ls:*"}, {"Bash", "cat:*"}, {"Bash", "head:*"},
	{"Bash", "tail:*"}, {"Bash", "wc:*"}, {"Bash", "grep:*"}, {"Bash", "which:*"}, {"Bash", "date:*"},
	{"Bash", "git status:*"}, {"Bash", "git log:*"}, {"Bash", "git diff:*"}, {"Bash", "git show:*"},
}

// bash decides a Bash command: every part of a compound command must be
// allowed for the whole to be; any part a deny rule matches denies it.
func (p *policy) bash(cmd string) verdict {
	parts := subcommands(cmd)
	if len(parts) == 0 {
		parts = []string{strings.TrimSpace(cmd)}
	}
	anyMatch := func(rules []Rule, part string) bool {
		for _, r := range rules {
			if r.matchesBash(part) {
				return true
			}
		}
		return false
	}
	allowed, asked := true, false
	for _, part := range parts {
		if anyMatch(p.deny, part) {
			return verdictDeny
		}
		asked = asked || anyMatch(p.ask, part)
		allowed = allowed && (anyMatch(p.allow, part) || anyMatch(readOnly, part))
	}
	switch {
	case p.mode == "bypassPermissions":
		return verdictAllow
	case allowed && !asked:
		return verdictAllow
	case p.mode == "dontAsk":
		return verdictDeny
	}
	return verdictAsk
}

// dontAskAgain adds the session rule the dialog's second option offers
// (see rulePrefix) and returns it.
func (p *policy) dontAskAgain(cmd string) Rule {
	r := Rule{Tool: "Bash", Spec: rulePrefix(cmd) + " *"}
	p.allow = append(p.allow, r)
	return r
}

// twoWordCommands are commands whose second word is a subcommand, so that
// a rule offered for them keeps it ("legion issue *", "git commit *").
var twoWordCommands = map[string]bool{"legion": true, "git": true, "go": true, "npm": true, "docker": true, "cargo": true, "kubectl": true, "systemctl": true}

// rulePrefix is the command prefix a permission suggestion offers to allow
// (Claude Code's suggestions look like "legion issue *"): the command, with
// its subcommand for commands that have them.
func rulePrefix(cmd string) string {
	words := strings.Fields(cmd)
	switch {
	case len(words) == 0:
		return ""
	case len(words) > 1 && twoWordCommands[words[0]] && !strings.HasPrefix(words[1], "-"):
		return words[0] + " " + words[1]
	}
	return words[0]
}

// Permission dialog wording, as Claude Code 2.1.330 shows it for Bash.
const (
	permissionQuestion = "Do you want to proceed?"
	permissionFooter   = "Esc to cancel · Tab to amend"
)

// permissionChoice is what the person picked in the dialog.
type permissionChoice int

const (
	choiceYes permissionChoice = iota
	choiceAlways
	choiceNo
	choiceHook // the PermissionRequest hook decided first
)

// permissionDialog shows Claude Code's Bash permission dialog while the
// PermissionRequest hook runs, and returns what decides first: a key (a
// digit picks at once; Up/Down and Enter pick the highlighted option, Yes
// at first; Esc is No) or the hook's decision (choiceHook, with it). A
// hook that ends without a decision leaves the dialog open.
func (a *agent) permissionDialog(ctx context.Context, command, description string, hook <-chan *Decision) (permissionChoice, *Decision, error) {
	t := a.term
	t.printf("\n Bash command\n\n   %s\n   %s\n\n %s\n", command, description, permissionQuestion)
	labels := []string{
		"Yes",
		"Yes, and don't ask again for " + rulePrefix(command) + " commands in " + a.o.Cwd,
		"Yes, and switch to auto mode",
		"No",
	}
	r, err := t.menu(ctx, menu{labels: labels, footer: permissionFooter, textAt: -1}, hook)
	switch {
	case err != nil:
		return choiceNo, nil, err
	case r.decision != nil:
		return choiceHook, r.decision, nil
	case r.index == 0 || r.index == 2:
		return choiceYes, nil, nil
	case r.index == 1:
		return choiceAlways, nil, nil
	}
	return choiceNo, nil, nil
}

// menu is a dialog's numbered options.
type menu struct {
	labels []string
	footer string // shown below the options, "" for none
	textAt int    // the index of the option that takes typed text ("Type something."), -1 for none
}

// menuResult is how a menu ended.
type menuResult struct {
	index    int       // the option picked, -1 for Esc
	text     string    // typed at the textAt option
	decision *Decision // the hook decided first (index is -1)
}

// menu shows m and reads the choice. A digit picks its option at once,
// but the digit of the textAt option only moves the highlight there; Up
// and Down move it; Enter picks the highlighted option, which is the
// first at the start; other keys are ignored (so typed text picks the
// first option at its Enter, unless it holds a digit), except that with
// the highlight on the textAt option they are typed into it (its line
// then reads "❯ N. TEXT", as Claude Code's) and Enter submits that text.
// The screen is cleared when the menu ends. As in Claude Code, keys that arrive in one read are a
// paste: a digit in them picks nothing ("3text\r" in one write records
// the first option). Esc returns index -1. A decision on hook ends the
// menu; a nil one (the hook ended without one) leaves it open.
func (t *terminal) menu(ctx context.Context, m menu, hook <-chan *Decision) (menuResult, error) {
	defer t.printf(clearScreen)
	sel := 0
	var text []rune
	// field redraws the text option's line as its label: "❯ N. TEXT".
	field := func() { t.printf("\r\x1b[2K ❯ %d. %s", m.textAt+1, string(text)) }
	show := func() {
		for i, l := range m.labels {
			mark := "  "
			if i == sel {
				mark = "❯ "
			}
			if i == m.textAt && len(text) > 0 {
				l = string(text)
			}
			t.printf(" %s%d. %s\n", mark, i+1, l)
		}
		if m.footer != "" {
			t.printf("\n %s\n", m.footer)
		}
	}
	show()
	for {
		var k key
		select {
		case d := <-hook:
			if d != nil {
				return menuResult{index: -1, decision: d}, nil
			}
			hook = nil
			continue
		case kk, ok := <-t.input():
			if !ok {
				return menuResult{index: -1}, errTerminalClosed
			}
			k = kk
		case <-ctx.Done():
			return menuResult{index: -1}, ctx.Err()
		}
		switch {
		case k.kind == keyEsc:
			return menuResult{index: -1}, nil
		case k.kind == keyEnter && sel == m.textAt:
			if len(text) > 0 {
				return menuResult{index: sel, text: string(text)}, nil
			}
		case k.kind == keyEnter:
			return menuResult{index: sel}, nil
		case k.kind == keyUp || k.kind == keyDown:
			if k.kind == keyUp && sel > 0 {
				sel--
			} else if k.kind == keyDown && sel < len(m.labels)-1 {
				sel++
			}
			t.printf("\n")
			show()
		case sel == m.textAt && k.kind == keyRune:
			text = append(text, k.r)
			field()
		case sel == m.textAt && k.kind == keyBackspace:
			if len(text) > 0 {
				text = text[:len(text)-1]
			}
			field()
		case k.kind == keyRune:
			n, err := strconv.Atoi(string(k.r))
			if k.paste || err != nil || n < 1 || n > len(m.labels) {
				continue // typed text, and digits in a paste, pick nothing
			}
			if n-1 != m.textAt {
				return menuResult{index: n - 1}, nil
			}
			sel = n - 1
			t.printf("\n")
			show()
			t.printf("\n")
			field()
		}
	}
}
