// Package opencode is the agent kind of the opencode CLI (agent.kind =
// "opencode"). Prepare writes an opencode home per conversation: an
// opencode.json passed as OPENCODE_CONFIG (merged by opencode over the
// user's own), with the team's permission rules and Legion's plugin, which
// relays opencode's events to `legion hook` as Claude Code's hook
// payloads, answers permission requests through opencode's own API,
// records opencode's session id in the session file and appends each
// message's usage to [UsageFile]; and a session database of its own
// (OPENCODE_DB), whose last session a restart continues. The worker runs it
// as kind claude. `legion doctor` checks its key ([Kind.Check]).
//
// What Legion relies on of opencode was probed and is written down, with
// how, in FACTS.md beside this package (cited as O<n>).
package opencode
