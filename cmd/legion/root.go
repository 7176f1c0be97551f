package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/config"
)

// globals are the flags every command sees.
type globals struct {
	configPath string // --config; empty means the XDG default
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "legion",
		Short: "Run a team's backlog through AI coding agents, supervised by systemd",
		Long: `Legion runs a team's backlog through AI coding agents and lets systemd do
the supervising: every agent session is its own transient systemd user unit,
restarted by systemd when its session file goes stale or it crashes.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "path of legion.toml (default $LEGION_CONFIG, else $XDG_CONFIG_HOME/legion/legion.toml)")
	// The default is resolved when a command runs, not when help is
	// rendered, so help and man pages show no one's home directory.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if g.configPath != "" || cmd.HasSubCommands() { // a group only prints its help
			return nil
		}
		p, err := config.DefaultPath()
		if err != nil {
			return fmt.Errorf("locate legion.toml: %w (pass --config)", err)
		}
		g.configPath = p
		return nil
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newVersionCmd(),
		newInstallCmd(g),
		newUninstallCmd(g),
		newTeamCmd(g),
		newPtyWorkerCmd(g),
		newAttachCmd(g),
		newSpawnCmd(g),
		newHelperCmd(g),
		newSessionsCmd(g),
		newLogsCmd(g),
		newSendCmd(g),
		newDoctorCmd(g),
		newDocsCmd(g),
		newIssueCmd(g),
		newWorktreeCmd(g),
		newHookCmd(g),
		newStateCmd(g),
		newDispatchCmd(g),
		newInstructionsCmd(g),
		newControllerCmd(g),
		newTmuxCmd(g),
		newWebCmd(g),
		newNotifyCmd(g),
		newLimitsCmd(g),
		newAgentCmd(g),
	)
	// `legion demo` and `legion scripted-agent` with the demo tag; a
	// hidden `legion demo` that says how to get it without (nodemo.go).
	root.AddCommand(demoCmds(g)...)
	root.InitDefaultCompletionCmd() // as Execute does, so that the walk sees it
	strictArgs(root)
	return root
}

// strictArgs makes every mistake in a command line a usage error (exit
// status 2) in c's tree. cobra prints a group's help and succeeds when an
// unknown subcommand follows it ("legion issue bogus"), fails an unknown
// top-level command with a plain error, and leaves a command's own
// argument check to return plain errors.
func strictArgs(c *cobra.Command) {
	switch {
	case c.HasSubCommands() && !c.Runnable():
		// Runnable, so cobra checks its arguments: none but a subcommand.
		c.Args = unknownCommand
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	case c.Args != nil:
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var ue usageError
			switch {
			case err == nil || errors.As(err, &ue):
				return err
			case strings.Contains(err.Error(), `"`+cmd.CommandPath()+`"`): // cobra.NoArgs names it
				return usageError{err}
			}
			return usageError{fmt.Errorf("%s: %w", cmd.CommandPath(), err)}
		}
	}
	for _, sub := range c.Commands() {
		strictArgs(sub)
	}
}

// unknownCommand is the argument check of a command group: an argument
// there is a subcommand that does not exist.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return usageError{fmt.Errorf("%s; see %s --help", msg, cmd.CommandPath())}
}
