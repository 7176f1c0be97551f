package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of doctor.go): replace this stub.
func newDoctorCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "doctor",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("doctor: not built yet") },
	}
}
