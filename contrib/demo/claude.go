package demo

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/shellquote"
)

// Agents of the demo (Options.Agent).
const (
	AgentScripted = "scripted" // the scripted stand-in for Claude Code (the default)
	AgentClaude   = "claude"   // the real Claude Code CLI against a local fake of the Anthropic API
)

// ClaudeCodeVersion is the Claude Code CLI the demo runs, installed by
// scripts/install-claude-code.
const ClaudeCodeVersion = claudecode.CLIVersion

// EnvClaudeCode names the variable that points the demo (and the tests)
// at another claude binary.
const EnvClaudeCode = claudecode.EnvCLI

// ClaudeCode returns the Claude Code CLI `legion demo --agent claude`
// runs: $LEGION_CLAUDE_CODE, else the one scripts/install-claude-code put
// in ${XDG_CACHE_HOME:-~/.cache}/legion/claude-code/VERSION. The error says
// how to install it.
func ClaudeCode() (string, error) {
	path := os.Getenv(EnvClaudeCode)
	if path == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("demo: find the Claude Code CLI: %w", err)
		}
		path = claudecode.InstalledCLI(cache)
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("demo: the Claude Code CLI %s does not run (%v): install it with scripts/install-claude-code, or set %s", path, err, EnvClaudeCode)
	}
	if v, _, _ := strings.Cut(strings.TrimSpace(string(out)), " "); v != ClaudeCodeVersion && os.Getenv(EnvClaudeCode) == "" {
		return "", fmt.Errorf("demo: %s reports %q, want %s: run scripts/install-claude-code", path, bytes.TrimSpace(out), ClaudeCodeVersion)
	}
	return path, nil
}

// fakeAPIKey is what the demo's agents send the fake API: not a secret, so
// it may stand in argv.
const fakeAPIKey = "legion-demo-not-a-secret"

// claudeArgv is the team's agent argv for the real CLI pointed at the fake
// API at url: its environment set by env(1), since the user manager's
// environment is the user's (agent.new and agent.resume get --settings
// before the session flag from package agent).
func claudeArgv(cli, url string) []string {
	return []string{"/usr/bin/env",
		"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_AUTH_TOKEN=" + fakeAPIKey,
		"CLAUDE_CODE_MAX_RETRIES=0", cli}
}

// scriptClaude scripts the fake API for every phase of every issue of the
// team: what an agent following the worker skill does, with the team's own
// commands (which the default allowlist lets run without asking).
func scriptClaude(api *anthropictest.Server, t *team.Team, bin string, issues []string) {
	for _, issue := range issues {
		for _, mode := range []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeRetro, controller.ModeFinish} {
			turns := phaseTurns(bin, t.Name, t.Worktrees.Path(issue), issue, mode)
			match := inPhase(issue, mode)
			for i := range turns {
				turns[i].Match = match
			}
			api.Script(claudecode.SessionID(t.ID, issue, string(team.SessionMode(mode))).String(), turns...)
		}
	}
}

// inPhase matches the requests of issue's phase mode: its conversation
// holds the phase's prompt. The retro resumes the implementer's session,
// so an implement turn never answers a conversation that reached its retro.
func inPhase(issue string, mode controller.Mode) func(*anthropictest.Request) bool {
	want := []byte(fmt.Sprintf("# Legion: %s %s ", mode, issue))
	retro := []byte(fmt.Sprintf("# Legion: %s %s ", controller.ModeRetro, issue))
	return func(r *anthropictest.Request) bool {
		return bytes.Contains(r.Body, want) && (mode != controller.ModeImplement || !bytes.Contains(r.Body, retro))
	}
}

// phaseTurns is one phase's work, as Script's for the scripted agent.
func phaseTurns(bin, teamName, worktree, issue string, mode controller.Mode) []anthropictest.Turn {
	legion := func(args ...string) string {
		return shellquote.Quote(bin) + " " + strings.Join(args, " ")
	}
	label := func(l string) string { return legion("issue", "label", shellquote.Quote(teamName), issue, l) }
	bash := func(cmd string) anthropictest.Turn {
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Bash(cmd, "Run "+strings.Fields(cmd)[0]).WithID("toolu_" + uuid.NewString()[:8])}}
	}
	say := func(text string) anthropictest.Turn {
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(text)}}
	}
	switch mode {
	case controller.ModePlan:
		plan := bash(label(controller.LabelWorkerDone))
		plan.Blocks = append([]anthropictest.Block{anthropictest.Text("Planning " + issue + ": one file, one commit.")}, plan.Blocks...)
		return []anthropictest.Turn{plan, say("The plan is ready.")}
	case controller.ModeImplement:
		write := anthropictest.Write(filepath.Join(worktree, issue+".txt"), "Implemented "+issue+"\n").WithID("toolu_" + uuid.NewString()[:8])
		return []anthropictest.Turn{
			{Blocks: []anthropictest.Block{anthropictest.Text("Implementing " + issue + "."), write}},
			bash("git add " + issue + ".txt"),
			bash(`git commit -q -m "Implement ` + issue + `"`),
			bash(label(controller.LabelWorkerDone)),
			say(issue + " is implemented and committed."),
		}
	case controller.ModeReview:
		return []anthropictest.Turn{bash(label(controller.LabelApproved)), bash(label(controller.LabelWorkerDone)), say("Reviewed: approved.")}
	case controller.ModeRetro:
		return []anthropictest.Turn{bash(label(controller.LabelWorkerDone)), say("Looking back on " + issue + ": it went well.")}
	default: // finish
		return []anthropictest.Turn{bash(legion("worktree", "finish", shellquote.Quote(teamName), issue)), say(issue + " is merged and done.")}
	}
}
