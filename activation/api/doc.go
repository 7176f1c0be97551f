// Package api is the helper's API as its clients see it: the wire types of
// protocol version 1 (protocol.go: Request, Response, Error and its codes,
// the Cmd* commands and the rules of the protocol; types.go: Session,
// State, Exit and the args and results of every command, Duration,
// ValidateName), the socket's path (socket.go), and the Go Client
// (client.go) that the CLI, the controller and any Go dashboard use: Dial,
// Call and one method per command, the retries while the helper recovers,
// the worker socket an attach receives with SCM_RIGHTS, and FollowLogs
// across helper restarts (OutputError: a write to the caller's output
// failed). events.go and watch_client.go hold the push stream of session
// events, sessions.watch (SessionEvent, WatchArgs, Client.Watch and
// FollowSessions, which subscribes again across helper restarts), and
// team.stop.
//
// The protocol itself (transport, framing, versioning, evolution) is
// described in protocol.go; a client in another language needs nothing
// else.
//
// The package imports nothing of Legion's, only the standard library and
// golang.org/x/sys (internal/layout asserts it), so that
// linking a client never links the helper's server (package activation),
// systemd, the worker or the controller. It must never hold server code:
// the server decodes requests and answers them in package activation,
// with these types.
package api
