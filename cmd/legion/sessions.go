package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of sessions.go): replace this stub.
func newSessionsCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "sessions",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("sessions: not built yet") },
	}
}
