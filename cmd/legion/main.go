// Command legion runs a team's backlog through AI coding agents and lets
// systemd do the supervising. This package only wires: it parses flags,
// builds each package's Options and calls into it. See README.md.
//
// The demo (`legion demo`, contrib/demo) and the scripted agent it and the
// tests run (`legion scripted-agent`, ptyworker/scripted) are test code:
// they are in a legion built with the demo build tag only (demo.go,
// agent.go; `make demo`, units/sdtest's LegionBinary). Without the tag, as
// `make build`, `make install` and the packages build legion, nodemo.go
// leaves a hidden `legion demo` that fails saying to run `make demo`, and
// legion links no test code (internal/layout checks it). One tag rather
// than a second binary: the demo's units run the binary the demo runs
// from, as the tests' do, so that binary must be all of legion anyway.
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

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/ptyworker/confine"
	"github.com/legion-dev/legion/units/hostprobe"
)

// Exit codes, documented in legion(1).
const (
	exitOK          = 0
	exitError       = 1   // the command failed; the message on stderr says why
	exitUsage       = 2   // bad flags or arguments
	exitInterrupted = 130 // SIGINT (Ctrl-C): 128+2, as a shell reports it
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == confine.ProbeFlag {
		// A probe of Landlock run by a process under a seccomp filter
		// (confine.Probe).
		os.Exit(confine.ProbeMain(os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == hostprobe.EffectFlag {
		// The program of a unit of the host probe (hostprobe.Probe).
		os.Exit(hostprobe.EffectMain(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == confine.ExecFlag {
		// The trampoline of a sandboxed agent whose worker is this
		// program (`legion pty-worker`, units of earlier versions).
		code, err := confine.Exec(os.Args[1:])
		fmt.Fprintf(os.Stderr, "legion: %v\n", err)
		os.Exit(code)
	}
	if len(os.Args) == 2 && os.Getenv(github.EnvAskpass) == "1" {
		// git's GIT_ASKPASS program while Legion pushes an issue's
		// branch to GitHub (github.PushEnv).
		answer, err := github.AskpassFromEnv(os.Args[1], os.Getenv)
		if err != nil {
			fmt.Fprintf(os.Stderr, "legion: %v\n", err)
			os.Exit(1)
		}
		fmt.Println(answer)
		os.Exit(0)
	}
	// One root context, cancelled at the first SIGINT or SIGTERM with the
	// signal as its cause. The goroutine ends then, or with the process.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { cancel(signalError{<-sigs}) }()
	// A closed stdout gives EPIPE, not death; notified rather than
	// ignored, so that the programs legion starts (tmux, a sandbox's
	// manager) do not inherit SIGPIPE ignored.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	err := run(ctx, os.Args[1:])
	os.Exit(exitCode(err, context.Cause(ctx), os.Stderr))
}

// exitCode prints err (unless it is only the cancellation, or a closed
// output pipe) and says how legion exits. A command ended by SIGINT (Ctrl-C) is interrupted, not a
// success; one ended by SIGTERM (systemd stopping the helper or a
// controller) stopped as asked, which is a success.
func exitCode(err, cause error, stderr io.Writer) int {
	var sig signalError
	interrupted := errors.As(cause, &sig) && sig.sig == os.Interrupt
	var outErr *api.OutputError
	if errors.As(err, &outErr) && errors.Is(err, syscall.EPIPE) {
		return exitError // the reader of the output went away (| head): nothing to say
	}
	var relayed relayedExit
	if errors.As(err, &relayed) {
		return relayed.code // its error is printed
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "legion:", err)
	} else if !interrupted {
		return exitOK
	}
	var ue usageError
	switch {
	case interrupted:
		return exitInterrupted
	case errors.As(err, &ue):
		return exitUsage
	}
	return exitError
}

// signalError is the cause of the root context's cancellation.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string { return e.sig.String() + " received" }

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
