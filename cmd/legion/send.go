package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation/api"
)

func newSendCmd(_ *globals) *cobra.Command {
	var noEnter bool
	cmd := &cobra.Command{
		Use:   "send NAME TEXT",
		Short: "Type TEXT into a session, then Enter",
		Long: `Send types TEXT into the session's terminal exactly as given (no shell
quoting, no escapes interpreted), then presses Enter (a carriage return)
unless --no-enter is given. Quote TEXT as one argument.`,
		Args: exactArgs(2, "a session name and one TEXT argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSend(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], noEnter)
		},
	}
	cmd.Flags().BoolVar(&noEnter, "no-enter", false, "do not press Enter after the text")
	return cmd
}

func runSend(ctx context.Context, _ io.Writer, name, text string, noEnter bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Send(ctx, name, text, noEnter); err != nil {
		return fmt.Errorf("send to session %s: %w", name, err)
	}
	return nil
}
