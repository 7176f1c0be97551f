package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/ptyworker"
)

// newPtyWorkerCmd is `legion pty-worker --spec FILE`: the worker run in
// this process. New units run the smaller legion-pty-worker program
// (proto.BinaryName), the same code; this command stays for units
// created by earlier versions (systemd restarts them with the ExecStart= they
// were created with) and for debugging by hand. Hidden: people use `legion
// spawn` and `legion attach`.
func newPtyWorkerCmd(_ *globals) *cobra.Command {
	var specPath string
	cmd := &cobra.Command{
		Use:   "pty-worker --spec FILE",
		Short: "Host one agent session on a PTY (run by systemd)",
		Long: `pty-worker hosts one agent session: it runs the agent on a PTY, keeps its
output, serves attach clients on a unix socket and feeds systemd's watchdog
while the agent's session file is fresh. systemd starts it in the session's
transient unit (as the program legion-pty-worker, which runs the same
code); the spec file (0600) says what to run.

Exit status: 0 when the agent exited with code 0, the session was removed or
the unit was stopped; 1 when the agent failed, so Restart=on-failure restarts
it.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if specPath == "" {
				return usageError{errors.New("pty-worker: --spec FILE is required")}
			}
			return runPtyWorker(cmd.Context(), specPath)
		},
	}
	cmd.Flags().StringVar(&specPath, "spec", "", "the session's spec file (JSON, mode 0600)")
	return cmd
}

func runPtyWorker(ctx context.Context, specPath string) error {
	return ptyworker.RunSpecFile(ctx, specPath, version)
}
