package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner of send.go): replace this stub.
func newSendCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "send",
		Short:  "not built yet",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("send: not built yet") },
	}
}
