// Package cliversion owns the versions of the agent CLIs Legion was
// tested with: for each kind with a CLI of its own (Claude Code, Codex,
// Gemini CLI, opencode) the release its facts were probed at and its tests
// run, the one place that pin lives (scripts/install-claude-code and
// scripts/install-agent-clis install the same releases, which this
// package's tests check by reading the scripts). It also reads the version
// a CLI prints for --version, and orders versions.
//
// It imports nothing of Legion's, so the agent kinds, `legion doctor`, the
// worker's kind halves and the test harnesses all take their pin from it.
// It never runs a program: its callers do, and hand it what was printed.
package cliversion

import (
	"fmt"
	"strconv"
	"strings"
)

// CLI is what Legion knows of one agent kind's command-line program.
type CLI struct {
	// Kind is the kind as legion.toml's agent.kind spells it.
	Kind string
	// Name is the CLI as people call it, e.g. "Claude Code".
	Name string
	// Program is the program the kind's default agent.new runs, e.g. "claude".
	Program string
	// Package is the npm package that ships it.
	Package string
	// Tested is the release Legion was tested with.
	Tested string
	// Script installs Tested into Legion's cache for the tests, relative
	// to the repository's root.
	Script string
	// TestEnv names the variable that points the tests at another build
	// of the CLI than the installed Tested one.
	TestEnv string
	// New and Resume are the default agent.new and agent.resume of a team
	// of this kind (legion.toml's placeholders, e.g. {prompt}); nil for
	// Claude Code, whose are legion.toml's own defaults.
	New, Resume []string

	// prefix and suffix surround the version in what --version prints,
	// e.g. "codex-cli " and " (Claude Code)".
	prefix, suffix string
}

// The releases Legion was tested with, one per CLI below (constants, for
// the packages that need one).
const (
	ClaudeTested   = "2.1.330"
	CodexTested    = "0.169.0"
	GeminiTested   = "0.61.0"
	OpencodeTested = "1.18.33"
)

// The CLIs. Their --version outputs, as each tested release prints them,
// are in testdata/ (see the kinds' FACTS.md for how they were probed).
var (
	Claude = CLI{
		Kind: "claude", Name: "Claude Code", Program: "claude", Package: "@anthropic-ai/claude-code",
		Tested: ClaudeTested, Script: "scripts/install-claude-code", TestEnv: "LEGION_CLAUDE_CODE",
		suffix: " (Claude Code)",
	}
	Codex = CLI{
		Kind: "codex", Name: "Codex", Program: "codex", Package: "@openai/codex",
		Tested: CodexTested, Script: "scripts/install-agent-clis", TestEnv: "LEGION_CODEX",
		// Codex picks its own session ids; each conversation has a Codex
		// home of its own, whose last session is the one to resume.
		New: []string{"codex", "{prompt}"}, Resume: []string{"codex", "resume", "--last", "{prompt}"},
		prefix: "codex-cli ",
	}
	Gemini = CLI{
		Kind: "gemini", Name: "Gemini CLI", Program: "gemini", Package: "@google/gemini-cli",
		Tested: GeminiTested, Script: "scripts/install-agent-clis", TestEnv: "LEGION_GEMINI",
		New:    []string{"gemini", "--session-id", "{session_id}", "{prompt}"},
		Resume: []string{"gemini", "--resume", "{session_id}", "{prompt}"},
	}
	Opencode = CLI{
		Kind: "opencode", Name: "opencode", Program: "opencode", Package: "opencode-ai",
		Tested: OpencodeTested, Script: "scripts/install-agent-clis", TestEnv: "LEGION_OPENCODE",
		// opencode picks its own session ids too; each conversation has its
		// own session database, whose last session is the one to continue.
		New: []string{"opencode", "--prompt", "{prompt}"}, Resume: []string{"opencode", "--continue", "--prompt", "{prompt}"},
	}
)

// All is every CLI, in the order the README lists the kinds.
func All() []CLI { return []CLI{Claude, Codex, Gemini, Opencode} }

// For is the CLI of kind (agent.kind's spelling); false for a kind with
// none of its own ("custom").
func For(kind string) (CLI, bool) {
	for _, c := range All() {
		if c.Kind == kind {
			return c, true
		}
	}
	return CLI{}, false
}

// Want is what c's --version prints for version v, e.g. "codex-cli 0.169.0".
func (c CLI) Want(v string) string { return c.prefix + v + c.suffix }

// Parse returns the version in out, what c's program printed on stdout
// for --version: its first line, which must be c.Want(VERSION) (surrounding
// blanks aside) with VERSION a version [Compare] can order. The error
// quotes what was printed and says what was expected.
func (c CLI) Parse(out string) (string, error) {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	line = strings.TrimSpace(line)
	v, ok := strings.CutPrefix(line, c.prefix)
	if ok {
		v, ok = strings.CutSuffix(v, c.suffix)
	}
	if ok {
		_, err := parse(v)
		ok = err == nil
	}
	if !ok {
		return "", fmt.Errorf("%s --version printed %q; want %q as %s prints it", c.Program, clip(line), c.Want("VERSION"), c.Name)
	}
	return v, nil
}

// Compare orders two versions MAJOR.MINOR.PATCH[-PRERELEASE] (numbers
// compared as numbers; a prerelease comes before its release, and two
// prereleases compare as dot-separated identifiers, numeric ones as
// numbers, as semver.org orders them). It returns -1, 0 or +1, or an error
// naming the version that is not one.
func Compare(a, b string) (int, error) {
	va, err := parse(a)
	if err != nil {
		return 0, err
	}
	vb, err := parse(b)
	if err != nil {
		return 0, err
	}
	for i := range va.core {
		if c := cmpInt(va.core[i], vb.core[i]); c != 0 {
			return c, nil
		}
	}
	switch {
	case va.pre == "" && vb.pre == "":
		return 0, nil
	case va.pre == "":
		return 1, nil
	case vb.pre == "":
		return -1, nil
	}
	return comparePre(strings.Split(va.pre, "."), strings.Split(vb.pre, ".")), nil
}

// version is a parsed MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD].
type version struct {
	core [3]int
	pre  string
}

func parse(s string) (version, error) {
	var v version
	rest, _, _ := strings.Cut(s, "+") // build metadata does not order
	rest, v.pre, _ = strings.Cut(rest, "-")
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("version %q: want MAJOR.MINOR.PATCH", clip(s))
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || (len(p) > 1 && p[0] == '0') || strings.ContainsAny(p, "+-") {
			return v, fmt.Errorf("version %q: %q is not a number", clip(s), p)
		}
		v.core[i] = n
	}
	if strings.Contains(s, "-") && (v.pre == "" || strings.Contains(v.pre, "..")) {
		return v, fmt.Errorf("version %q: empty prerelease", clip(s))
	}
	return v, nil
}

func comparePre(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		na, errA := strconv.Atoi(a[i])
		nb, errB := strconv.Atoi(b[i])
		var c int
		switch {
		case errA == nil && errB == nil:
			c = cmpInt(na, nb)
		case errA == nil: // numeric identifiers come first
			c = -1
		case errB == nil:
			c = 1
		default:
			c = strings.Compare(a[i], b[i])
		}
		if c != 0 {
			return c
		}
	}
	return cmpInt(len(a), len(b))
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// clip shortens what a program printed to what an error can quote.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
