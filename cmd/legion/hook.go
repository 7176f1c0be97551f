package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/ptyworker"
)

// newHookCmd is `legion hook`, the command Claude Code runs for every
// hook event of a Legion session (the per-session settings file names
// it). Hidden: no person runs it.
func newHookCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "hook",
		Short: "Forward a Claude Code hook event to the session's worker (run by Claude Code)",
		Long: `hook forwards one Claude Code hook event to the Legion worker that hosts the
agent: Claude Code runs it with the event's JSON payload on stdin, as the
per-session settings file that Legion writes tells it to. The worker
authenticates it by LEGION_HOOK_TOKEN and listens on LEGION_HOOK_SOCKET; both
are in the agent's environment, and the token changes at every start of the agent.
Codex and the Gemini CLI run it too; the Gemini CLI's events (BeforeAgent,
AfterAgent, BeforeTool, AfterTool, Notification ToolPermission) are forwarded
under Claude Code's names.

The worker turns the events into the agent's state (legion sessions status).
For a PermissionRequest it may answer with Claude Code's decision, which hook
prints on stdout; that call waits until a person allows or denies (the
helper's sessions.respond, which the controller calls with the answer given
in the tracker), bounded only by the hook's timeout in the settings.

Reads at most 4 MiB from stdin. Arguments are ignored. Outside a Legion
session (no LEGION_HOOK_SOCKET) it does nothing. Exit status: always 0, so
that a failed hook never stops the agent; errors go to stderr.`,
		Hidden: true,
		// Nothing on the command line may make it fail: no flags, any
		// arguments, and no config file to locate.
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		PersistentPreRunE:  func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			if slices.Contains(args, "--help") || slices.Contains(args, "-h") {
				return cmd.Help()
			}
			if err := ptyworker.RelayHook(cmd.Context(), os.Stdin, os.Stdout, os.Getenv, kinds.HookDialect); err != nil {
				fmt.Fprintln(os.Stderr, "legion", err)
			}
			return nil
		},
	}
}
