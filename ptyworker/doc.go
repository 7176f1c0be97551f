// Package ptyworker is the pty-worker daemon: the one process that hosts
// one agent session as a transient systemd unit (the program
// legion-pty-worker, cmd/legion-pty-worker; binary.go has its main).
//
// What others need to talk to a worker or start one is in package
// ptyworker/proto, which this package uses and serves: the RPC protocol
// and its client, the spec file, the registry file, the relayed tracker
// commands and how legion finds this program. Whoever only talks to
// workers links proto, not this package (internal/layout asserts it for
// the helper, the controller, the dashboard and the CLI's tools).
//
// It owns, for its session: the PTY and the agent's process group
// (pty.go), the output ring addressed by a monotonic byte offset and its
// consumers (ring.go, output.go; in a sealed memfd that local clients map
// read-only, ringmap.go), the VT screen kept beside it for snapshots
// (screen.go, render.go), the transcript file (transcript.go), the RPC
// server on a unix socket (server.go, writer.go, session.go), writing the
// registry file, the agent's state from its hooks (agent kind claude:
// hook.go takes them on hook connections and answers permission requests,
// agentstate.go is the state machine, hookpayload.go reads Claude Code's
// payloads, relay.go is `legion hook`, which first translates another
// CLI's payloads with the hook dialect its kind gives, proto.HookDialect;
// the dialogs no hook answers, which the worker answers by keys, are the
// spec's DialogMarkers), the spec's prepare commands, run before the agent
// at each start (prepare.go), the tracker commands it runs for its agent
// (issue.go), the answers a person gives and the clean end of a finished
// agent (hook.go), the agent's confinement under the sandbox policy
// (package confine: the worker builds the Landlock ruleset and starts the
// agent through its own program as a trampoline; the worker itself is
// never confined), and the sd_notify/watchdog loop
// with its rules by agent kind (notify.go). Run (worker.go) ties them
// together. The transient unit that runs a worker is
// built by the subpackage workerunit, so that this package, and with it the
// worker program, links neither package units nor a D-Bus client.
//
// The package must never: start or stop systemd units itself (the caller
// hands the Unit from workerunit.Transient to package units), pass NOTIFY_SOCKET,
// WATCHDOG_* or LISTEN_* to the agent, block the PTY reader on a client or
// a file, log per output chunk, put the control token anywhere but the
// spec file (0600) and the registry file (0600), or put the hook token
// anywhere but the agent's environment (never in argv, a file or a log).
package ptyworker
