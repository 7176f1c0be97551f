package claudetest

import (
	"strconv"
	"strings"
	"testing"
)

// Screen texts of an open AskUserQuestion dialog (Claude Code 2.1.330):
// the hint line under a single question, and under a form of several,
// while the focus is on an option (on "Type something." the hint gains
// "ctrl+g to edit in Vim · "). Keys typed before the dialog shows go to
// the prompt instead.
const (
	QuestionDialog      = "Enter to select · ↑/↓ to navigate · Esc to cancel"
	QuestionsFormDialog = "Enter to select · Tab/Arrow keys to navigate · Esc to cancel"
)

// TypeSomething is the label of the free-text choice that follows a
// question's options.
const TypeSomething = "Type something."

// AnswerFreeText answers the open single-question dialog of a question
// with options choices with text, the way a human's own words must go in:
// the digit of "Type something." (options+1), which only moves the focus
// there, then the text, which replaces the label, then Enter, which closes
// the dialog. Each step is confirmed on the screen and typed again if the
// CLI dropped it (TypeUntil); the text is typed again only when none of it
// showed.
func (term *Terminal) AnswerFreeText(t testing.TB, options int, text string) {
	t.Helper()
	n := strconv.Itoa(options + 1)
	focused, answered := "❯ "+n+". "+TypeSomething, "❯ "+n+". "+text
	term.WaitScreen(t, QuestionDialog, n+". "+TypeSomething)
	term.TypeUntil(t, n, "the focus on "+TypeSomething, func(s string) Effect {
		if hasLine(s, focused) {
			return Done
		}
		return NoEffect
	})
	term.TypeUntil(t, text, "the answer in the dialog", func(s string) Effect {
		switch {
		case hasLine(s, answered):
			return Done
		case hasLine(s, focused):
			return NoEffect
		}
		return Partly
	})
	term.TypeUntil(t, "\r", "the dialog to close", func(s string) Effect {
		if strings.Contains(s, dialogHint) {
			return NoEffect
		}
		return Done
	})
}

// dialogHint begins the hint line of every question dialog, whatever has
// the focus.
const dialogHint = "Enter to select ·"

// hasLine reports whether screen has a line that is line, leading and
// trailing spaces aside.
func hasLine(screen, line string) bool {
	for _, l := range strings.Split(screen, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
