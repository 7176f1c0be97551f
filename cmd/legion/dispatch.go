package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/service"
	"github.com/legion-dev/legion/internal/envlist"
	"github.com/legion-dev/legion/units"
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
legion.toml, with the user manager's environment, which the agent inherits,
not this shell's) and started by the helper. Nothing happens when that worker is
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
			// The agent inherits the user manager's environment, not this
			// shell's: plan with it (Claude Code's API key decides its
			// first-start dialog, PATH where legion is found).
			lookup, err := managerLookupEnv(cmd.Context())
			if err != nil {
				return err
			}
			t.LookupEnv = lookup
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

// managerLookupEnv looks keys up in the user manager's environment
// (systemctl --user show-environment), which workers inherit.
func managerLookupEnv(ctx context.Context) (func(string) (string, bool), error) {
	m, err := units.Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	env, err := m.Environment(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the user manager's environment, which the agent inherits: %w", err)
	}
	return func(k string) (string, bool) { return envlist.Lookup(env, k) }, nil
}
