package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// Set by the linker: -X main.version=... -X main.commit=...
var (
	version = "dev"
	commit  = "unknown"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Legion's version and commit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "legion %s (commit %s)\n", version, commit)
			return err
		},
	}
}
