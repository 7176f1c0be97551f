package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// The terminal WebSocket, GET /api/sessions/{name}/term, carries a
// session's screen to a page and, once the page takes control, its keys
// and size back. It is `legion attach` for a browser: the server attaches
// through the helper (which hands over the worker's socket), sends the
// screen snapshot, then the output as it comes, and follows the session
// across restarts of its agent.
//
// Server to page:
//
//   - binary messages: terminal output; the first byte is 'S' (a screen
//     snapshot: reset the terminal, then write the rest) or 'D' (output to
//     write as it is);
//   - text messages, JSON objects by "type":
//     {"type":"attached","session":{...},"cols":C,"rows":R,"control":B}
//     after each attach (C×R is the PTY's size);
//     {"type":"control"} once the page has control;
//     {"type":"exit","run":N,"code":C,"signal":S,"reason":R} when a run of
//     the agent ends; {"type":"waiting"} while systemd has yet to restart
//     it; {"type":"ended","session":{...}} when the session is over (the
//     connection then closes normally);
//     {"type":"error","error":"..."} for a refusal that leaves the
//     connection open (input while read-only).
//
// Page to server, text messages only, each a JSON object:
// {"type":"control"}, then {"type":"input","data":"<keys>"} and
// {"type":"resize","cols":C,"rows":R}. The terminal is read-only until
// "control": the attachment is read-only at the worker too, and input
// before it is dropped with an error message. A message that is not
// JSON, of an unknown type, binary, over 64 KiB, or a resize out of
// range closes that connection with a close code and a reason saying
// what was wrong; the worker and the helper never see it.

// termReadLimit bounds one message from a page.
const termReadLimit = ReadLimit

// Terminal sizes a page may ask for.
const (
	minTermSize = 2
	maxTermSize = 1000
)

// termWriteTimeout bounds one message to a page: a page that reads
// nothing for this long is dropped (the session goes on).
const termWriteTimeout = 30 * time.Second

// termRestartPoll is how often a terminal whose agent ended asks whether
// systemd started it again (attachterm's restartPoll).
const termRestartPoll = 250 * time.Millisecond

// termMessage is a message of the page.
type termMessage struct {
	Type string `json:"type"`
	Data string `json:"data,omitempty"`
	Cols int    `json:"cols,omitempty"`
	Rows int    `json:"rows,omitempty"`
}

// closeError closes a terminal connection with a WebSocket status and a
// reason for the page.
type closeError struct {
	status websocket.StatusCode
	reason string
}

func (e *closeError) Error() string { return e.reason }

// parseTermMessage decodes one message of the page; a bad one is a
// *closeError saying what was wrong.
func parseTermMessage(typ websocket.MessageType, p []byte) (termMessage, error) {
	var m termMessage
	if typ != websocket.MessageText {
		return m, &closeError{websocket.StatusUnsupportedData, "binary messages are not accepted: send JSON text"}
	}
	if err := json.Unmarshal(p, &m); err != nil {
		return m, &closeError{websocket.StatusInvalidFramePayloadData, "malformed JSON: " + err.Error()}
	}
	switch m.Type {
	case "control":
	case "input":
		if m.Data == "" {
			return m, &closeError{websocket.StatusPolicyViolation, `input without "data"`}
		}
	case "resize":
		if m.Cols < minTermSize || m.Cols > maxTermSize || m.Rows < minTermSize || m.Rows > maxTermSize {
			return m, &closeError{websocket.StatusPolicyViolation, fmt.Sprintf("resize to %dx%d: want cols and rows from %d to %d", m.Cols, m.Rows, minTermSize, maxTermSize)}
		}
	default:
		return m, &closeError{websocket.StatusPolicyViolation, fmt.Sprintf("unknown message type %q: want control, input or resize", m.Type)}
	}
	return m, nil
}

func (s *sessionAPI) handleTerm(w http.ResponseWriter, r *http.Request) {
	name, ok := sessionName(w, r)
	if !ok {
		return
	}
	ws, err := s.accept(w, r)
	if err != nil {
		return // Accept answered the request
	}
	ws.SetReadLimit(termReadLimit)
	t := &termConn{api: s, name: name, ws: ws}
	err = t.run(r.Context())
	var ce *closeError
	switch {
	case errors.Is(err, errPageGone):
		ws.CloseNow()
	case errors.As(err, &ce):
		s.log.Info("terminal closed", "session", name, "reason", ce.reason)
		ws.Close(ce.status, clipReason(ce.reason))
	case err != nil:
		s.log.Info("terminal ended", "session", name, "err", err)
		ws.Close(websocket.StatusInternalError, clipReason(err.Error()))
	default:
		ws.Close(websocket.StatusNormalClosure, "session ended")
	}
}

// clipReason shortens a close reason to what a close frame holds (123 bytes),
// at a rune boundary.
func clipReason(s string) string {
	const max = 123
	if len(s) <= max {
		return s
	}
	s = s[:max-3]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// termConn is one page's terminal.
type termConn struct {
	api  *sessionAPI
	name string
	ws   *websocket.Conn

	c          *api.Client   // the helper; dialed again when it restarted
	wc         *proto.Client // the worker, through the helper's descriptor
	relayed    bool          // that descriptor is a relay (api.AttachResult.Relayed): no mapped ring
	epoch      string        // the worker's output epoch (AttachResult.Epoch)
	offset     uint64        // the next output byte the page has not got
	control    bool          // the page took control
	exit       *proto.ExitInfo
	lastAttach proto.AttachResult
	desynced   bool // the worker dropped us for falling behind
	waiting    bool // "waiting" was sent for this restart
}

// errPageGone ends run when the page closed the connection (or it broke).
var errPageGone = errors.New("the page went away")

// run serves the connection until the session ends (nil), the page goes
// away (errPageGone), or the page sends a bad message (a *closeError).
func (t *termConn) run(ctx context.Context) error {
	stop := make(chan struct{})
	defer close(stop)
	defer func() {
		t.closeWorker()
		if t.c != nil {
			t.c.Close()
		}
	}()

	// The reader ends when a read fails: the page closed, a bad frame, ctx
	// ended, or handleTerm closed the connection after run. (Its reads do
	// not use a context that run cancels: the library closes the
	// connection at once when a read's context ends, before handleTerm
	// could send its close status and reason.)
	msgs := make(chan termMessage)
	readErr := make(chan error, 1)
	go func() {
		for {
			typ, p, err := t.ws.Read(ctx)
			if err == nil {
				var m termMessage
				if m, err = parseTermMessage(typ, p); err == nil {
					select {
					case msgs <- m:
						continue
					case <-stop:
						return
					}
				}
			}
			readErr <- err
			return
		}
	}()

	if done, err := t.reattach(ctx); done || err != nil {
		return err
	}
	var poll <-chan time.Time
	if t.wc == nil {
		poll = time.After(termRestartPoll)
	}
	for {
		var events <-chan proto.Event
		if t.wc != nil {
			events = t.wc.Events()
		}
		select {
		case err := <-readErr:
			var ce *closeError
			if errors.As(err, &ce) {
				return err
			}
			return errPageGone // the session goes on
		case m := <-msgs:
			if err := t.message(ctx, m); err != nil {
				return err
			}
		case ev, ok := <-events:
			if !ok {
				done, err := t.connectionEnded(ctx)
				if done || err != nil {
					return err
				}
				if t.wc == nil {
					poll = time.After(termRestartPoll)
				}
				continue
			}
			if err := t.event(ctx, ev); err != nil {
				return err
			}
		case <-poll:
			poll = nil
			done, err := t.reattach(ctx)
			if done || err != nil {
				return err
			}
			if t.wc == nil {
				poll = time.After(termRestartPoll)
			}
		}
	}
}

// message acts on one message of the page.
func (t *termConn) message(ctx context.Context, m termMessage) error {
	switch m.Type {
	case "control":
		if t.control {
			return nil
		}
		t.control = true
		if t.wc != nil {
			// Attach again on the same connection, writable, from the
			// next byte the page lacks: the page's screen stays.
			if err := t.attachWorker(ctx, t.wc, &t.offset); err != nil {
				return fmt.Errorf("take control of %s: %w", t.name, err)
			}
		}
		return t.send(ctx, map[string]string{"type": "control"})
	case "input":
		if !t.control {
			return t.send(ctx, map[string]string{"type": "error", "error": "the terminal is read-only: take control first ({\"type\":\"control\"}); the keys were not sent"})
		}
		if t.wc != nil {
			t.wc.SendInput([]byte(m.Data)) // a failure shows as the connection ending
		}
	case "resize":
		if t.control && t.wc != nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			t.wc.Resize(rctx, m.Cols, m.Rows) // a refusal (session ended) shows as the connection ending
			cancel()
		}
	}
	return nil
}

// event passes one event of the worker on to the page.
func (t *termConn) event(ctx context.Context, ev proto.Event) error {
	switch ev.Kind {
	case proto.EventKindSnapshot:
		t.offset = ev.Offset
		return t.sendOutput(ctx, 'S', ev.Data)
	case proto.EventKindOutput:
		data, end := ev.Data, ev.Offset+uint64(len(ev.Data))
		if end <= t.offset {
			return nil // the page has it (sent again by a replay)
		}
		if ev.Offset < t.offset {
			data = data[t.offset-ev.Offset:]
		}
		t.offset = end
		return t.sendOutput(ctx, 'D', data)
	case proto.EventKindExit:
		t.exit = ev.Exit
	case proto.EventKindDesync:
		t.desynced = true
	}
	return nil
}

// sendOutput writes output to the page as a binary message led by kind.
func (t *termConn) sendOutput(ctx context.Context, kind byte, data []byte) error {
	msg := make([]byte, 1+len(data))
	msg[0] = kind
	copy(msg[1:], data)
	wctx, cancel := context.WithTimeout(ctx, termWriteTimeout)
	defer cancel()
	if err := t.ws.Write(wctx, websocket.MessageBinary, msg); err != nil {
		return fmt.Errorf("write to the page: %w", err)
	}
	return nil
}

// send writes v to the page as a JSON text message.
func (t *termConn) send(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, termWriteTimeout)
	defer cancel()
	if err := t.ws.Write(wctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("write to the page: %w", err)
	}
	return nil
}

// connectionEnded handles the end of the worker connection: the exit is
// told to the page, then the session is asked about (see reattach).
func (t *termConn) connectionEnded(ctx context.Context) (done bool, err error) {
	exit := t.exit
	t.closeWorker()
	if exit != nil {
		err := t.send(ctx, map[string]any{"type": "exit", "run": exit.Run, "code": exit.Code, "signal": exit.Signal, "reason": exit.Reason})
		if err != nil {
			return true, err
		}
		t.exit = nil
	}
	return t.reattach(ctx)
}

// reattach asks the helper about the session: running → attach (from the
// page's offset after a desync, else a snapshot of the current run);
// starting → wait; ended or gone → tell the page and finish.
func (t *termConn) reattach(ctx context.Context) (done bool, err error) {
	var sess api.Session
	err = t.helper(ctx, func(c *api.Client) error {
		var err error
		sess, err = c.Status(ctx, t.name)
		return err
	})
	if err != nil {
		if errors.Is(err, api.ErrNotFound) {
			return true, &closeError{websocket.StatusNormalClosure, "no session " + t.name}
		}
		return true, fmt.Errorf("session %s: %w", t.name, err)
	}
	switch {
	case sess.State.Ended():
		return true, t.send(ctx, map[string]any{"type": "ended", "session": sess})
	case sess.State == api.StateStarting:
		if !t.waiting {
			t.waiting = true
			return false, t.send(ctx, map[string]string{"type": "waiting"})
		}
		return false, nil
	}
	var from *uint64
	if t.desynced {
		off := t.offset
		from = &off
	}
	var conn net.Conn
	var res api.AttachResult
	err = t.helper(ctx, func(c *api.Client) error {
		var err error
		conn, res, err = c.Attach(ctx, api.AttachArgs{Name: t.name, ReadOnly: !t.control})
		return err
	})
	if err != nil {
		return false, nil // between runs: try again at the next poll
	}
	wc := proto.NewClient(conn) // the helper said hello on it
	t.relayed = res.Relayed
	if err := t.attachWorker(ctx, wc, from); err != nil {
		wc.Close()
		return false, nil
	}
	t.wc, t.desynced, t.waiting = wc, false, false
	ar := t.lastAttach
	return false, t.send(ctx, map[string]any{"type": "attached", "session": sess, "cols": ar.Cols, "rows": ar.Rows, "control": t.control})
}

// attachWorker attaches wc from offset (nil: a snapshot), read-only
// unless the page has control.
func (t *termConn) attachWorker(ctx context.Context, wc *proto.Client, from *uint64) error {
	p := proto.AttachParams{ReadOnly: !t.control, Mapped: !t.relayed}
	if from != nil {
		off := *from
		p.Offset, p.Epoch = &off, t.epoch
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ar, err := wc.Attach(actx, p)
	if err != nil {
		return err
	}
	t.epoch, t.lastAttach = ar.Epoch, *ar
	if ar.Mode == proto.AttachReplay {
		t.offset = ar.Offset
	}
	if ar.Exit != nil {
		t.exit = ar.Exit
	}
	return nil
}

// helper runs call on the helper connection, dialing one first; when
// the connection broke (the helper restarted), it dials again and
// retries once.
func (t *termConn) helper(ctx context.Context, call func(c *api.Client) error) error {
	if t.c == nil {
		c, err := t.api.dial(ctx)
		if err != nil {
			return err
		}
		t.c = c
	}
	err := call(t.c)
	var e *api.Error
	if err == nil || errors.As(err, &e) || ctx.Err() != nil {
		return err
	}
	t.c.Close()
	t.c = nil
	c, derr := t.api.dial(ctx)
	if derr != nil {
		return errors.Join(err, derr)
	}
	t.c = c
	return call(t.c)
}

func (t *termConn) closeWorker() {
	if t.wc != nil {
		t.wc.Close()
		t.wc = nil
	}
}
