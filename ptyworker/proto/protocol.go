package proto

// The worker's RPC protocol, spoken on the session's unix socket.
//
// # Framing
//
// Every message in both directions is one frame:
//
//	+--------+----------------------+-----------------+
//	| type   | length               | payload         |
//	| 1 byte | 4 bytes, big-endian  | length bytes    |
//	+--------+----------------------+-----------------+
//
// Frame types:
//
//   - 'J' control: the payload is one JSON object (a request, a response or
//     an event, see below), at most MaxControlFrame bytes.
//   - 'D' data. Worker to client: 8 bytes big-endian offset of the first
//     byte, then PTY output bytes. Client to worker: raw bytes to write to the
//     PTY (keystrokes; accepted only after hello, refused on a read-only
//     attach; never acknowledged). At most MaxDataFrame bytes of data.
//   - 'S' screen snapshot, worker to client only: 8 bytes big-endian offset,
//     then bytes that redraw the screen as it was once the output before that
//     offset had been written (ANSI sequences for an xterm-like terminal).
//     At most MaxDataFrame bytes: a screen too big for that in colour comes
//     as plain text, and if need be without its top rows.
//   - 'M' ring, worker to client only, to a client that attached with
//     mapped (rpc 1.2): 8 bytes big-endian offset the client reads from,
//     with the output ring's memfd in SCM_RIGHTS on the same bytes. The
//     memfd starts with a header page (magic "LGNRING1" as a little-endian
//     uint64, data size, head, reserve: uint64s in native order), then the
//     data; it is sealed against writes, so clients can only map it
//     read-only. Sent before the attach response. See ringmap.go.
//   - 'H' head, worker to client only, after 'M' instead of data frames:
//     8 bytes big-endian offset; the output before it is in the ring.
//
// A client may ask for mapped only on a unix socket and where its loads
// keep their order (amd64); a worker that cannot share its ring (no memfd
// or seals) answers with data frames and mapped false in the result.
//
// A frame of an unknown type or over its limit gets a bad_request error
// response (id 0) and the connection is closed: the stream cannot be trusted
// past it. Malformed JSON or an unknown method gets a bad_request response and
// the connection goes on.
//
// # Control messages
//
//	request  {"id":1,"method":"attach","params":{...}}
//	response {"id":1,"result":{...}}
//	         {"id":1,"error":{"code":"session_not_running","message":"..."}}
//	event    {"event":"exit","data":{...}}
//
// Requests are answered in order. The first request must be hello; until it
// succeeds every other request gets unauthorized. A peer whose UID (from
// SO_PEERCRED) is not allowed gets one unauthorized response and is
// disconnected before anything is read.
//
// # Versions
//
// hello carries the client's rpc_major and rpc_minor. The worker accepts the
// same major and any minor in [RPCMinorMin, RPCMinor]: minors only add
// optional fields and methods, so a worker serves every older client of its
// major. A newer client gets unsupported_version with the worker's version in
// the error data, and may say hello again with that minor (Client.Hello does).
//
// # Methods
//
// hello, info, attach, detach, input, resize, signal, remove, health, watch,
// respond and end (rpc 1.1); see the *Params and *Result types below.
// Events: "state", "exit", "desync" (this connection fell too far behind
// and is being dropped; the connection is closed after it). Every attached
// or watching connection gets the exit event of the run, after all output
// before it; one that attaches or watches after the agent ended (the
// worker serves a while longer) gets it right after its answer. The worker
// waits at most its exit linger for them to be sent before it exits.
//
// # Hook connections (rpc 1.1)
//
// A peer that runs in another worker's unit (its cgroup, from the pid
// SO_PEERCRED gives) is refused at once; one in this worker's own unit
// (its agent) may only open a hook connection.
//
// A hello whose token is the run's hook token (the agent's
// LEGION_HOOK_TOKEN; see hook.go), not the control token, opens a hook
// connection: its daemon_instance_id is not checked, and it may call
// only hook and issue (every other method, and data frames, get
// unauthorized; issue runs the agent's `legion issue` on its own issue
// outside its sandbox, see issue.go). A
// hook call's params are the hook's JSON payload as Claude Code wrote it
// (HookResult answers it). A PermissionRequest for a tool other than
// AskUserQuestion is answered only once a person decided (respond), or
// with no decision when the agent moved on or the worker ends: this one
// answer may come after answers to later requests on the connection.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/legion-dev/legion/activation/api"
)

// Protocol version. RPCMinorMin..RPCMinor is the window of client minors a
// worker accepts.
const (
	RPCMajor    = 1
	RPCMinor    = 2 // 1.1: hook connections, respond, end, Info.Agent; 1.2: mapped attach
	RPCMinorMin = 0
)

// Frame types.
const (
	FrameControl  byte = 'J'
	FrameData     byte = 'D'
	FrameSnapshot byte = 'S'
	FrameRing     byte = 'M'
	FrameHead     byte = 'H'
)

// Hard limits on frame payloads.
const (
	MaxControlFrame = 64 << 10 // JSON control message
	MaxDataFrame    = 1 << 20  // PTY bytes in one data or snapshot frame
	// DataChunk is how many PTY bytes a worker sends in one data frame,
	// and a client takes from a mapped ring at a time.
	DataChunk = 128 << 10
	HeaderLen = 5
	OffsetLen = 8
)

// Error codes carried in RPC error responses.
const (
	CodeBadRequest         = "bad_request"
	CodeUnsupportedVersion = "unsupported_version"
	CodeUnauthorized       = "unauthorized"
	CodeSessionNotFound    = "session_not_found"
	CodeSessionNotRunning  = "session_not_running"
	CodeIOError            = "io_error"
	CodeInternalError      = "internal_error"
	// CodeNotRelayed: the worker does not run tracker commands for its
	// agent (MethodIssue): its spec names no legion program.
	CodeNotRelayed = "not_relayed"
)

// Methods.
const (
	MethodHello  = "hello"
	MethodInfo   = "info"
	MethodAttach = "attach"
	MethodDetach = "detach"
	MethodInput  = "input"
	MethodResize = "resize"
	MethodSignal = "signal"
	MethodRemove = "remove"
	MethodHealth = "health"
	MethodWatch  = "watch"
	// Since 1.1.
	MethodHook    = "hook"    // hook connections only
	MethodRespond = "respond" // RespondParams, RespondResult
	MethodEnd     = "end"     // EndParams
)

// Event names.
const (
	EventState  = "state"
	EventExit   = "exit"
	EventDesync = "desync"
)

// ErrFrameTooLarge is returned (wrapped) by ReadFrame for a frame over its
// type's limit; ErrFrameType for an unknown frame type.
var (
	ErrFrameTooLarge = errors.New("frame too large")
	ErrFrameType     = errors.New("unknown frame type")
)

// RPCError is an error response. Client methods return it as an error;
// match the code with errors.As.
type RPCError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return e.Code + ": " + e.Message }

// IsCode reports whether err is an *RPCError with the given code.
func IsCode(err error, code string) bool {
	var re *RPCError
	return errors.As(err, &re) && re.Code == code
}

// Message is the union of request, response and event; decoding is strict
// (unknown fields are rejected).
type Message struct {
	ID     uint64          `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
	Event  string          `json:"event,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// HelloParams is the first request on every connection.
type HelloParams struct {
	RPCMajor         int    `json:"rpc_major"`
	RPCMinor         int    `json:"rpc_minor"`
	DaemonInstanceID string `json:"daemon_instance_id"`
	Token            string `json:"token"`
	// SessionID, when set, must be the worker's session (else
	// session_not_found): a guard against a socket path mix-up.
	SessionID string `json:"session_id,omitempty"`
	Client    string `json:"client,omitempty"` // free text for logs, e.g. "legion attach"
}

// HelloResult is the worker's answer to hello.
type HelloResult struct {
	RPCMajor         int    `json:"rpc_major"`
	RPCMinor         int    `json:"rpc_minor"`
	WorkerVersion    string `json:"worker_version"`
	DaemonInstanceID string `json:"daemon_instance_id"`
	SessionID        string `json:"session_id"`
	Name             string `json:"name"`
	WorkerPID        int    `json:"worker_pid"`
	// Epoch names this worker process; output offsets are only meaningful
	// within one epoch (a restarted worker starts again at 0).
	Epoch string `json:"epoch"`
}

// VersionData is the data of an unsupported_version error.
type VersionData struct {
	RPCMajor    int `json:"rpc_major"`
	RPCMinor    int `json:"rpc_minor"`
	RPCMinorMin int `json:"rpc_minor_min"`
}

// Session states, in Info.State, registry files and state events.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateExited   = "exited"  // the agent exited; the worker is about to
	StateRemoved  = "removed" // remove was called: never restarted with this token
	StateStopped  = "stopped" // the worker was told to stop (SIGTERM, watchdog)
	// StateCompleted: end was called (the agent's work is done) and the
	// agent was ended: never started again with this token, and the
	// worker exits 0 however the agent took its end.
	StateCompleted = "completed"
)

// Info describes the session (info method; also the watch result).
type Info struct {
	SessionID    string    `json:"session_id"`
	Name         string    `json:"name"`
	Team         string    `json:"team"`
	Issue        string    `json:"issue,omitempty"`
	Mode         string    `json:"mode,omitempty"`
	Role         string    `json:"role,omitempty"`
	Unit         string    `json:"unit,omitempty"`
	Cwd          string    `json:"cwd"`
	State        string    `json:"state"`
	Running      bool      `json:"running"`
	ArgvKind     string    `json:"argv_kind"` // "new" or "resume"
	Run          int       `json:"run"`       // 1 for the first start, +1 per unit restart
	WorkerPID    int       `json:"worker_pid"`
	ChildPID     int       `json:"child_pid,omitempty"`
	Cols         int       `json:"cols"`
	Rows         int       `json:"rows"`
	Head         uint64    `json:"head"`   // offset of the next output byte
	Oldest       uint64    `json:"oldest"` // oldest offset still in the ring
	StartedAt    time.Time `json:"started_at"`
	LastActivity time.Time `json:"last_activity,omitzero"` // session file mtime, else last output
	Waiting      bool      `json:"waiting,omitempty"`      // agent waits on a human
	Question     string    `json:"question,omitempty"`
	Stale        bool      `json:"stale,omitempty"`
	Exit         *ExitInfo `json:"exit,omitempty"`
	// Agent is the agent's state from its hooks (kind claude), nil before
	// its first hook event and for other kinds. Since 1.1.
	Agent *api.Agent `json:"agent,omitempty"`
	// SessionFile is the agent's session file, whose writes are its
	// activity; OutputActivity says that its output is (no session file,
	// not kind claude). The helper brings LastActivity up to date from
	// them between state events. Optional: empty and false from workers
	// built before them (then LastActivity stands).
	SessionFile    string `json:"session_file,omitempty"`
	OutputActivity bool   `json:"output_activity,omitempty"`
}

// ExitInfo is how a run of the agent ended. Exactly one of Code (when not
// Signaled) and Signal is meaningful.
type ExitInfo struct {
	Code     int       `json:"code"`
	Signal   string    `json:"signal,omitempty"` // "SIGKILL" when killed by a signal
	Reason   string    `json:"reason"`           // "exited", "removed", "watchdog: stale for 612s", ...
	Time     time.Time `json:"time"`
	Run      int       `json:"run"`
	Offset   uint64    `json:"offset"` // output offset at exit: every byte before it was delivered
	ArgvKind string    `json:"argv_kind,omitempty"`
}

// String is "code 3" or "signal SIGKILL".
func (e *ExitInfo) String() string {
	if e.Signal != "" {
		return "signal " + e.Signal
	}
	return fmt.Sprintf("code %d", e.Code)
}

// Success reports whether the run ended with code 0.
func (e *ExitInfo) Success() bool { return e.Signal == "" && e.Code == 0 }

// AttachParams: Offset nil asks for a screen snapshot; an offset still in
// the ring gets the bytes since (a replay), an older one a snapshot. Cols and
// Rows, when both set, resize the PTY first.
type AttachParams struct {
	Offset   *uint64 `json:"offset,omitempty"`
	Epoch    string  `json:"epoch,omitempty"` // the epoch Offset came from; another epoch's offset is ignored
	Cols     int     `json:"cols,omitempty"`
	Rows     int     `json:"rows,omitempty"`
	ReadOnly bool    `json:"read_only,omitempty"`
	// Mapped asks for the output ring itself ('M', then 'H' frames)
	// instead of data frames (rpc 1.2; Client.Attach clears it where it
	// cannot map). A worker that cannot share its ring ignores it.
	Mapped bool `json:"mapped,omitempty"`
}

// Attach modes.
const (
	AttachReplay   = "replay"
	AttachSnapshot = "snapshot"
)

// AttachResult: data frames follow from Offset (after one snapshot frame
// when Mode is snapshot).
type AttachResult struct {
	Mode    string    `json:"mode"`
	Offset  uint64    `json:"offset"`
	Head    uint64    `json:"head"`
	Cols    int       `json:"cols"`
	Rows    int       `json:"rows"`
	Running bool      `json:"running"`
	Exit    *ExitInfo `json:"exit,omitempty"`
	Epoch   string    `json:"epoch"`
	Mapped  bool      `json:"mapped,omitempty"` // output comes as 'M' and 'H' frames
}

// InputParams writes bytes to the PTY.
type InputParams struct {
	Data []byte `json:"data"` // base64 in JSON
}

// ResizeParams sets the PTY size; the latest resize from any client wins.
type ResizeParams struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Signal targets.
const (
	TargetForeground = "foreground" // the PTY's foreground process group
	TargetGroup      = "group"      // the agent's own process group
)

// SignalParams: Signal is a name ("INT", "SIGINT") or number. Target
// defaults to foreground for INT, QUIT and TSTP (what a terminal's keys do)
// and to group for everything else.
type SignalParams struct {
	Signal string `json:"signal"`
	Target string `json:"target,omitempty"`
}

// SignalResult names the process group that got the signal.
type SignalResult struct {
	Pgid   int    `json:"pgid"`
	Target string `json:"target"`
}

// HealthResult is the health answer.
type HealthResult struct {
	OK       bool   `json:"ok"`
	State    string `json:"state"`
	Watchdog string `json:"watchdog"` // "fresh", "grace", "waiting", "idle", "stale", "unwatched"
	// ActivityAgeMS is the age of the last activity in milliseconds.
	ActivityAgeMS int64 `json:"activity_age_ms"`
}

// StateEventData is pushed to watchers when the state changes.
type StateEventData struct {
	State    string `json:"state"`
	Running  bool   `json:"running"`
	Waiting  bool   `json:"waiting,omitempty"`
	Question string `json:"question,omitempty"`
	Stale    bool   `json:"stale,omitempty"`
	ChildPID int    `json:"child_pid,omitempty"`
	Run      int    `json:"run"`
	// Agent is Info.Agent: a state event is pushed at every change of it
	// (its times and event name aside). Since 1.1.
	Agent *api.Agent `json:"agent,omitempty"`
}

// HookResult answers a hook call: Output, when set, is what `legion hook`
// prints for Claude Code to read (a PermissionRequest's decision).
type HookResult struct {
	Output json.RawMessage `json:"output,omitempty"`
}

// RespondParams deliver a person's answer to what the agent waits on (see
// worker.respond): Decision (api.DecisionAllow or api.DecisionDeny) for a
// permission, Text for a question or as the next prompt; By names who
// answered, for the journal.
type RespondParams struct {
	Text     string `json:"text,omitempty"`
	Decision string `json:"decision,omitempty"`
	By       string `json:"by,omitempty"`
}

// How a respond reached the agent (RespondResult.Delivered).
const (
	DeliveredHook = "hook" // the held permission hook was answered
	DeliveredKeys = "keys" // typed into the agent's terminal
)

// RespondResult says how the answer went and the agent's state after it.
type RespondResult struct {
	Delivered string     `json:"delivered"`
	Agent     *api.Agent `json:"agent,omitempty"`
}

// EndParams: Reason says why the agent's work is done (e.g. "worker-done
// and its turn ended"); it goes into the exit reason as "completed:
// <reason>".
type EndParams struct {
	Reason string `json:"reason"`
}

// DesyncEventData says the connection fell behind; it is closed after.
type DesyncEventData struct {
	Offset uint64 `json:"offset"` // the next offset the client would have got
	Reason string `json:"reason"`
}

// WriteFrame writes one frame. It does not check limits (ReadFrame does).
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	var h [HeaderLen]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	if _, err := w.Write(append(h[:], payload...)); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// FrameLimit is the largest payload allowed for typ, or -1 for an unknown type.
func FrameLimit(typ byte) int {
	switch typ {
	case FrameControl:
		return MaxControlFrame
	case FrameData, FrameSnapshot:
		return MaxDataFrame + OffsetLen
	case FrameRing, FrameHead:
		return OffsetLen
	}
	return -1
}

// ReadFrame reads one frame into buf (grown as needed, up to the type's
// limit) and returns the type and payload, which aliases buf. An unknown type
// wraps ErrFrameType and an oversized one ErrFrameTooLarge; after either the
// stream is out of step.
func ReadFrame(r io.Reader, buf []byte) (typ byte, payload []byte, err error) {
	typ, n, err := ReadFrameHeader(r)
	if err != nil {
		return typ, nil, err
	}
	if err := ReadPayload(r, &buf, n); err != nil {
		return typ, nil, err
	}
	return typ, buf, nil
}

// ReadFrameHeader reads a frame header and checks it: the type, and the
// payload length against the type's limit.
func ReadFrameHeader(r io.Reader) (typ byte, n int, err error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, err
	}
	typ = h[0]
	size := binary.BigEndian.Uint32(h[1:])
	limit := FrameLimit(typ)
	if limit < 0 {
		return typ, 0, fmt.Errorf("frame type %q: %w (want 'J', 'D', 'S', 'M' or 'H')", typ, ErrFrameType)
	}
	if uint64(size) > uint64(limit) {
		return typ, 0, fmt.Errorf("frame type %q of %d bytes: %w (limit %d)", typ, size, ErrFrameTooLarge, limit)
	}
	return typ, int(size), nil
}

// ReadPayload reads n bytes into *buf, grown as needed.
func ReadPayload(r io.Reader, buf *[]byte, n int) error {
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	*buf = (*buf)[:n]
	return ReadFull(r, *buf)
}

// ReadFull reads all of p, the rest of a frame whose header was read: an
// end of the stream there is io.ErrUnexpectedEOF.
func ReadFull(r io.Reader, p []byte) error {
	_, err := io.ReadFull(r, p)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// DecodeMessage decodes one control payload strictly: one JSON object, no
// unknown fields, nothing after it.
func DecodeMessage(p []byte) (*Message, error) {
	var m Message
	if err := DecodeStrict(p, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// DecodeStrict decodes exactly one JSON value into v, rejecting unknown
// fields and trailing data.
func DecodeStrict(p []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// EncodeControl renders m as a complete 'J' frame.
func EncodeControl(m *Message) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode control message: %w", err)
	}
	if len(b) > MaxControlFrame {
		return nil, fmt.Errorf("encode control message: %d bytes: %w", len(b), ErrFrameTooLarge)
	}
	return FrameBytes(FrameControl, b), nil
}

// FrameBytes returns header+payload as one slice.
func FrameBytes(typ byte, payload []byte) []byte {
	out := make([]byte, HeaderLen+len(payload))
	out[0] = typ
	binary.BigEndian.PutUint32(out[1:], uint32(len(payload)))
	copy(out[HeaderLen:], payload)
	return out
}

// OffsetHeader returns the frame header and offset prefix of a data or
// snapshot frame carrying n bytes.
func OffsetHeader(typ byte, off uint64, n int) [HeaderLen + OffsetLen]byte {
	var h [HeaderLen + OffsetLen]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(OffsetLen+n))
	binary.BigEndian.PutUint64(h[HeaderLen:], off)
	return h
}
