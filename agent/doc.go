// Package agent is the seam between Legion and the program a worker runs:
// the contract every kind of agent implements ([Kind]), the session the
// controller is about to start ([Session]) and what its worker gets
// ([Launch]). A kind says, for its agent:
//
//   - the session's identity and the argv of a new and of a resumed run
//     ([Kind.SessionID], [Kind.Plan]);
//   - where the agent keeps its session file, which the worker watches for
//     liveness and whose existence picks the resume argv
//     ([Kind.SessionFile]; "" for none);
//   - how its environment is prepared before a worker starts: settings,
//     trust, hooks, environment variables ([Kind.Prepare]);
//   - the kind name the worker is told (api.SpawnArgs.Agent, [Launch].Agent);
//   - optionally, where its agents record what they used ([UsageReader]),
//     and what `legion doctor` checks besides its CLI's version
//     ([Checker]).
//
// Each kind is a package of its own below this one, holding everything
// that kind needs (preparation, usage records, doctor check, its CLI's
// probed facts in FACTS.md, the fakes of its model API for tests):
// agent/claude (Claude Code, the default), agent/codex (OpenAI's Codex
// CLI), agent/gemini (Google's Gemini CLI), agent/opencode (opencode) and
// agent/custom (any terminal program). The registry agent/kinds names
// them, one line each, and picks a team's (kinds.For); each CLI's tested
// release is pinned in agent/cliversion. Adding a kind is a directory, a
// registry line and a pin.
//
// This package holds what kinds share: argv expansion ([Expand],
// [InsertArgs]), the permission rules of Legion's policies ([AllowRules],
// [OwnCommands]), the policy "sandbox" and what it confines
// ([EffectivePolicy], [SandboxFor]), and the usage sums ([Usage]).
//
// The other half of a kind runs with the agent, in its worker (package
// ptyworker), which is handed data, not code: the kind name of
// [Launch].Agent ("claude" for every kind whose hooks speak Claude Code's
// payloads, which the worker reads with agent/claude/claudecode), the
// argv, the environment and the sandbox. The worker delivers a person's
// answer or approval (sessions.respond) and ends an agent whose phase is
// done (sessions.end). Nothing here starts, signals or talks to an agent,
// a worker or the helper.
//
// Prepare runs on the controller's side, as the user, before the worker is
// spawned; it writes only below the session's own directory (for
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
