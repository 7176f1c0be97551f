// Package proto is what other processes know of a worker without linking
// its daemon (package ptyworker: the PTY, the terminal emulator, the hook
// handling): the contract between a worker and everyone who talks to it
// or starts it.
//
// It owns the RPC protocol on the worker's socket (protocol.go: frames,
// methods, params and results, error codes, versions) and its Go client
// (client.go: Dial, hello, attach, input, info, watch, respond, end, hook;
// with a mapped attach, the read-only view of the worker's output ring,
// ringmap.go); the spec file a worker runs from (spec.go) and the registry
// file it keeps (registry.go); the tracker commands an agent has its
// worker run (issue.go: RelayIssue, `legion issue`); how legion finds the
// worker program (binary.go); the kinds, watchdog verdicts and wording of
// an agent's state (agent.go); and the bounds of the output ring, which
// legion.toml's worker.ring_size and a spawn's ring_size are checked
// against. Package ptyworker serves and reads what is defined here.
//
// It must never link the daemon, an agent kind's package, Landlock, the
// helper's server, config, units or the controller (internal/layout's
// rules assert it): the helper, the team controller, the dashboard, the
// CLI's tools and config link it, and through it no worker code. It
// links activation/api, whose types (Agent, Duration, Sandbox) the
// protocol carries.
package proto

// The worker's output ring, in bytes: its default size and the sizes it
// accepts.
const (
	DefaultRingSize = 1 << 20
	MinRingSize     = 4 << 10
	MaxRingSize     = 256 << 20
)
