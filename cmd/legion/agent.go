//go:build demo

package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/legion-dev/legion/ptyworker/scripted"
	"github.com/spf13/cobra"
)

// newScriptedAgentCmd is the hidden stand-in for Claude Code used by tests
// and the demo. Its flags are Claude Code's, parsed by package scripted, so
// cobra's flag parsing is off.
func newScriptedAgentCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:                "scripted-agent [--session-id ID | --resume ID] [--settings FILE] [PROMPT]",
		Short:              "A scripted stand-in for Claude Code (tests and demo)",
		Long:               scripted.Usage,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := scripted.Main(cmd.Context(), args, os.Stdin, os.Stdout)
			if errors.Is(err, scripted.ErrHelp) {
				return nil
			}
			// The script or a signal decides the exit code (0 for
			// SIGINT, as Claude Code's), as a real agent's would.
			var exit *scripted.ExitError
			if errors.As(err, &exit) {
				if exit.Message != "" {
					fmt.Fprintln(os.Stderr, exit.Message)
				}
				os.Exit(exit.Code)
			}
			return err
		},
	}
}
