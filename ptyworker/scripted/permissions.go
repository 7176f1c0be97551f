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
	if p.mode == "" {
		p.mode = "auto" // Claude Code's default (its hook payloads say so)
	}
	return p
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
		allowed = allowed && anyMatch(p.allow, part)
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

// dontAskAgain adds the session rule the dialog's second option offers:
// the command's first word, with any arguments.
func (p *policy) dontAskAgain(cmd string) Rule {
	first, _, _ := strings.Cut(strings.TrimSpace(cmd), " ")
	r := Rule{Tool: "Bash", Spec: first + ":*"}
	p.allow = append(p.allow, r)
	return r
}

// Permission dialog wording, as Claude Code shows it for Bash.
const (
	permissionQuestion = "Do you want to proceed?"
	permissionYes      = "Yes"
	permissionNo       = "No, and tell Claude what to do differently (esc)"
)

// permissionChoice is what the person picked in the dialog.
type permissionChoice int

const (
	choiceYes permissionChoice = iota
	choiceAlways
	choiceNo
)

// permissionDialog shows Claude Code's Bash permission dialog and reads
// the choice: a digit picks at once, Up/Down and Enter pick the
// highlighted one (Yes at first), Esc is No.
func (a *agent) permissionDialog(ctx context.Context, command, description string) (permissionChoice, error) {
	first, _, _ := strings.Cut(strings.TrimSpace(command), " ")
	t := a.term
	t.printf("\n Bash command\n\n   %s\n   %s\n\n %s\n", command, description, permissionQuestion)
	labels := []string{
		permissionYes,
		"Yes, and don't ask again for " + first + " commands in " + a.o.Cwd,
		permissionNo,
	}
	i, err := t.menu(ctx, labels, "")
	if err != nil {
		return choiceNo, err
	}
	switch i {
	case 0:
		return choiceYes, nil
	case 1:
		return choiceAlways, nil
	}
	return choiceNo, nil
}

// menu shows numbered labels, then footer (if any), and reads the choice,
// returning its index or -1 for Esc: a digit picks its label at once (other digits and other
// keys are ignored, so typed text picks nothing unless it holds a digit),
// Up and Down move the highlight, Enter picks the highlighted label, which
// is the first at the start.
func (t *terminal) menu(ctx context.Context, labels []string, footer string) (int, error) {
	sel := 0
	show := func() {
		for i, l := range labels {
			mark := "  "
			if i == sel {
				mark = "❯ "
			}
			t.printf(" %s%d. %s\n", mark, i+1, l)
		}
		if footer != "" {
			t.printf("\n %s\n", footer)
		}
	}
	show()
	for {
		k, err := t.next(ctx)
		if err != nil {
			return -1, err
		}
		switch k.kind {
		case keyEsc:
			return -1, nil
		case keyEnter:
			return sel, nil
		case keyUp, keyDown:
			if k.kind == keyUp && sel > 0 {
				sel--
			} else if k.kind == keyDown && sel < len(labels)-1 {
				sel++
			}
			t.printf("\n")
			show()
		case keyRune:
			if n, err := strconv.Atoi(string(k.r)); err == nil && n >= 1 && n <= len(labels) {
				return n - 1, nil
			}
		}
	}
}
