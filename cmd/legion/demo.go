//go:build demo

// The demo and the scripted agent are in a legion built with the demo tag
// only (`make demo`: go build -tags demo); nodemo.go is the shipped
// legion's side. See the package doc.

package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/legion-dev/legion/contrib/demo"
)

// demoBuilt says that this legion has the demo (exposed for tests).
const demoBuilt = true

// demoCmds are the commands the demo tag adds: `legion demo` and the
// hidden `legion scripted-agent` its agents (and the tests') run.
func demoCmds(g *globals) []*cobra.Command {
	return []*cobra.Command{newDemoCmd(g), newScriptedAgentCmd(g)}
}

func newDemoCmd(_ *globals) *cobra.Command {
	var o demo.Options
	var noTTY bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a throwaway team's three issues through every phase, then clean up",
		Long: `Run Legion's main job on a throwaway team: a temp git workspace, a local
team with three issues and legion@<team> with a scripted agent standing in
for Claude Code. A live board shows the issues moving through plan,
implement, review, retro and finish; at the end the demo prints the
systemctl --user status of the units involved and removes everything.

It uses your systemd user manager when one is reachable (team demo-<random>,
units in $XDG_RUNTIME_DIR/systemd/user, nothing of yours touched; it refuses
when Legion's units are already loaded), else, as root, a private manager
started for the demo. Exit status 0 only when every issue reached Done.

With --agent claude the agents are the real Claude Code CLI (the version
scripts/install-claude-code installs, or $LEGION_CLAUDE_CODE), driven
through its hooks, against a local fake of the Anthropic API that the demo
serves on loopback with each phase's answers scripted: nothing leaves the
machine and no key is needed. Like any Claude team, it records in
~/.claude.json that the demo's workspace is trusted and onboarding done.

With --web the dashboard (see legion web) is served from the demo's process
on a free loopback port while it runs, and its login URL printed first: the
board shows the issues moving. Add --keep to look at it after the end.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("demo: find the legion binary: %w", err)
			}
			o.Bin = bin
			if o.Agent == demo.AgentClaude {
				if o.ClaudeCode, err = demo.ClaudeCode(); err != nil {
					return err
				}
			}
			o.TTY = !noTTY && term.IsTerminal(int(os.Stdout.Fd()))
			o.Out = cmd.OutOrStdout()
			o.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			return demo.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&noTTY, "no-tty", false, "print plain progress lines instead of a live board")
	cmd.Flags().BoolVar(&o.Web, "web", false, "also serve the dashboard while the demo runs, and print its login URL")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "when done, keep everything up until Ctrl-C, and keep the temp dir")
	cmd.Flags().BoolVar(&o.Sandbox, "sandbox", false, "use a private systemd manager even if yours is reachable (root only)")
	cmd.Flags().StringVar(&o.Agent, "agent", demo.AgentScripted, "the agents: scripted (a stand-in) or claude (the real Claude Code CLI against a local fake API)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", demo.DefaultTimeout, "give up when the issues are not all Done by then (exit 1)")
	return cmd
}
