package followmodel

import (
	"slices"
	"strings"
)

// Step is one step of instructions: the block to run, or a choice of
// alternatives of which exactly one is run.
type Step struct {
	// Alternatives are the blocks of the step: one for a plain step, one
	// per `If …` line for a choice.
	Alternatives []Block
}

// Block is one fenced ```sh block.
type Block struct {
	// Condition is the `If …` line just before the block ("" for a plain
	// step), list markers and emphasis trimmed.
	Condition string
	// Command is the block's text, trimmed: one command line by the
	// contract, its placeholders (`<…>`) not filled.
	Command string
}

// Steps returns the steps of the ```sh blocks in text, in order. A block
// whose preceding line starts with `If ` is an alternative; it joins the
// choice of the block before it when that block was an alternative too
// and nothing but `If ` lines stands between them. Blocks with another
// info string, an empty one, and a block that is never closed, are not
// steps.
//
// A numbered item that asks for work and names no command ("2. Work test
// first: …", the implementer's) is a step too, done with a file, as a
// model does work: WorkCommand, which adds a line to NOTES.md in the
// working directory. Text without a ```sh block has no steps, work
// items or not.
func Steps(text string) []Step {
	var steps []Step
	lines := strings.Split(text, "\n")
	var between []string // non-blank lines since the last block
	prevAlt := false
	work := false // in a work item that has had no block yet
	flushWork := func() {
		if work {
			steps = append(steps, Step{Alternatives: []Block{{Command: WorkCommand}}})
			work, prevAlt = false, false
		}
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		indent, fence, info, ok := openFence(line)
		if !ok {
			if item, isItem := numbered(line); isItem {
				flushWork()
				work = strings.HasPrefix(item, "Work ")
			}
			if strings.TrimSpace(line) != "" {
				between = append(between, strings.TrimSpace(line))
			}
			continue
		}
		work = false
		// Find the closing fence: at least as long, no info string.
		end := -1
		for j := i + 1; j < len(lines); j++ {
			t := strings.TrimSpace(lines[j])
			if strings.HasPrefix(t, fence) && strings.Trim(t, string(fence[0])) == "" {
				end = j
				break
			}
		}
		if end < 0 {
			break // unclosed: the rest is its body, no step
		}
		body := make([]string, 0, end-i-1)
		for _, l := range lines[i+1 : end] {
			body = append(body, trimIndent(l, indent))
		}
		i = end
		command := strings.TrimSpace(strings.Join(body, "\n"))
		if info != "sh" || command == "" {
			between = append(between, "```") // another block separates choices
			prevAlt = false
			continue
		}
		cond := ""
		if n := len(between); n > 0 {
			if c, ok := condition(between[n-1]); ok {
				cond = c
			}
		}
		b := Block{Condition: cond, Command: command}
		joins := cond != "" && prevAlt && len(steps) > 0 && onlyConditions(between)
		if joins {
			last := &steps[len(steps)-1]
			last.Alternatives = append(last.Alternatives, b)
		} else {
			steps = append(steps, Step{Alternatives: []Block{b}})
		}
		prevAlt = cond != ""
		between = between[:0]
	}
	flushWork()
	if !slices.ContainsFunc(steps, func(st Step) bool { return st.Alternatives[0].Command != WorkCommand }) {
		return nil // no command: not instructions
	}
	return steps
}

// WorkCommand is the command of a work step (see Steps): a line added to
// NOTES.md, so that the commit after it has a change to commit.
const WorkCommand = `printf '%s\n' "<what you did>" >> NOTES.md`

// numbered returns the text of line when it is a numbered list item
// ("2. Work test first: …").
func numbered(line string) (string, bool) {
	t := strings.TrimSpace(line)
	i := strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' })
	if i <= 0 || i+1 >= len(t) || t[i] != '.' || t[i+1] != ' ' {
		return "", false
	}
	return strings.TrimSpace(t[i+2:]), true
}

// openFence says whether line opens a fenced code block (three or more
// backticks or tildes after any indent, as in a list item) and returns
// its indent, fence and info string (first word, lowercase).
func openFence(line string) (indent int, fence, info string, ok bool) {
	t := strings.TrimLeft(line, " ")
	indent = len(line) - len(t)
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return 0, "", "", false
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 {
		return 0, "", "", false
	}
	rest := strings.TrimSpace(t[n:])
	if t[0] == '`' && strings.Contains(rest, "`") {
		return 0, "", "", false // inline code, not a fence
	}
	if f := strings.Fields(rest); len(f) > 0 {
		info = strings.ToLower(f[0])
	}
	return indent, t[:n], info, true
}

// trimIndent removes up to n leading spaces of a block's line (the
// indent of its fence, as in a list item).
func trimIndent(l string, n int) string {
	for i := 0; i < n && strings.HasPrefix(l, " "); i++ {
		l = l[1:]
	}
	return l
}

// condition returns line as an alternative's condition when it starts
// with `If ` (after a list marker and emphasis).
func condition(line string) (string, bool) {
	t := strings.TrimSpace(line)
	for _, m := range []string{"- ", "* ", "+ "} {
		t = strings.TrimPrefix(t, m)
	}
	if i := strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' }); i > 0 && i+1 < len(t) && (t[i] == '.' || t[i] == ')') && t[i+1] == ' ' {
		t = t[i+2:]
	}
	t = strings.Trim(t, "*_ ")
	if !strings.HasPrefix(t, "If ") {
		return "", false
	}
	return t, true
}

// onlyConditions says whether every line is an alternative's condition.
func onlyConditions(lines []string) bool {
	for _, l := range lines {
		if _, ok := condition(l); !ok {
			return false
		}
	}
	return true
}
