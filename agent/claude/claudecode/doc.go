// Package claudecode knows Claude Code's session files: the deterministic session
// IDs Legion gives them, where Claude Code keeps them
// (~/.claude/projects/<encoded cwd>/<session>.jsonl), how fresh they are
// (liveness, subagent files included), and whether the agent is waiting on a
// human (a pending AskUserQuestion).
//
// The format has no official schema; FACTS.md says what was observed.
// Everything here reads leniently: unknown entry types, unknown fields,
// mistyped fields, malformed lines and a half-written last line are skipped,
// never reported as errors. The only errors are I/O errors, and a missing
// session file is one that callers can test with errors.Is(err,
// fs.ErrNotExist).
//
// The package never writes, creates, locks or deletes session files (the
// agent owns them), and never reads more of a file than a decision needs.
package claudecode
