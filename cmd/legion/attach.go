package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/cli/attachterm"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker/termkeys"
)

func newAttachCmd(g *globals) *cobra.Command {
	var (
		readOnly  bool
		detachKey string
	)
	cmd := &cobra.Command{
		Use:   "attach [--read-only] [--detach-key KEY] SESSION",
		Short: "Join a session's terminal (detach with Ctrl-\\)",
		Long: `Attach joins the terminal of a running session through the helper: you
see its screen and type into it. The detach key (Ctrl-\ unless configured
with worker.detach_key or --detach-key) leaves the session running. It is
recognised as the raw control byte and in the CSI-u and modifyOtherKeys
encodings that agents switch on. When the agent exits and systemd restarts
it, attach waits and joins the new run. On detach and when the session
ends, your terminal is given back clean (off the agent's alternate screen,
default colours, cursor shown, mouse and paste modes off) and the message
starts a new line.`,
		Args: exactArgs(1, "a session name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := attachKey(cmd, g, detachKey)
			if err != nil {
				return err
			}
			return runAttach(cmd.Context(), args[0], readOnly, key)
		},
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "watch only: do not send keystrokes")
	cmd.Flags().StringVar(&detachKey, "detach-key", "", `detach key, e.g. "ctrl-]" (default: worker.detach_key, else ctrl-\)`)
	return cmd
}

// attachKey is the detach key from --detach-key, else legion.toml.
func attachKey(cmd *cobra.Command, g *globals, flag string) (termkeys.Key, error) {
	if cmd.Flags().Changed("detach-key") {
		k, err := termkeys.ParseKey(flag)
		if err != nil {
			return termkeys.Key{}, usageError{fmt.Errorf("--detach-key: %w", err)}
		}
		return k, nil
	}
	cfg, err := config.LoadOrEmpty(g.configPath)
	if err != nil {
		return termkeys.Key{}, err
	}
	return cfg.Worker.DetachKey, nil
}

func runAttach(ctx context.Context, name string, readOnly bool, key termkeys.Key) error {
	if err := checkName(name); err != nil {
		return err
	}
	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return attachterm.Run(ctx, c, attachterm.Options{
		Name: name, ReadOnly: readOnly, DetachKey: key,
		In: os.Stdin, Out: os.Stdout, Status: os.Stderr,
	})
}
