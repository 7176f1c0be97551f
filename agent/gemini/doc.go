// Package gemini is the agent kind of Google's Gemini CLI (agent.kind =
// "gemini"). Prepare writes a Gemini home per conversation
// (GEMINI_CLI_HOME: the user's settings.json with Legion's hooks, the
// worktree's trust, a policy file allowing Legion's commands); the session
// id is Legion's own (--session-id, --resume); logs.json, written at every
// prompt, is the session file. The worker runs it as kind claude: `legion
// hook` renames its events to Claude Code's as [HookDialect] says, and the
// worker types a person's approval into its dialog. Its agents' usage is
// in the home's chat files ([ParseUsage]); `legion doctor` checks its
// program, node and key ([Kind.Check]).
//
// What Legion relies on of the Gemini CLI was probed and is written down,
// with how, in FACTS.md beside this package (cited as G<n>). The fake
// Gemini API the tests run the real CLI against is agent/gemini/geminitest.
package gemini
