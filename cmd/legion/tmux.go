package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation"
	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/tmuxview"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/journal"
)

func newTmuxCmd(g *globals) *cobra.Command {
	var socket string
	var once, foreground bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "tmux TEAM",
		Short: "Keep a tmux session with one window per live agent session of a team",
		Long: `Make the tmux session legion-<short> (the team's short id) with one window
per live agent session of TEAM, named <issue>-<mode>, coloured by role, each
running legion attach on its session. The helper then keeps it in step with
the team's sessions, windows coming and going with them, until the tmux
session is closed. With --foreground the sync runs in this command instead,
until interrupted (--once: sync once and exit). Look at it with
tmux attach -t legion-<short>.`,
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
			if !foreground && !once {
				c, err := api.Dial(cmd.Context())
				if err != nil {
					return err
				}
				defer c.Close()
				if err := c.TmuxView(cmd.Context(), api.TmuxViewArgs{Team: name, Socket: socket, Session: v.Session, Bin: bin}); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "the helper keeps %s in step with team %s; attach with: %s\n", v.Session, name, strings.Join(v.AttachArgv(), " "))
				return err
			}
			o := activation.TmuxOptions{Team: name, View: v, Bin: bin, Interval: interval, Once: once,
				Log: journal.NewLogger(slog.LevelInfo)}
			if !once {
				fmt.Fprintf(cmd.OutOrStdout(), "syncing %s with team %s's sessions until interrupted; attach with: %s\n", v.Session, name, strings.Join(v.AttachArgv(), " "))
			}
			if err := activation.RunTmux(cmd.Context(), o); err != nil {
				return err
			}
			if once {
				fmt.Fprintf(cmd.OutOrStdout(), "synced %s; attach with: %s\n", v.Session, strings.Join(v.AttachArgv(), " "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "tmux server socket name (tmux -L); default: the default server")
	cmd.Flags().BoolVar(&foreground, "foreground", false, "sync in this command until interrupted, instead of in the helper")
	cmd.Flags().BoolVar(&once, "once", false, "sync once in this command and exit")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "time between syncs")
	return cmd
}
