// Package claude is the agent kind of Claude Code (agent.kind = "claude",
// the default). Prepare writes the session's own settings file (hooks for
// every event running `legion hook`, the permission rules of the team's
// policy) and passes it with --settings; it records in ~/.claude.json the
// answers to the dialogs a new worktree would stop at
// ([WriteDialogAnswers]); and it turns off the CLI's non-essential network
// traffic. Its agents' usage is in their session files ([ParseUsage]).
//
// What Legion relies on of Claude Code was probed and is written down, with
// how, in FACTS.md beside this package; its session files' format is
// package agent/claude/claudecode, which the worker, the helper and the
// dashboard read without linking this package. The fake Anthropic API the
// tests run the real CLI against is agent/claude/anthropictest.
package claude
