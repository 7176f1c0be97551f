package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/journal"
)

func newHelperCmd(g *globals) *cobra.Command {
	var (
		idleExit time.Duration
		socket   string
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "helper",
		Short: "Run the control plane (started on demand by legion.socket)",
		Long: `The helper is Legion's control plane: the one API (JSON lines on
$XDG_RUNTIME_DIR/legion/legion.sock) that the CLI, the controller and
dashboards use. legion.socket starts it on the first connection; it recovers
every running session at each start and may exit when idle. Run by hand (no
socket activation) it listens on the socket itself, for development.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadOrEmpty(g.configPath)
			if err != nil {
				return err
			}
			level := cfg.Helper.LogLevel
			if logLevel != "" {
				if err := level.UnmarshalText([]byte(logLevel)); err != nil {
					return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)}
				}
			}
			// helper.idle_exit is for the socket-activated helper: run by
			// hand nothing would start it again, so only --idle-exit applies.
			idle := cfg.Helper.IdleExit
			if os.Getenv("LISTEN_FDS") == "" {
				idle = 0
			}
			if cmd.Flags().Changed("idle-exit") {
				idle = idleExit
			}
			return runHelper(cmd.Context(), cfg, journal.NewLogger(level), idle, socket)
		},
	}
	cmd.Flags().DurationVar(&idleExit, "idle-exit", 0, "exit after this long with no clients and no work; 0 never (default: helper.idle_exit of legion.toml when socket-activated, else never)")
	cmd.Flags().StringVar(&socket, "socket", "", "socket path when not socket-activated (default $XDG_RUNTIME_DIR/legion/legion.sock)")
	cmd.Flags().StringVar(&logLevel, "log-level", "", "lowest level logged: debug, info, warn, error (default: helper.log_level)")
	return cmd
}

func runHelper(ctx context.Context, cfg *config.Config, log *slog.Logger, idle time.Duration, socket string) error {
	opts := activation.Options{
		Logger: log, SocketPath: socket, IdleExit: idle,
		Teams:    map[string]activation.Team{},
		Defaults: activation.TeamFromConfig(cfg.Defaults, cfg.Worker),
	}
	for _, t := range cfg.Teams {
		opts.Teams[t.Name] = activation.TeamFromConfig(t, cfg.Worker)
	}
	h, err := activation.New(opts)
	if err != nil {
		return err
	}
	return h.Run(ctx)
}
