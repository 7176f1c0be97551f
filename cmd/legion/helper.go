package main

import (
	"errors"
	"fmt"
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
socket activation) it listens on the socket itself, for development.

It supervises sessions only: spawn requests carry everything about a session,
so it reads nothing of legion.toml but [helper]. When legion.toml cannot be
loaded it runs on the built-in [helper] settings and logs why.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The helper reads only [helper] of legion.toml: a file it
			// cannot load must not keep it from serving sessions (it would
			// fail legion.socket for good at the start limit), so it runs
			// on the built-in defaults and says why.
			cfg, cfgErr := config.LoadOrEmpty(g.configPath)
			if cfgErr != nil {
				var err error
				if cfg, err = config.Parse(g.configPath, nil); err != nil {
					return errors.Join(cfgErr, err)
				}
			}
			return runHelperWith(cmd, cfg, cfgErr, idleExit, socket, logLevel)
		},
	}
	cmd.Flags().DurationVar(&idleExit, "idle-exit", 0, "exit after this long with no clients and no work; 0 never (default: helper.idle_exit of legion.toml when socket-activated, else never)")
	cmd.Flags().StringVar(&socket, "socket", "", "socket path when not socket-activated (default $XDG_RUNTIME_DIR/legion/legion.sock)")
	cmd.Flags().StringVar(&logLevel, "log-level", "", "lowest level logged: debug, info, warn, error (default: helper.log_level)")
	return cmd
}

// runHelperWith runs the helper with the [helper] settings of cfg and the
// flags; cfgErr, when set, is why cfg holds only the defaults.
func runHelperWith(cmd *cobra.Command, cfg *config.Config, cfgErr error, idleExit time.Duration, socket, logLevel string) error {
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
	log := journal.NewLogger(journal.IdentLegion, level)
	if cfgErr != nil {
		log.Warn("legion.toml cannot be loaded: running with the built-in [helper] settings; fix the file, then `systemctl --user restart legion.service` to apply its own",
			"config", cfg.Path, "err", cfgErr, "idle_exit", idle, "log_level", level)
	}
	h, err := activation.New(activation.Options{Logger: log, SocketPath: socket, IdleExit: idle})
	if err != nil {
		return err
	}
	return h.Run(cmd.Context())
}
