// Package claudetest runs the real Claude Code CLI in tests, offline: it
// finds the pinned binary (Binary), starts a fake Anthropic API for it
// (package anthropictest), makes a throwaway HOME with the few
// ~/.claude.json entries that keep a new worktree free of dialogs, gives
// the CLI the environment it needs, runs it in a real PTY whose screen a
// test can read (Terminal), and reads the session files it writes
// (ReadSession).
//
// The facts it builds on (Claude Code 2.1.330, probed offline) are in
// agent/claude/FACTS.md; the ones a test
// author needs:
//
//   - The CLI calls only HEAD /api/hello and POST /v1/messages; with
//     CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 nothing else. It sends
//     ANTHROPIC_AUTH_TOKEN as a Bearer token (no "custom API key" dialog).
//   - Without ~/.claude.json's hasCompletedOnboarding it runs an online
//     connectivity check and exits 1; without trust for the repository's
//     main checkout it shows a trust dialog whose default is "No, exit".
//     WriteClaudeJSON writes both (New does, unless Options.NoClaudeJSON).
//   - A PermissionRequest hook can answer an AskUserQuestion with no keys
//     (allow, with updatedInput.answers mapping each question to its
//     answer); see TestRealCLIQuestionAnsweredByHook.
//   - By keys, a question is answered in a human's own words with the
//     digit of "Type something.", the text, Enter (AnswerFreeText). The
//     dialog opens a moment after the PermissionRequest hook (keys sent
//     before go to the prompt), and the CLI drops input that arrives just
//     after its screen changed: every step is confirmed on the screen and
//     typed again if it shows no effect (TypeUntil).
//
// It must only be used by tests: it never touches the user's own HOME,
// ~/.claude or settings, and every process, server and directory it
// starts or makes ends with the test.
package claudetest
