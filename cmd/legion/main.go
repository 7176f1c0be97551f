// Command legion runs a team's backlog through AI coding agents and lets
// systemd do the supervising. This package only wires: it parses flags,
// builds each package's Options and calls into it. See README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes, documented in legion(1).
const (
	exitOK    = 0
	exitError = 1 // the command failed; the message on stderr says why
	exitUsage = 2 // bad flags or arguments
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A closed stdout gives EPIPE, not death; notified rather than
	// ignored, so that the programs legion starts (tmux, a sandbox's
	// manager) do not inherit SIGPIPE ignored.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	err := run(ctx, os.Args[1:])
	stop()
	if err == nil || errors.Is(err, context.Canceled) {
		os.Exit(exitOK)
	}
	fmt.Fprintln(os.Stderr, "legion:", err)
	var ue usageError
	if errors.As(err, &ue) {
		os.Exit(exitUsage)
	}
	os.Exit(exitError)
}

// run builds the command tree and executes it with args.
func run(ctx context.Context, args []string) error {
	root := newRootCmd()
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// usageError marks errors in flags or arguments (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// writeJSON prints v as indented JSON: the --json output of every command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
