package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// globals are the flags every command sees.
type globals struct {
	configPath string // --config; empty means the XDG default
}

// defaultConfigPath is $XDG_CONFIG_HOME/legion/legion.toml.
func defaultConfigPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "legion", "legion.toml")
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
	root.PersistentFlags().StringVar(&g.configPath, "config", defaultConfigPath(), "path of legion.toml")
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
	)
	return root
}
