package api

import "time"

// CmdSessionsWatch streams session events: args WatchArgs; events
// SessionEvent (a snapshot first). The stream lasts until the client
// closes the connection; it has no successful end. The helper ends it
// with an error: unavailable when it stops (legion.socket starts it again
// on the next connection), lagged when the client fell behind. Either
// way the client may subscribe again and gets a fresh snapshot.
const CmdSessionsWatch = "sessions.watch"

// CmdTeamStop stops a team's workers: args TeamStopArgs; result
// TeamStopResult.
const CmdTeamStop = "team.stop"

// CodeLagged ends a sessions.watch stream whose client did not keep up
// (its queue of events was full). It is retryable: subscribe again.
const CodeLagged = "lagged"

// ErrLagged matches the error of a dropped sessions.watch stream.
var ErrLagged = &Error{Code: CodeLagged}

// EventType is the kind of a SessionEvent.
type EventType string

// Session event types.
const (
	// EventSnapshot is the first event of every stream: Sessions holds
	// every session the helper knows (of WatchArgs.Team, when set), as
	// sessions.list would list them. Every later event is a change to it.
	EventSnapshot EventType = "snapshot"
	// EventStarted: a session the stream had not seen appeared (spawned,
	// dispatched, or started again after it had ended).
	EventStarted EventType = "started"
	// EventStateChanged: the session's State changed in another way than
	// the ones below (starting, running after a start, a restart). A
	// session that recovery finds lost to a reboot (State lost) comes in a
	// snapshot or as state_changed.
	EventStateChanged EventType = "state_changed"
	// EventAgentStateChanged: the agent of a running session changed
	// state: it now waits on a human (State waiting_input, with its
	// Question), runs again, went stale, or asks another question; or
	// its state from its hooks (Session.Agent) changed.
	EventAgentStateChanged EventType = "agent_state_changed"
	// EventExited: the session ended and will not be restarted (State
	// exited); Session.Exit says how.
	EventExited EventType = "exited"
	// EventFailed: systemd gave up on the session (State failed);
	// Session.Cause says why.
	EventFailed EventType = "failed"
)

// SessionEvent is one stream item of sessions.watch.
type SessionEvent struct {
	Type EventType `json:"type"`
	// Seq numbers the helper's events, from 1 at each helper start; a
	// snapshot carries the Seq of the last change it includes.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Session is the session as it is now (every type but snapshot).
	Session *Session `json:"session,omitempty"`
	// Sessions is the snapshot (type snapshot only).
	Sessions []Session `json:"sessions,omitempty"`
}

// WatchArgs are the args of sessions.watch.
type WatchArgs struct {
	Team string `json:"team,omitempty"` // only this team's sessions; "" means all
}

// TeamStopArgs are the args of team.stop. With IfStopping, workers are
// stopped only when the team's controller unit (legion@<team>.service)
// has a stop job pending: systemd is stopping the team, not restarting
// its controller.
type TeamStopArgs struct {
	Team       string `json:"team"`
	Short      string `json:"short"` // the team's short id: its workers are legion-<short>-*.service
	IfStopping bool   `json:"if_stopping,omitempty"`
}

// TeamStopResult lists the worker units stopped, and the controller
// unit's pending job ("" when none) when IfStopping was asked.
type TeamStopResult struct {
	Job     string   `json:"job,omitempty"`
	Stopped []string `json:"stopped"`
}
