package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of uninstall.go): replace this stub.
func newUninstallCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "uninstall",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("uninstall: not built yet") },
	}
}
