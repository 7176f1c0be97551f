// Command legion-pty-worker hosts one agent session on a PTY: systemd runs
// it as the main process of the session's transient unit, which `legion
// spawn` and the controller create through the helper. It is a program of
// its own, not a subcommand of legion, so that each resident worker maps
// only what it uses (see proto.BinaryName). The work is package
// ptyworker's; this file only parses the command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/ptyworker"
	"github.com/legion-dev/legion/ptyworker/confine"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

const usage = `Usage: legion-pty-worker --spec FILE
       legion-pty-worker --connect [--spec FILE]
       legion-pty-worker --transcript [--offset N | --tail N] [--follow] [--spec FILE]

Host one agent session: run the agent on a PTY, keep its output (ring and
transcript), serve attach clients on a unix socket and feed systemd's
watchdog while the agent's session file is fresh. systemd starts it in the
session's transient unit; the spec file (JSON, mode 0600) says what to run.
People use "legion spawn" and "legion attach" instead.

With --connect it relays its stdin and stdout to a running worker's socket,
past hello: on Kubernetes the helper runs it in a session's pod by exec
through the API server, for attach and input ($LEGION_WORKER_SPEC and
$LEGION_WORKER_SOCKET, set in the pod, find the worker). With --transcript
it writes the session's transcript, for legion sessions logs.

Exit status: 0 when the agent exited with code 0, the session was removed or
the unit was stopped; 1 when the agent failed, one of the spec's prepare
commands failed (the agent not started) or the session could not be hosted
(so Restart=on-failure restarts it); 2 for bad arguments; 78 when
the agent cannot be started and a restart would not help (its program is
not found or not executable, or its directory is missing: the unit lists
78 in RestartPreventExitStatus=, so it fails at once and stays failed);
65 when the spec file cannot be read or is garbled (a corrupt one is moved
aside to FILE.corrupt-<time>): the unit lists 65 in RestartPreventExitStatus=
too, and the helper starts the session again on a fresh spec, resuming its
agent's conversation, when the controller dispatches it next.

Options:
`

func main() {
	// A broken pipe (the journal's stream, a client's socket) must not
	// kill the worker: with SIGPIPE notified, such a write fails with EPIPE
	// instead. Not signal.Ignore: an ignored signal stays ignored across
	// exec, and the agent's shell would get EPIPE errors from `yes | head`
	// instead of the SIGPIPE that ends such pipelines.
	if len(os.Args) == 2 && os.Args[1] == confine.ProbeFlag {
		// A probe of Landlock run by a process under a seccomp filter
		// (confine.Probe).
		os.Exit(confine.ProbeMain(os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == confine.ExecFlag {
		// The trampoline of a sandboxed agent (package confine): no signal
		// handling of the worker's, which exec would reset anyway.
		code, err := confine.Exec(os.Args[1:])
		fmt.Fprintf(os.Stderr, "legion-pty-worker: %v\n", err)
		os.Exit(code)
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("legion-pty-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("spec", "", "the session's spec `FILE` (JSON, mode 0600)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	transcript := fs.Bool("transcript", false, "write the transcript of the worker of the spec in $"+wire.EnvSpec+" (or --spec), after the offset it starts at (one line): run by exec in a session's pod on Kubernetes")
	offset := fs.Int64("offset", 0, "with --transcript, the byte `OFFSET` to start at")
	tail := fs.Int64("tail", 0, "with --transcript, start at most `N` bytes before the end")
	follow := fs.Bool("follow", false, "with --transcript, go on with what the worker appends until stdin ends")
	connect := fs.Bool("connect", false, "relay stdin and stdout to the worker of the spec in $"+wire.EnvSpec+" (or --spec), past its hello: run by exec in a session's pod on Kubernetes")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case *showVersion:
		fmt.Fprintln(stdout, "legion-pty-worker", version)
		return 0
	case *connect || *transcript:
		if *spec == "" {
			*spec = os.Getenv(wire.EnvSpec)
		}
		if *spec == "" {
			fmt.Fprintf(stderr, "legion-pty-worker: --connect and --transcript need --spec FILE or $%s\n", wire.EnvSpec)
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		var err error
		if *connect {
			err = ptyworker.Connect(ctx, *spec, os.Getenv(wire.EnvSocket), os.Stdin, stdout)
		} else {
			done := make(chan struct{})
			go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
			err = ptyworker.Transcript(ctx, *spec, *offset, *tail, *follow, done, stdout)
		}
		if err != nil {
			fmt.Fprintln(stderr, "legion-pty-worker:", err)
			return 1
		}
		return 0
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "legion-pty-worker: unexpected argument %q (want only --spec FILE)\n", fs.Arg(0))
		return 2
	case *spec == "":
		fmt.Fprintln(stderr, "legion-pty-worker: --spec FILE is required")
		return 2
	}
	err := ptyworker.RunSpecFile(context.Background(), *spec, version)
	if err == nil || errors.Is(err, context.Canceled) {
		return 0
	}
	fmt.Fprintln(stderr, "legion-pty-worker:", err)
	if errors.Is(err, ptyworker.ErrAgentNotStartable) {
		return proto.ExitAgentNotStartable
	}
	if errors.Is(err, ptyworker.ErrSpecUnreadable) {
		return proto.ExitSpecUnreadable
	}
	return 1
}
