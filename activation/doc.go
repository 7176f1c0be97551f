// Package activation is Legion's control plane: `legion helper`, the daemon
// that legion.socket starts on demand, and the one API (JSON lines on a unix
// socket) that the CLI, the controller and any dashboard use to list, follow,
// attach to, send to, kill and spawn agent sessions.
//
// The package is the server. Its clients use package activation/api, which
// holds the wire types and the Go Client and imports nothing of Legion's;
// this package answers with those types. It owns:
//   - the Helper (helper.go, listen.go, daemonid.go): listeners from
//     socket activation or its own, SO_PEERCRED checks, the persistent
//     daemon instance id, idle exit, sd_notify READY=1/STATUS=;
//   - the bounded request decoder (request.go);
//   - recovery (recovery.go): at every start, the join of systemd's unit
//     list, the pty-worker registry files and hello/watch on each worker
//     socket, behind a barrier that answers every command with the
//     retryable error code "recovering", but sessions.list once the units
//     and files are read (sessions whose workers are still being checked
//     are listed as such: api.Session.Checking); a `legion spawn` session that a
//     reboot cut is kept and listed as lost, never pruned in silence
//     (lost.go: the worker lease's boot ID against this boot's);
//   - the commands (commands.go, spawn.go, logs.go, broker.go) and the
//     helper's table of sessions (table.go);
//   - the push stream of session events, sessions.watch (watch.go; its
//     wire types and Client.Watch, FollowSessions are in activation/api):
//     a snapshot, then started, state_changed, agent_state_changed, exited
//     and failed as they happen, learnt from the helper's own actions, one
//     subscription to the user manager for every legion-* unit, and one
//     watch connection per running worker, never by polling; the
//     controller and `legion tmux` follow it.
//
// The terminal side of `legion attach` is package cli/attachterm,
// `legion tmux`'s view and its follower package cli/tmuxview (both
// clients of activation/api, with the CLI's other tools under cli/); the
// dashboard is package dashboard, a daemon of its own; the daemons'
// journal logger is package internal/journal.
//
// The helper is a pure session supervisor: spawn, list, status, logs,
// attach, send, kill, recovery, the sessions.watch stream and team.stop
// (a team's workers, for its controller). It plans nothing: `legion
// spawn`, `legion dispatch` and the controllers decide a session's worktree, id,
// argv, environment and supervision values (from legion.toml) and send a
// full launch (api.SpawnArgs), which the helper checks field by field and
// runs as it is, with no defaults of its own. So it must never import
// package config or controller/..., and it talks to its workers through
// ptyworker/proto without linking their daemon (internal/layout asserts
// both, with go list -deps); `legion helper` reads the [helper] table of legion.toml
// and passes what it says in Options.
//
// Sessions of teams with engine "kubernetes" run as Jobs on their cluster
// (kubesessions.go): a spawn with SpawnArgs.Kubernetes goes to the
// Kubernetes engine, a process of its own (legion-kube engine, package
// activation/kube, reached through activation/kube/wire), which the helper
// starts on the first such spawn and again at each start when
// kubernetes-targets.json names clusters; list, status, kill, team.stop
// and sessions.watch cover those sessions. Attach, send, respond and end
// reach their workers through the API server: a `legion-kube exec` of
// `legion-pty-worker --connect` in the pod, its stdin and stdout a socket
// pair whose other end the helper uses or hands over (dialKube);
// sessions.logs runs `legion-pty-worker --transcript` there (logsKube).
// The agent state of a running cluster session whose worker reads hooks
// comes the same way: the helper watches that worker through such an
// exec for as long as the session runs (kubeagents.go).
// A helper with Options.NoSystemd (the controller's pod on a cluster,
// `legion controller --with-helper`) never connects to a user manager: it
// serves only those sessions, follows Options.KubeTargets before READY=1,
// and refuses a spawn on its own machine (ErrNoSystemd).
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
// (the helper's spawn specs, 0600; removed by sessions.kill, or by the
// first recovery after the session ended, which prunes its registry
// entry: until then a spec of an ended session stays, holding its token;
// a lost session's stays until it is spawned again or killed);
// registry/<session id>.json (the workers'; a lost session's stays in
// place); registry/pruned/ (entries of sessions that ended, or were
// forgotten, still found by status and logs);
// registry/quarantine/ (entries recovery refused to adopt, and an unreadable
// kubernetes-targets.json); kubernetes-targets.json (the clusters the
// helper has run sessions on, 0600);
// transcripts/<session id>.log (never removed by the helper).
package activation
