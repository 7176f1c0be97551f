package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of ptyworker.go): replace this stub.
func newPtyWorkerCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "ptyworker",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("ptyworker: not built yet") },
	}
}
