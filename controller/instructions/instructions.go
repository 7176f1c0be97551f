// Package instructions owns what an agent is told: the instructions of
// each worker phase (plan, implement, review, retro, finish) and of the
// controller agent, rendered for one team and issue with the literal ids,
// the branch and worktree, the review source and the exact commands that
// record the work and end the phase. Legion hands the rendered text to
// the agent as its prompt (every kind takes {prompt}, new and resumed), so
// no skill has to be installed and nothing is written into the user's
// repository or agent settings. `legion install --skills` writes the same
// text as Claude Code skills for people who run agents by hand ([Skills]).
//
// The built-in templates live in templates/ (text/template). A team may
// override any of them with a file of the same name in its
// agent.instructions_dir; an override is checked when it is loaded
// ([Set.Check]): one that loses a command its phase must run is refused,
// naming the file and the command.
//
// The text follows one format, which people and the tests' instruction-
// following models read alike: every command to run is alone in a fenced
// sh block, on one line, with literal ids; the agent's own words are
// placeholders in angle brackets inside double quotes; a choice is a group
// of blocks each after a line starting "If ".
//
// This package only renders text; it never starts, writes or talks to
// anything.
package instructions

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/legion-dev/legion/config"
)

//go:embed templates/*.md
var builtin embed.FS

// Modes are the worker phases, in the order an issue goes through them
// (config's list).
var Modes = config.WorkerModes()

// ModeController names the controller agent's instructions.
const ModeController = "controller"

// Data is what a phase's instructions are rendered with.
type Data struct {
	Team     string // the team's name, as legion commands take it
	Issue    string // the issue's identifier ("" for the controller)
	Mode     string // plan, implement, review, retro, finish or controller
	Branch   string // the issue's branch, legion/<issue>
	Worktree string // the issue's worktree, absolute
	Base     string // the default branch the issue's branch is made from and merged into
	Review   string // the review source: "local" or "github"
	// AskTool is true for an agent that asks a person with Claude Code's
	// AskUserQuestion tool; the others ask in text and end their turn.
	AskTool bool
	// Legion is how the agent runs Legion: "legion" when that name finds
	// the binary in the agent's PATH, else the binary's absolute path.
	Legion string
}

// Role is what the agent is called in its phase.
func (d Data) Role() string {
	switch d.Mode {
	case "plan":
		return "planner"
	case "implement":
		return "implementer"
	case "review":
		return "reviewer"
	case "retro":
		return "implementer, now in its retro"
	case "finish":
		return "finisher"
	}
	return d.Mode
}

// Required are the commands that mode's instructions must hold, each
// alone on its line, for d: without them the phase cannot record its
// work or end.
func Required(d Data) []string {
	l, t, i := d.Legion, d.Team, d.Issue
	switch d.Mode {
	case "plan", "implement", "retro":
		return []string{l + " issue label " + t + " " + i + " worker-done"}
	case "review":
		return []string{
			l + " issue label " + t + " " + i + " worker-approved",
			l + " issue label " + t + " " + i + " worker-changes-requested",
			l + " issue label " + t + " " + i + " worker-done",
		}
	case "finish":
		return []string{l + " worktree finish " + t + " " + i}
	case ModeController:
		return []string{l + " state " + t + " --json"}
	}
	return nil
}

// Set is the templates of one team: the built-in ones, each replaced by
// the team's own file where its directory has one.
type Set struct {
	dir  string             // the team's agent.instructions_dir; "" for none
	tmpl *template.Template // worker.md's shared parts and one template per mode
	from map[string]string  // mode -> the file its template came from
}

// ErrMissingCommand is wrapped by the errors of Check and Render when a
// template lost a required command.
var ErrMissingCommand = errors.New("instructions lack a required command")

// Load reads the templates: the built-in ones, and for each mode the
// team's dir/<mode>.md instead where it exists (dir "" for none). A
// directory that does not exist, a file that is not a template, or a file
// whose name is no mode is an error naming it; so is an override that
// loses a required command (see Check).
func Load(dir string) (*Set, error) {
	s := &Set{dir: dir, from: map[string]string{}}
	base, err := builtin.ReadFile("templates/worker.md")
	if err != nil {
		return nil, err
	}
	root, err := template.New("worker.md").Option("missingkey=error").Parse(string(base))
	if err != nil {
		return nil, fmt.Errorf("built-in instructions worker.md: %w", err)
	}
	s.tmpl = root
	overrides := map[string]string{}
	if dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("agent.instructions_dir %s: %w", dir, err)
		}
		for _, e := range entries {
			name := e.Name()
			mode, ok := strings.CutSuffix(name, ".md")
			if !ok || e.IsDir() {
				continue
			}
			if !isMode(mode) {
				return nil, fmt.Errorf("agent.instructions_dir %s: %s names no phase: want %s.md", dir, name, strings.Join(append(Modes[:len(Modes):len(Modes)], ModeController), ".md, "))
			}
			overrides[mode] = filepath.Join(dir, name)
		}
	}
	for _, mode := range append(Modes[:len(Modes):len(Modes)], ModeController) {
		var text []byte
		from := "built-in " + mode + ".md"
		if p, ok := overrides[mode]; ok {
			if text, err = os.ReadFile(p); err != nil {
				return nil, fmt.Errorf("instructions for %s: %w", mode, err)
			}
			from = p
		} else if text, err = fs.ReadFile(builtin, "templates/"+mode+".md"); err != nil {
			return nil, err
		}
		if _, err := s.tmpl.New(mode).Parse(string(text)); err != nil {
			return nil, fmt.Errorf("instructions %s: %w", from, err)
		}
		s.from[mode] = from
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

func isMode(m string) bool {
	if m == ModeController {
		return true
	}
	for _, x := range Modes {
		if x == m {
			return true
		}
	}
	return false
}

// Check renders every template with sample data, under both review
// sources and both ways of asking, and fails, naming the file and the
// command, where a required command is missing.
func (s *Set) Check() error {
	var errs []error
	for _, mode := range append(Modes[:len(Modes):len(Modes)], ModeController) {
		for _, review := range []string{"local", "github"} {
			for _, ask := range []bool{true, false} {
				d := Data{Team: "T", Issue: "ISSUE-1", Mode: mode, Branch: "legion/ISSUE-1",
					Worktree: "/w/ISSUE-1", Base: "main", Review: review, AskTool: ask, Legion: "legion"}
				if _, err := s.Render(d); err != nil {
					errs = append(errs, err)
					goto next
				}
			}
		}
	next:
	}
	return errors.Join(errs...)
}

// Render is the instructions of d.Mode rendered with d. It fails when the
// text lacks one of [Required]'s commands alone on a line, naming the
// template's file.
func (s *Set) Render(d Data) (string, error) {
	if !isMode(d.Mode) {
		return "", fmt.Errorf("instructions: mode %q: want %s or %s", d.Mode, strings.Join(Modes, ", "), ModeController)
	}
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, d.Mode, d); err != nil {
		return "", fmt.Errorf("instructions %s: %w", s.from[d.Mode], err)
	}
	text := strings.TrimSpace(b.String()) + "\n"
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, cmd := range Required(d) {
		if !lines[cmd] {
			return "", fmt.Errorf("instructions %s: %w: %q must be on a line of its own (in a ```sh block)", s.from[d.Mode], ErrMissingCommand, cmd)
		}
	}
	return text, nil
}

// Source is where mode's template came from: a file of the team's
// agent.instructions_dir, or "built-in <mode>.md".
func (s *Set) Source(mode string) string { return s.from[mode] }
