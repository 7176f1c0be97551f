// Package activation is Legion's control plane: `legion helper`, the daemon
// that legion.socket starts on demand, and the one API (JSON lines on a unix
// socket) that the CLI, the controller and any dashboard use to list, follow,
// attach to, send to, kill and spawn agent sessions.
//
// The package owns:
//   - the wire protocol (protocol.go, types.go): versioned requests and
//     responses, structured errors, a bounded request decoder, session
//     name rules;
//   - the Client (client.go), which finds the socket at
//     $XDG_RUNTIME_DIR/legion/legion.sock, retries while the helper
//     recovers, and receives the descriptor of a brokered attach;
//   - the Helper (helper.go, listen.go, daemonid.go, journal.go): listeners
//     from socket activation or its own, SO_PEERCRED checks, the persistent
//     daemon instance id, idle exit, sd_notify READY=1/STATUS=, logging to
//     the journal with LEGION_* fields;
//   - recovery (recovery.go): at every start, the join of systemd's unit
//     list, the pty-worker registry files and hello/info on each worker
//     socket, behind a barrier that answers every command with the
//     retryable error code "recovering";
//   - the commands (commands.go, spawn.go, logs.go, broker.go) and the
//     helper's table of sessions (table.go);
//   - the push stream of session events, sessions.watch (events.go,
//     watch.go, watch_client.go): a snapshot, then started, state_changed,
//     agent_state_changed, exited and failed as they happen, learnt from
//     the helper's own actions, one subscription to the user manager for
//     every legion-* unit, and one watch connection per running worker,
//     never by polling; the controller and `legion tmux` follow it;
//   - the terminal side of `legion attach` (attach.go, workerconn.go).
//
// The helper must never own an agent: workers are transient systemd units,
// never its children, so stopping, crashing or kill -9 of the helper leaves
// every session running. It must never kill a worker it has not
// authenticated as its own (quarantine instead), never log PTY output, and
// never put a control token on a command line, in a unit property, in a
// log line or in an API answer.
//
// Attach is brokered by descriptor passing: the helper dials the worker's
// socket, authenticates with hello (daemon instance id and the session's
// control token), and hands the connected socket to the client with
// SCM_RIGHTS next to the response line; see broker.go for why.
//
// Files under $XDG_STATE_HOME/legion: daemon-id; specs/<session id>.json
// (the helper's spawn specs, 0600, removed when the unit is gone);
// registry/<session id>.json (the workers'); registry/pruned/ (entries of
// sessions that ended, still found by status and logs);
// registry/quarantine/ (entries recovery refused to adopt);
// transcripts/<session id>.log (never removed by the helper).
package activation
