// Package codex is the agent kind of OpenAI's Codex CLI (agent.kind =
// "codex"). Prepare writes a Codex home per conversation (the user's
// config.toml with Legion's hooks and the repository's trust), whose
// history.jsonl is the session file; the worker runs it as kind claude,
// since Codex's hooks have Claude Code's names and payloads. Its agents'
// usage is in the home's rollout files ([ParseUsage]); `legion doctor`
// checks its credentials ([Kind.Check]).
//
// What Legion relies on of Codex was probed and is written down, with how,
// in FACTS.md beside this package (cited as X<n>). The fake OpenAI
// Responses API the tests run the real CLI against (for opencode too) is
// agent/codex/openaitest.
package codex
