package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/service"
)

func newDispatchCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "dispatch TEAM ISSUE MODE",
		Short: "Start (or resume) the worker of an issue in a mode",
		Long: `Start the agent of ISSUE in MODE (plan, implement, review, retro or finish)
as a supervised session named ISSUE-MODE: in the issue's worktree, with the
team's agent argv, a new session or, when its session file exists, the
resumed one. The worker is planned here (worktree, session, argv, from
legion.toml) and started by the helper. Nothing happens when that worker is
already live. A worker whose unit failed (its agent could not start, or it hit
its start limit) is refused with the cause until ` + "`systemctl --user reset-failed UNIT`" + `.
Tracker labels and statuses are not changed: ` + "`legion state TEAM --apply`" + `
does the whole step.`,
		Args: usageArgs(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, cfg, err := openTeamConfig(g, args[0])
			if err != nil {
				return err
			}
			c, err := api.Dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := service.Dispatch(cmd.Context(), c, t, cfg.Worker, args[1], controller.Mode(args[2]))
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), res.Name)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (name, id, unit, started)")
	return cmd
}
