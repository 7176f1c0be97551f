package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of docs.go): replace this stub.
func newDocsCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "docs",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("docs: not built yet") },
	}
}
