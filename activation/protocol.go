package activation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
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

	// DefaultMaxRequest is the longest request line the helper accepts by
	// default, newline included. Longer lines get too_large and the
	// connection is closed.
	DefaultMaxRequest = 256 << 10

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
	CmdState          = "state"           // a team's state and suggested actions (StateArgs)
	CmdDispatch       = "dispatch"        // start or resume an issue's worker (DispatchArgs)
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
	CodeExists             = "exists"              // spawn: a live session already has that name
	CodeNotRunning         = "not_running"         // the session exists but its worker is not running (exit info in the message)
	CodeUnavailable        = "unavailable"         // the worker is (re)starting or unreachable; retryable
	CodeRecovering         = "recovering"          // the helper is reconciling after its start; retryable
	CodeNotImplemented     = "not_implemented"     // a command this helper does not have yet (older helper, newer client)
	CodeInternal           = "internal"            // anything else; the message says what failed
)

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
	ErrInternal       = &Error{Code: CodeInternal}
)

func apiErr(code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...), Retryable: code == CodeRecovering || code == CodeUnavailable}
}

// maxIDLen bounds Request.ID.
const maxIDLen = 64

// DecodeRequest parses one request line (with or without its trailing
// newline). It checks what every command needs: valid UTF-8 JSON, an
// object, "v" equal to ProtocolVersion, an ID of at most 64 bytes, a
// non-empty cmd and args that are an object when present. Command args are
// decoded later, by the command. The error is always an *Error with code
// bad_request or unsupported_version; the Request returned with it carries
// the ID when one could be read, so the answer can be matched.
func DecodeRequest(line []byte) (Request, error) {
	line = bytes.TrimRight(line, "\r\n")
	var req Request
	if len(bytes.TrimSpace(line)) == 0 {
		return req, apiErr(CodeBadRequest, "empty request line: want one JSON object per line")
	}
	if !utf8.Valid(line) {
		return req, apiErr(CodeBadRequest, "request is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&req); err != nil {
		return Request{ID: salvageID(line)}, apiErr(CodeBadRequest, "malformed request: %v", jsonProblem(err))
	}
	if dec.More() {
		return Request{ID: req.ID}, apiErr(CodeBadRequest, "malformed request: trailing data after the JSON object")
	}
	if len(req.ID) > maxIDLen {
		return Request{}, apiErr(CodeBadRequest, "request id is %d bytes long, at most %d allowed", len(req.ID), maxIDLen)
	}
	if req.V != ProtocolVersion {
		return req, apiErr(CodeUnsupportedVersion, "protocol version %d is not supported: this helper speaks \"v\":%d", req.V, ProtocolVersion)
	}
	if req.Cmd == "" {
		return req, apiErr(CodeBadRequest, `request has no "cmd"`)
	}
	if len(req.Args) > 0 {
		if a := bytes.TrimSpace(req.Args); len(a) == 0 || (a[0] != '{' && !bytes.Equal(a, []byte("null"))) {
			return req, apiErr(CodeBadRequest, "%s: args must be a JSON object", req.Cmd)
		}
	}
	return req, nil
}

// DecodeArgs decodes a request's args into v (a pointer to the command's
// args struct). Missing args decode as {}. Unknown fields are ignored (see
// the evolution rule above).
func DecodeArgs(req Request, v any) error {
	if len(req.Args) == 0 || bytes.Equal(bytes.TrimSpace(req.Args), []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(req.Args, v); err != nil {
		return apiErr(CodeBadRequest, "%s: bad args: %v", req.Cmd, jsonProblem(err))
	}
	return nil
}

// salvageID returns the "id" of a request that failed to decode as a
// whole, when the line is at least a JSON object with a string id.
func salvageID(line []byte) string {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &probe) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(probe.ID, &id) != nil || len(id) > maxIDLen {
		return ""
	}
	return id
}

// jsonProblem turns encoding/json errors into a short, client-facing text.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q: got JSON %s, want %s", te.Field, te.Value, te.Type)
		}
		return fmt.Sprintf("got JSON %s, want %s", te.Value, te.Type)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err)
	}
	return err.Error()
}

// marshalResult encodes a command result; results are plain structs, so a
// failure is a programming error reported as internal.
func marshalResult(v any) (json.RawMessage, *Error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, apiErr(CodeInternal, "encode result: %v", err)
	}
	return b, nil
}
