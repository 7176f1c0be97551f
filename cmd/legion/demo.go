package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/legion-dev/legion/contrib/demo"
)

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
started for the demo. Exit status 0 only when every issue reached Done.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("demo: find the legion binary: %w", err)
			}
			o.Bin = bin
			o.TTY = !noTTY && term.IsTerminal(int(os.Stdout.Fd()))
			o.Out = cmd.OutOrStdout()
			o.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			return demo.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&noTTY, "no-tty", false, "print plain progress lines instead of a live board")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "when done, keep everything up until Ctrl-C, and keep the temp dir")
	cmd.Flags().BoolVar(&o.Sandbox, "sandbox", false, "use a private systemd manager even if yours is reachable (root only)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", demo.DefaultTimeout, "give up when the issues are not all Done by then (exit 1)")
	return cmd
}
