package main

import (
	"fmt"

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
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.configPath != "" {
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
		newSendCmd(g),
		newDoctorCmd(g),
		newDocsCmd(g),
		newIssueCmd(g),
		newWorktreeCmd(g),
		newScriptedAgentCmd(g),
		newStateCmd(g),
		newDispatchCmd(g),
		newControllerCmd(g),
		newDemoCmd(g),
		newTmuxCmd(g),
	)
	return root
}
