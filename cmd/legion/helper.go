package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of helper.go): replace this stub.
func newHelperCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "helper",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("helper: not built yet") },
	}
}
