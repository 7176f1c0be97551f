package api

import (
	"encoding/json"
	"fmt"
)

// The helper API, version 1.
//
// Transport: a unix stream socket (SocketPath), same-UID peers only. Every
// message is one line of JSON ending in '\n'. A client sends a Request and
// reads Responses with the same ID: exactly one final Response (Event nil)
// per request, preceded, for streaming commands (sessions.logs,
// sessions.watch), by any
// number of Responses carrying an Event. A connection may carry many
// requests one after the other; after a streaming command or attach it is
// the client's to close.
//
//	→ {"v":1,"id":"1","cmd":"sessions.status","args":{"name":"docs"}}
//	← {"v":1,"id":"1","ok":true,"result":{"session":{...}}}
//	← {"v":1,"id":"2","ok":false,"error":{"code":"not_found","message":"...","retryable":false}}
//
// Evolution is additive within a major version: new commands, new optional
// args and new result fields. Unknown fields are ignored on both sides, so a
// newer client works with an older helper of the same major version (and
// gets unknown_command for commands the helper lacks). A request with a
// different "v" gets unsupported_version.
const (
	// ProtocolVersion is the major version spoken here ("v" on every message).
	ProtocolVersion = 1

	// maxResponse bounds a response line read by the Client (transcript
	// chunks are at most logChunk bytes before base64).
	maxResponse = 16 << 20
)

// Commands of protocol version 1.
const (
	CmdSessionsList   = "sessions.list"   // args: none; result: ListResult
	CmdSessionsStatus = "sessions.status" // args: NameArgs; result: StatusResult
	CmdSessionsLogs   = "sessions.logs"   // args: LogsArgs; events: LogEvent; result: LogsResult
	CmdSessionsKill   = "sessions.kill"   // args: NameArgs; result: StatusResult
	CmdSend           = "send"            // args: SendArgs; result: StatusResult
	CmdAttach         = "attach"          // args: AttachArgs; result: AttachResult + one fd (SCM_RIGHTS)
	CmdSpawn          = "spawn"           // args: SpawnArgs; result: SpawnResult
	// CmdSessionsReset resets a failed session's unit (systemd's
	// reset-failed): the session is no longer failed, so its team's
	// controller (or a `legion dispatch`) starts it again. A session that
	// is not failed is refused with bad_request. Args: NameArgs; result:
	// StatusResult.
	CmdSessionsReset = "sessions.reset"
	// sessions.watch and team.stop: see events.go.
)

// Request is one command from a client.
type Request struct {
	V    int             `json:"v"`              // ProtocolVersion
	ID   string          `json:"id"`             // chosen by the client, echoed in every response; at most 64 bytes
	Cmd  string          `json:"cmd"`            // one of the Cmd constants
	Args json.RawMessage `json:"args,omitempty"` // the command's args object; absent means {}
}

// Response is one answer line. Exactly one of Result, Error and Event is
// set; a Response with an Event is a stream item and more lines follow.
// The event's type is the command's: LogEvent for sessions.logs,
// SessionEvent for sessions.watch.
type Response struct {
	V      int             `json:"v"`
	ID     string          `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
	Event  json.RawMessage `json:"event,omitempty"`
}

// Error codes. A client branches on Code, never on Message.
const (
	CodeBadRequest         = "bad_request"         // malformed JSON, missing or invalid args (the message names which)
	CodeUnknownCommand     = "unknown_command"     // cmd is not a command of this version
	CodeUnsupportedVersion = "unsupported_version" // "v" is not ProtocolVersion
	CodeTooLarge           = "too_large"           // the request line is longer than the limit; the connection is closed
	CodeUnauthorized       = "unauthorized"        // the peer's UID is not the helper's
	CodeNotFound           = "not_found"           // no session of that name
	CodeExists             = "exists"              // spawn: a live session already has that name (with reuse: a session of another team)
	CodeNotRunning         = "not_running"         // the session exists but its worker is not running (exit info in the message)
	CodeUnavailable        = "unavailable"         // the worker is (re)starting or unreachable; retryable
	CodeRecovering         = "recovering"          // the helper is reconciling after its start; retryable
	CodeNotImplemented     = "not_implemented"     // a command this helper does not have yet (older helper, newer client)
	CodeNoRoom             = "no_room"             // spawn: MaxLive sessions of all teams are live; retry when one ended
	CodeIssueBusy          = "issue_busy"          // spawn (dispatch): another worker unit of the issue has not ended; retry when it has
	CodeIssueHeld          = "issue_held"          // spawn (dispatch): another worker unit of the issue runs and is no session of the helper; a person stops it
	CodeInternal           = "internal"            // anything else; the message says what failed
)

// PersonError is an error only a person can resolve (a file of the
// user's to repair, a unit to stop): a controller escalates a dispatch
// refused with one at once, with its message, instead of trying again
// every tick, which would wait for ever, said only in its log.
type PersonError struct{ Err error }

func (e *PersonError) Error() string { return e.Err.Error() }
func (e *PersonError) Unwrap() error { return e.Err }

// Error is a structured error of the API. It is also the error type the
// Client returns for a refused request, so callers can errors.As it or
// compare with errors.Is against the Err* values below (matched by Code).
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

func (e *Error) Error() string { return e.Message + " (" + e.Code + ")" }

// Is matches any *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is; only their Code matters.
var (
	ErrBadRequest     = &Error{Code: CodeBadRequest}
	ErrUnknownCommand = &Error{Code: CodeUnknownCommand}
	ErrTooLarge       = &Error{Code: CodeTooLarge}
	ErrUnauthorized   = &Error{Code: CodeUnauthorized}
	ErrNotFound       = &Error{Code: CodeNotFound}
	ErrExists         = &Error{Code: CodeExists}
	ErrNotRunning     = &Error{Code: CodeNotRunning}
	ErrUnavailable    = &Error{Code: CodeUnavailable}
	ErrRecovering     = &Error{Code: CodeRecovering}
	ErrNotImplemented = &Error{Code: CodeNotImplemented}
	ErrNoRoom         = &Error{Code: CodeNoRoom}
	ErrIssueBusy      = &Error{Code: CodeIssueBusy}
	ErrIssueHeld      = &Error{Code: CodeIssueHeld}
	ErrInternal       = &Error{Code: CodeInternal}
)

// Errorf returns an *Error with code and a message formatted as by
// fmt.Sprintf. Retryable is set for the codes a client may retry
// (recovering, unavailable).
func Errorf(code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...), Retryable: code == CodeRecovering || code == CodeUnavailable}
}
