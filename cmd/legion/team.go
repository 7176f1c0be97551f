package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of team.go): replace this stub.
func newTeamCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "team",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("team: not built yet") },
	}
}
