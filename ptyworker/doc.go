// Package ptyworker is the pty-worker: the one process that hosts one agent
// session as a transient systemd unit (the program legion-pty-worker,
// cmd/legion-pty-worker; binary.go has its main and how legion finds it).
//
// It owns, for its session: the spec file format (spec.go), the PTY and the
// agent's process group (pty.go), the output ring addressed by a monotonic byte
// offset and its consumers (ring.go, output.go; in a sealed memfd that local
// clients map read-only, ringmap.go), the VT screen kept beside it
// for snapshots (screen.go, render.go), the transcript file (transcript.go),
// the RPC protocol, server and client on a unix socket (protocol.go,
// server.go, writer.go, session.go, client.go), the registry file
// (registry.go), the agent's state from its hooks (agent kind claude:
// hook.go takes them on hook connections and answers permission requests,
// agentstate.go is the state machine, hookpayload.go reads Claude Code's
// payloads, geminihook.go reads the Gemini CLI's as Claude Code's, relay.go
// is `legion hook`), the tracker commands it runs for its agent
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
