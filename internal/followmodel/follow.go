// Package followmodel is the "model" of the fake model APIs' follow mode
// (anthropictest, openaitest, geminitest): a model that knows nothing but
// what the agent sent it. It owns the kind-neutral part: finding the
// instructions in a conversation, the steps they name, which of them the
// conversation already ran, the choice among alternatives, the text of
// placeholders, and the questions it asks. Each fake API converts its wire
// request into a Transcript and the Decision back into its wire answer.
//
// Decide is a pure function of the request, as a real model is: no state
// is kept between requests, so a restarted or resumed CLI that sends the
// conversation again gets the same answer. It never reads a test's script,
// files, or anything but its arguments, and never runs a command.
//
// # What it does with a request
//
//  1. The instructions are the latest user text holding fenced ```sh
//     blocks (the format Legion renders: one command per block, `<…>`
//     placeholders inside double quotes, an `If …` line before each
//     alternative of a choice). The CLI's system prompt is not part of the
//     Transcript. Without instructions it says it found none it can act
//     on, and ends its turn.
//     A numbered item that asks for work without naming a command ("2.
//     Work test first: …") is a step done with a file (WorkCommand: a line
//     added to NOTES.md), as a model writes code there; the commit after
//     it then has something to commit.
//  2. The commands already run are the shell tool calls after the earliest
//     user text identical to the instructions: a restart that sends the
//     same instructions again continues where the conversation was; other
//     instructions (the retro's, resuming the implementer's conversation)
//     start afresh, and so do the same instructions again after a run of
//     them that finished every step (a phase dispatched again into the
//     same conversation, e.g. a second review). A call counts for a step
//     when it is the step's command with any text where the placeholders
//     were; calls are matched in order.
//  3. The next step is the first not run: its command with each
//     placeholder filled with a short fixed text chosen by the
//     placeholder's words (no angle brackets, no double quotes; quoted if
//     the template did not quote it); review notes say the review's
//     outcome. A result that is an error does not
//     stop it: the failure is recorded (Decision.Failed) and it goes on.
//  4. Before its next command it asks each question once per conversation:
//     a line starting with `Question:` in a tool result (e.g. an issue body
//     that `legion issue show` printed). It asks with the request's
//     question tool (Transcript.AskTool, Claude Code's AskUserQuestion)
//     when one is offered and the instructions name it, with the options
//     of a trailing `(a|b|c)` or two generic ones; else as its whole reply,
//     ending the turn. Any answer (a tool result, a new user message)
//     lets it go on. A question with a line starting with `Answer:` after
//     it in the same result (a person answered it in the issue's
//     comments, which a later phase reads) is not asked.
//  5. When every step ran, a short final text ends the turn.
//
// # Traits
//
// The model's character, for the choices the instructions leave to it:
//
//   - A strict reviewer (the zero Traits): in instructions with a choice
//     whose conditions mention approving and changes, it requests changes
//     unless the conversation shows it asked for changes before (its own
//     earlier command naming worker-changes-requested, or a tool result,
//     e.g. the comments, saying changes were requested); then it
//     approves. It judges on what it read before it first wrote its own
//     words in this run, and its notes say the outcome ("Changes
//     requested: …", "Approved: …"), so a later review, in this
//     conversation or another, finds them. Every choice of the kind in
//     one run takes the same side. Traits.Lenient approves at once.
//   - Every other choice takes the first alternative.
//   - Traits.AsksInText asks questions as text even when a question tool is
//     offered (an unfinished turn, for the kinds that have such a tool).
package followmodel

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Role is who said an Item.
type Role string

// The roles of a conversation.
const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// Item is one piece of a conversation: a text block, a tool call of the
// assistant, or a tool's result sent back by the user side.
type Item struct {
	Role   Role
	Text   string  // a text block; "" for a call or a result
	Call   *Call   // an assistant's tool call
	Result *Result // a tool's result
}

// Call is a tool call of the assistant.
type Call struct {
	ID       string // the call's id, to pair its Result ("" pairs nothing)
	Tool     string // the tool's name
	Command  string // the command line of a shell tool; "" for other tools
	Question string // the (first) question of a question tool
}

// Result is a tool's result.
type Result struct {
	CallID  string
	Text    string
	IsError bool
}

// Transcript is a request as the model sees it.
type Transcript struct {
	Items []Item
	// AskTool is the name of the question tool the request offers, ""
	// when it offers none the model may use.
	AskTool string
}

// ResultOf is the result of the shell call of command in t, nil when t
// carries none.
func (t Transcript) ResultOf(command string) *Result {
	id := ""
	for _, it := range t.Items {
		if it.Call != nil && it.Call.Command == command {
			id = it.Call.ID
		}
		if it.Result != nil && id != "" && it.Result.CallID == id {
			return it.Result
		}
	}
	return nil
}

// Traits are the model's character; the zero value is the default model
// (see the package doc).
type Traits struct {
	Lenient    bool // approves at once in a review choice
	AsksInText bool // asks in text even with a question tool
}

// Action is what a Decision does.
type Action string

// The actions of a Decision.
const (
	Run Action = "run" // call the shell tool with Command
	Ask Action = "ask" // call the question tool with Question and Options
	Say Action = "say" // answer Text and end the turn
)

// Decision is the model's answer to a request.
type Decision struct {
	Action      Action
	Command     string   // Run: the command line, placeholders filled
	Description string   // Run: a short description of the command
	Question    string   // Ask
	Options     []string // Ask: the options' labels
	Text        string   // Say: the whole reply
	Step, Steps int      // Run: the step run (1-based) of how many

	// Failed are the shell calls since the instructions whose result was
	// an error, in order.
	Failed []Failure
}

// Failure is a command whose result was an error, with the last line of
// that result.
type Failure struct {
	Command, Result string
}

// NoInstructions is the start of the reply to a request without
// instructions.
const NoInstructions = "I found no instructions I can act on"

// Decide is the model's answer to t.
func Decide(t Transcript, traits Traits) Decision {
	last := -1
	var steps []Step
	for i := len(t.Items) - 1; i >= 0; i-- {
		it := t.Items[i]
		if it.Role == User && it.Text != "" {
			if s := Steps(it.Text); len(s) > 0 {
				last, steps = i, s
				break
			}
		}
	}
	if last < 0 {
		return Decision{Action: Say, Text: NoInstructions + ": no message gives me commands to run, so I stop here."}
	}
	instructions := t.Items[last].Text
	// The run of these instructions starts at the earliest message that
	// holds them, or at a later one when the run before it finished.
	var anchors []int
	for i := 0; i <= last; i++ {
		if t.Items[i].Role == User && t.Items[i].Text == instructions {
			anchors = append(anchors, i)
		}
	}
	anchor := anchors[0]
	for _, a := range anchors[1:] {
		if next, _ := progress(steps, shellCalls(t.Items[anchor+1:a])); next < 0 {
			anchor = a
		}
	}

	results := map[string]*Result{}
	for _, it := range t.Items {
		if it.Result != nil && it.Result.CallID != "" {
			results[it.Result.CallID] = it.Result
		}
	}
	calls := shellCalls(t.Items[anchor+1:])
	var failed []Failure
	for _, c := range calls {
		if r := results[c.ID]; r != nil && r.IsError {
			failed = append(failed, Failure{Command: c.Command, Result: lastLine(r.Text)})
		}
	}
	next, side := progress(steps, calls)
	if next < 0 {
		text := fmt.Sprintf("Done: I ran all %d steps of the instructions.", len(steps))
		if len(failed) > 0 {
			var fs []string
			for _, f := range failed {
				fs = append(fs, fmt.Sprintf("`%s` (%s)", f.Command, f.Result))
			}
			text += " These failed: " + strings.Join(fs, "; ") + "."
		}
		return Decision{Action: Say, Text: text, Failed: failed}
	}

	if q := unasked(t.Items); q != "" {
		if t.AskTool != "" && !traits.AsksInText && strings.Contains(instructions, t.AskTool) {
			return Decision{Action: Ask, Question: q, Options: options(q), Failed: failed}
		}
		return Decision{Action: Say, Text: "Before I go on I need an answer to this question: " + q, Failed: failed}
	}

	if side == "" && hasReview(steps) {
		side = strictSide(traits, t.Items[:writingStart(t.Items, anchor, steps)])
	}
	alt := choose(steps[next], side)
	cmd := fill(alt.Command, side)
	return Decision{
		Action: Run, Command: cmd, Description: describe(cmd),
		Step: next + 1, Steps: len(steps), Failed: failed,
	}
}

// shellCalls are the shell calls among items.
func shellCalls(items []Item) []*Call {
	var calls []*Call
	for _, it := range items {
		if it.Call != nil && it.Call.Command != "" {
			calls = append(calls, it.Call)
		}
	}
	return calls
}

// progress walks steps over calls in order: a step is run by the first
// later call that is one of its alternatives. It returns the index of the
// first step not run (-1: all ran) and the side ("approve", "changes") a
// review choice among them took ("" for none).
func progress(steps []Step, calls []*Call) (next int, side string) {
	cursor := 0
	for i, st := range steps {
		found := -1
		for j := cursor; j < len(calls) && found < 0; j++ {
			for _, alt := range st.Alternatives {
				if matches(alt.Command, calls[j].Command) {
					found = j
					if s := reviewSide(alt.Condition); s != "" && isReview(st) {
						side = s
					}
					break
				}
			}
		}
		if found < 0 {
			return i, side
		}
		cursor = found + 1
	}
	return -1, side
}

// placeholder is a `<…>` of a command.
var placeholder = regexp.MustCompile(`<[^<>\n]*>`)

// matches says whether command is template with any text where its
// placeholders are (spaces around ignored): a glob match, byte by byte.
func matches(template, command string) bool {
	parts := placeholder.Split(strings.TrimSpace(template), -1)
	command = strings.TrimSpace(command)
	if len(parts) == 1 {
		return command == parts[0]
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(command) < len(first)+len(last) || !strings.HasPrefix(command, first) || !strings.HasSuffix(command, last) {
		return false
	}
	rest := command[len(first) : len(command)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// Fill returns command with each placeholder replaced by text (see
// PlaceholderText), in double quotes when the placeholder stood outside
// quotes.
func Fill(command string) string { return fill(command, "") }

// fill is Fill for a run whose review takes side ("" for none).
func fill(command, side string) string {
	var b strings.Builder
	last := 0
	for _, loc := range placeholder.FindAllStringIndex(command, -1) {
		b.WriteString(command[last:loc[0]])
		text := placeholderText(command[loc[0]:loc[1]], side)
		if !quoted(command[:loc[0]]) {
			text = `"` + text + `"`
		}
		b.WriteString(text)
		last = loc[1]
	}
	b.WriteString(command[last:])
	return b.String()
}

// quoted says whether the end of prefix, a command's start, is inside
// single or double quotes, as a POSIX shell reads it.
func quoted(prefix string) bool {
	var q byte
	for i := 0; i < len(prefix); i++ {
		switch c := prefix[i]; {
		case q != '\'' && c == '\\': // escapes the next byte, but not in single quotes
			i++
		case q == 0 && (c == '"' || c == '\''):
			q = c
		case q != 0 && c == q:
			q = 0
		}
	}
	return q != 0
}

// fills are the texts of placeholders, by the first entry with a word
// found in the placeholder (lowercase); none holds angle brackets, quotes
// or anything a shell expands inside double quotes. Notes and reviews
// depend on the side the review takes (reviewNotes).
var fills = []struct {
	words []string
	text  string
}{
	{[]string{"plan"}, "Read the issue, write a failing test first, then make it pass"},
	{[]string{"lesson", "learn", "retro", "went", "improve"}, "Small steps kept the review short"},
	{[]string{"title"}, "Do what the issue asks"},
	{[]string{"note", "review"}, ""},
	{[]string{"changed", "did", "done", "tested", "summary", "result"}, "Implemented as planned; the tests pass"},
	{[]string{"commit", "message"}, "Do what the issue asks"},
	{[]string{"change", "fix", "wrong", "missing", "problem"}, "Please add a test for the empty case"},
	{[]string{"approv", "why", "good"}, "Looks good: the tests cover the change"},
	{[]string{"question", "ask"}, "Which way should this go"},
	{[]string{"answer"}, "Yes"},
	{[]string{"what"}, "Implemented as planned; the tests pass"},
}

// reviewNotes are the texts of a notes placeholder by the side the
// review takes: notes that request changes say so in words a later
// review finds (changesRequested).
var reviewNotes = map[string]string{
	"changes": "Changes requested: please add a test for the empty case",
	"approve": "Approved: the tests cover the change",
	"":        "Looks good: the tests cover the change",
}

// PlaceholderText is the text the model writes for placeholder (`<…>`)
// outside a review.
func PlaceholderText(placeholder string) string { return placeholderText(placeholder, "") }

func placeholderText(placeholder, side string) string {
	p := strings.ToLower(placeholder)
	for _, f := range fills {
		for _, w := range f.words {
			if strings.Contains(p, w) {
				if f.text == "" {
					return reviewNotes[side]
				}
				return f.text
			}
		}
	}
	return "Done as asked"
}

// describe is the description of a shell call, as a model writes one.
func describe(command string) string {
	f := strings.Fields(command)
	if len(f) > 3 {
		f = f[:3]
	}
	return "Run " + strings.Join(f, " ")
}

// isReview says whether st is a choice between approving and changes.
func isReview(st Step) bool {
	var approve, changes bool
	for _, a := range st.Alternatives {
		switch reviewSide(a.Condition) {
		case "approve":
			approve = true
		case "changes":
			changes = true
		}
	}
	return approve && changes
}

// reviewSide is "approve" or "changes" for a condition that mentions one
// of them, else "".
func reviewSide(condition string) string {
	c := strings.ToLower(condition)
	switch {
	case strings.Contains(c, "approv"):
		return "approve"
	case strings.Contains(c, "change"):
		return "changes"
	}
	return ""
}

// hasReview says whether a step of steps is a review choice.
func hasReview(steps []Step) bool {
	for _, st := range steps {
		if isReview(st) {
			return true
		}
	}
	return false
}

// strictSide is the side a review takes, judged on evidence: "changes"
// unless evidence shows changes were requested before, or the model is
// lenient.
func strictSide(traits Traits, evidence []Item) string {
	if traits.Lenient || changesRequestedBefore(evidence) {
		return "approve"
	}
	return "changes"
}

// writingStart is the index of the first item after anchor that is a call
// of a step whose command has a placeholder: from there on the model
// writes its own words (e.g. its review notes, which its outcome must
// agree with), so the evidence of a review ends before it. len(items)
// when there is none.
func writingStart(items []Item, anchor int, steps []Step) int {
	for i := anchor + 1; i < len(items); i++ {
		c := items[i].Call
		if c == nil || c.Command == "" {
			continue
		}
		for _, st := range steps {
			for _, a := range st.Alternatives {
				if placeholder.MatchString(a.Command) && matches(a.Command, c.Command) {
					return i
				}
			}
		}
	}
	return len(items)
}

// choose picks the alternative of st the model runs: in a review choice
// the one of side, else the first.
func choose(st Step, side string) Block {
	if isReview(st) {
		for _, a := range st.Alternatives {
			if reviewSide(a.Condition) == side {
				return a
			}
		}
	}
	return st.Alternatives[0]
}

// changesRequested is how a comment or label says changes were requested.
var changesRequested = regexp.MustCompile(`(?i)changes[ _-]requested|requested changes`)

// changesRequestedBefore says whether items show changes were requested:
// the model's own command naming the label, or a tool result saying so.
func changesRequestedBefore(items []Item) bool {
	for _, it := range items {
		if it.Call != nil && strings.Contains(it.Call.Command, "worker-changes-requested") {
			return true
		}
		if it.Result != nil && changesRequested.MatchString(it.Result.Text) {
			return true
		}
	}
	return false
}

// unasked returns the first question of a tool result the model has not
// asked yet in the conversation, or "".
func unasked(items []Item) string {
	for _, it := range items {
		if it.Result == nil {
			continue
		}
		lines := strings.Split(it.Result.Text, "\n")
		for i, line := range lines {
			q, ok := strings.CutPrefix(strings.TrimSpace(line), "Question:")
			q = strings.TrimSpace(q)
			if !ok || q == "" || asked(items, q) || answeredBelow(lines[i+1:]) {
				continue
			}
			return q
		}
	}
	return ""
}

// answeredBelow says whether lines, those after a question in the same
// tool result, hold its answer: a line starting with "Answer:" (a person's
// answer in the comments, which a later phase reads).
func answeredBelow(lines []string) bool {
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "Answer:") {
			return true
		}
	}
	return false
}

// asked says whether the assistant asked q: in a text, or with a question
// tool.
func asked(items []Item, q string) bool {
	for _, it := range items {
		if it.Role != Assistant {
			continue
		}
		if strings.Contains(it.Text, q) || it.Call != nil && it.Call.Question == q {
			return true
		}
	}
	return false
}

// choices is a question's trailing "(a|b|c)".
var choices = regexp.MustCompile(`\(([^()|]+(?:\|[^()|]+)+)\)\s*$`)

// options are the labels of q's trailing "(a|b|c)", else two generic
// ones.
func options(q string) []string {
	m := choices.FindStringSubmatch(q)
	if m == nil {
		return []string{"Yes", "No"}
	}
	var out []string
	for _, o := range strings.Split(m[1], "|") {
		out = append(out, strings.TrimSpace(o))
	}
	return out
}

// exitCode is how a shell tool's text output says how its command ended:
// Codex's exec_command "Process exited with code N" (older "Exit code:
// N"), Gemini CLI's "Exit Code: N", Claude Code's "Exit code N".
var exitCode = regexp.MustCompile(`(?mi)^(?:Process exited with code|Exit code:?)\s*(-?\d+)`)

// FailedOutput says whether a shell tool's text output, in an API that
// has no error flag for it, is an error: a non-zero exit code, or the tool
// failing to run the command (Codex's "exec_command failed: …", codex
// FACTS X15). For the fake APIs whose wire result has no is_error.
func FailedOutput(output string) bool {
	if strings.HasPrefix(output, "exec_command failed") {
		return true
	}
	m := exitCode.FindStringSubmatch(output)
	if m == nil {
		return false
	}
	n, err := strconv.Atoi(m[1])
	return err == nil && n != 0
}

// lastLine is the last non-blank line of a result, where a failing
// command's message usually is, clipped.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}
