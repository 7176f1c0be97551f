package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of spawn.go): replace this stub.
func newSpawnCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "spawn",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("spawn: not built yet") },
	}
}
