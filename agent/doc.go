// Package agent is the seam between Legion and the program a worker runs:
// one [Kind] per kind of agent, chosen per team by agent.kind in
// legion.toml ([For]). A kind says, for its agent:
//
//   - the session's identity and the argv of a new and of a resumed run
//     ([Kind.SessionID], [Kind.Plan]);
//   - where the agent keeps its session file, which the worker watches for
//     liveness and whose existence picks the resume argv
//     ([Kind.SessionFile]; "" for none);
//   - how its environment is prepared before a worker starts: settings,
//     trust, hooks, environment variables ([Kind.Prepare]);
//   - the kind name the worker is told (api.SpawnArgs.Agent, [Launch].Agent).
//
// The other half of a kind runs with the agent, in its worker (package
// ptyworker), which picks it by that name: the agent's state (for Claude
// Code, from the hooks the settings file installs, relayed by `legion hook`),
// the delivery of a person's answer or approval (sessions.respond), and the
// clean end of an agent whose phase is done (sessions.end). This package
// never starts, signals or talks to an agent, a worker or the helper.
//
// Four kinds exist:
//
//   - [Claude] (agent.kind = "claude", the default): Claude Code. Prepare
//     writes the session's own settings file (hooks for every event running
//     `legion hook`, the permission rules of the team's policy) and passes
//     it with --settings; it records in ~/.claude.json the answers to the
//     dialogs a new worktree would stop at ([WriteDialogAnswers]); and it
//     turns off the CLI's non-essential network traffic.
//   - [Codex] (agent.kind = "codex"): OpenAI's Codex CLI. Prepare writes
//     a Codex home per conversation (the user's config.toml with Legion's
//     hooks and the repository's trust), whose history.jsonl is the session
//     file; the worker runs it as kind claude, since Codex's hooks have
//     Claude Code's names and payloads (agent/codex/FACTS.md).
//   - [Gemini] (agent.kind = "gemini"): Google's Gemini CLI. Prepare writes
//     a Gemini home per conversation (GEMINI_CLI_HOME: the user's
//     settings.json with Legion's hooks, the worktree's trust, a policy
//     file allowing Legion's commands); the session id is Legion's own
//     (--session-id, --resume); logs.json, written at every prompt, is the
//     session file; the worker runs it as kind claude, `legion hook`
//     renaming its events to Claude Code's, and types a person's approval
//     into its dialog (agent/gemini/FACTS.md).
//   - [Opencode] (agent.kind = "opencode"): the opencode CLI. Prepare
//     writes an opencode home per conversation: an opencode.json passed as
//     OPENCODE_CONFIG (merged by opencode over the user's own), with the
//     team's permission rules and Legion's plugin, which relays opencode's
//     events to `legion hook` as Claude Code's hook payloads, answers
//     permission requests through opencode's own API and records
//     opencode's session id in the session file; and a session database
//     of its own (OPENCODE_DB), whose last session a restart continues.
//     The worker runs it as kind claude (agent/opencode/FACTS.md).
//   - [Custom] (agent.kind = "custom"): any terminal program, run as the
//     team's agent.new says. No settings, no session file (so no resume),
//     liveness from its output, no state and no completion detection: the
//     program must exit by itself when its phase is done.
//
// Prepare runs on the controller's side, as the user, before the worker is
// spawned; it writes only below the session's own directory (for Codex
// Codex, Gemini and opencode, the conversation's home beside it; for opencode
// it also removes opencode's own lock left by a run that is gone) and, for
// Claude, the few entries of ~/.claude.json that Claude Code reads from
// nowhere else (under Legion's lock file ~/.claude.json.legion-lock and
// Claude Code's own lock directory ~/.claude.json.lock, which it removes
// again). It never logs or stores an API key: only the last 20 characters
// of ANTHROPIC_API_KEY go in ~/.claude.json, where Claude Code itself
// keeps them; GEMINI_API_KEY and a Codex provider's key stay in the
// environment the agent inherits.
package agent
