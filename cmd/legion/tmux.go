package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/cli/tmuxview"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/journal"
)

// tmuxEnv are the variables a view's windows get from the `legion tmux`
// that made it (tmux -e), whatever environment the tmux server has: where
// the helper's socket is, and the config.
var tmuxEnv = []string{"XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", config.EnvConfig}

func newTmuxCmd(g *globals) *cobra.Command {
	var socket string
	var follow bool
	cmd := &cobra.Command{
		Use:   "tmux TEAM",
		Short: "Keep a tmux session with one window per live agent session of a team",
		Long: `Make the tmux session legion-<short> (the team's short id) with one window
per live agent session of TEAM, named <issue>-<mode>, coloured by role, each
running legion attach on its session. Its first window, "legion", runs
legion tmux --follow TEAM, which follows the helper's stream of session
events and adds and removes windows as sessions start and end, until the tmux
session is closed. Running legion tmux again restarts that follower.

The tmux session, and the tmux server when none runs yet, are started by this
command, in your own login session: never by the helper, so stopping,
restarting or upgrading Legion leaves your tmux server and all its sessions
alone (the follower resubscribes when the helper is back). Look at it with
tmux attach -t legion-<short>.

With --follow, this command is the follower itself, in the foreground.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			short := config.AdhocTeamID.String()[:8]
			if name != config.AdhocTeam {
				_, t, err := loadTeam(g, name)
				if err != nil {
					return err
				}
				short = t.ShortID()
			}
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("tmux: find the legion binary: %w", err)
			}
			v := tmuxview.View{Socket: socket, Session: "legion-" + short}
			for _, k := range tmuxEnv {
				if val, ok := os.LookupEnv(k); ok {
					v.Env = append(v.Env, k+"="+val)
				}
			}
			if follow {
				return tmuxview.Follow(cmd.Context(), tmuxview.FollowOptions{Team: name, View: v, Bin: bin,
					Log: journal.NewLogger(journal.IdentLegion, slog.LevelInfo)})
			}
			follower := []string{bin}
			if g.configPath != "" {
				follower = append(follower, "--config", g.configPath)
			}
			follower = append(follower, "tmux", "--follow", name)
			if socket != "" {
				follower = append(follower, "--socket", socket)
			}
			if err := v.Start(cmd.Context(), follower); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s follows team %s's sessions; attach with: %s\n", v.Session, name, strings.Join(v.AttachArgv(), " "))
			return err
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "tmux server socket name (tmux -L); default: the default server")
	cmd.Flags().BoolVar(&follow, "follow", false, "be the follower: keep the view in step with the team's sessions until its tmux session is closed")
	return cmd
}
