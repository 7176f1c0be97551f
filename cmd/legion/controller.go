package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/service"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/units"
)

func newControllerCmd(g *globals) *cobra.Command {
	var interval string
	cmd := &cobra.Command{
		Use:   "controller TEAM",
		Short: "Run a team's controller (what legion@TEAM.service runs)",
		Long: `Run the team's controller in the foreground: collect the team's state, decide
per issue which agent phase runs next, and dispatch workers through the helper,
on an interval and whenever one of the team's units changes state. It tells
systemd READY=1 after its first tick and feeds its watchdog after every tick.

TEAM may be given escaped, as systemd passes %i: legion@.service runs
"legion controller %i". On SIGTERM from "systemctl --user stop legion@TEAM" it
stops the team's workers first; a crash, a watchdog restart or a restart job
leaves them running.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(g.configPath)
			if err != nil {
				return err
			}
			name := args[0]
			t, ok := cfg.Team(name)
			if !ok {
				if un, err := units.Unescape(name); err == nil {
					t, ok = cfg.Team(un)
				}
			}
			if !ok {
				return fmt.Errorf("team %q is not in %s (see `legion team list`)", name, cfg.Path)
			}
			if t.Controller != config.ControllerAuto {
				return fmt.Errorf("team %s: controller kind %q is not built yet; set controller = \"auto\" in %s", t.Name, t.Controller, cfg.Path)
			}
			d, err := config.ParseDuration(interval)
			if err != nil {
				return usageError{fmt.Errorf("--interval: %w", err)}
			}
			state, err := config.StateDir()
			if err != nil {
				return err
			}
			tm, err := team.Open(t, cfg.Path, state)
			if err != nil {
				return err
			}
			log := activation.NewLogger(cfg.Helper.LogLevel).With("team", t.Name)
			return service.Run(cmd.Context(), service.Options{Team: tm, ConfigPath: cfg.Path, Interval: d, Log: log})
		},
	}
	cmd.Flags().StringVar(&interval, "interval", service.DefaultInterval.String(), "time between ticks when no unit event comes sooner")
	return cmd
}
