package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of attach.go): replace this stub.
func newAttachCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "attach",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("attach: not built yet") },
	}
}
