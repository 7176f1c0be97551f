package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of install.go): replace this stub.
func newInstallCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "install",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("install: not built yet") },
	}
}
