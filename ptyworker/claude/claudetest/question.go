package claudetest

import (
	"strconv"
	"testing"
)

// Screen texts of an open AskUserQuestion dialog (Claude Code 2.1.330):
// the hint line under a single question, and under a form of several.
// Keys typed before the dialog shows go to the prompt instead.
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
// there, then the text, which replaces the label, then Enter. Each step
// waits for the screen to show it took effect, so no key lands elsewhere.
func (term *Terminal) AnswerFreeText(t testing.TB, options int, text string) {
	t.Helper()
	n := strconv.Itoa(options + 1)
	term.WaitScreen(t, QuestionDialog, n+". "+TypeSomething)
	term.Type(t, n)
	term.WaitScreen(t, "❯ "+n+". "+TypeSomething)
	term.Type(t, text)
	term.WaitScreen(t, "❯ "+n+". "+text)
	term.Type(t, "\r")
}
