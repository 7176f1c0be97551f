package ptyworker

// Legion's own commands, decided by the worker: a permission request for
// a shell command that is one of the tracker commands Legion's
// instructions name, for the session's own team and issue, is allowed at
// once, in whatever form the model wrote it (literal ids, $LEGION_TEAM,
// "${LEGION_ISSUE}", `legion` by name or by the binary's path), where the
// agent's own rules see only text and ask a person for a command with a
// variable in it. Anything the worker cannot read for certain without a
// shell (a second command, a substitution, another variable, a
// redirection: shellquote.Split) or that is not exactly such a command
// (another issue or team, another subcommand, a flag it does not know)
// is not decided here: it waits for a person as before.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// ownVars are the variables a command may use for the session's
// identity: their values are the agent's (childEnv).
var ownVars = []string{"LEGION_TEAM", "LEGION_ISSUE", "LEGION_MODE"}

// ownLookup is the value of an identity variable in the agent's
// environment: the spec's identity, then its env, which wins (childEnv).
func ownLookup(s *proto.Spec, name string) (string, bool) {
	if !slices.Contains(ownVars, name) {
		return "", false
	}
	v, ok := "", false
	switch name {
	case "LEGION_TEAM":
		v, ok = s.Team, true
	case "LEGION_ISSUE":
		v, ok = s.Issue, s.Issue != ""
	case "LEGION_MODE":
		v, ok = s.Mode, s.Mode != ""
	}
	for _, kv := range s.Env {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v, ok = val, true
		}
	}
	return v, ok
}

// ownCommand reports whether command, a shell command the agent asks to
// run, is one of Legion's own commands of the groups in s.OwnCommands for
// s's own team and issue, run as `legion` or as s.Legion (by that path, or
// any absolute path of the same file). The words must be exactly:
//
//	legion issue show TEAM ISSUE [--json]
//	legion issue comment TEAM ISSUE TEXT
//	legion issue label|unlabel TEAM ISSUE LABEL
//	legion issue move TEAM ISSUE STATUS
//	legion issue pr TEAM ISSUE TITLE [BODY]
//	legion state TEAM [--json]
//	legion worktree finish TEAM ISSUE
//
// where TEXT, LABEL, STATUS, TITLE and BODY do not start with '-' (a flag such as
// --config would point the command elsewhere).
func ownCommand(s *proto.Spec, command string) bool {
	if len(s.OwnCommands) == 0 {
		return false
	}
	w, ok := shellquote.Split(command, func(name string) (string, bool) { return ownLookup(s, name) })
	if !ok || len(w) < 3 || !isLegion(w[0], s.Legion) {
		return false
	}
	plain := func(word string) bool { return !strings.HasPrefix(word, "-") }
	mine := func(team, issue string) bool { return team == s.Team && s.Issue != "" && issue == s.Issue }
	allowed := func(group string) bool { return slices.Contains(s.OwnCommands, group) }
	switch {
	case w[1] == "issue" && allowed(api.OwnIssue) && len(w) >= 5 && mine(w[3], w[4]):
		rest := w[5:]
		switch w[2] {
		case "show":
			return len(rest) == 0 || len(rest) == 1 && rest[0] == "--json"
		case "comment", "label", "unlabel", "move":
			return len(rest) == 1 && plain(rest[0])
		case "pr":
			return (len(rest) == 1 || len(rest) == 2) && !slices.ContainsFunc(rest, func(w string) bool { return !plain(w) })
		}
	case w[1] == "state" && allowed(api.OwnState):
		return w[2] == s.Team && (len(w) == 3 || len(w) == 4 && w[3] == "--json")
	case w[1] == "worktree" && allowed(api.OwnWorktreeFinish):
		return len(w) == 5 && w[2] == "finish" && mine(w[3], w[4])
	}
	return false
}

// isLegion reports whether program, a command's first word, runs Legion:
// "legion" by name, or an absolute path of the same file as legion.
func isLegion(program, legion string) bool {
	if program == "legion" {
		return true
	}
	if !filepath.IsAbs(program) || legion == "" {
		return false
	}
	if filepath.Clean(program) == legion {
		return true
	}
	a, err := os.Stat(program)
	if err != nil {
		return false
	}
	b, err := os.Stat(legion)
	return err == nil && os.SameFile(a, b)
}

// bashCommand is the command of a shell tool's input ({"command": "…"}),
// "" for another tool or an input without one.
func bashCommand(tool string, input json.RawMessage) string {
	if tool != "Bash" || len(input) == 0 {
		return ""
	}
	var in struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	return in.Command
}
