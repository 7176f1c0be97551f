package ptyworker

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legion-dev/legion/internal/unixsock"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// Server tuning.
const (
	helloTimeout   = 10 * time.Second // a connection must say hello within this
	ctrlQueueLen   = 256              // control messages queued per connection
	dropDeadline   = 5 * time.Second  // write deadline once a client is dropped
	flushDeadline  = time.Second      // write deadline for last messages on close
	maxConnections = 64
)

// listen creates the session's socket with unixsock.Listen: 0600 in its
// 0700 directory, replacing a stale socket file but refusing when a live
// worker answers on it.
func listen(path string) (*net.UnixListener, error) {
	ln, err := unixsock.Listen(path)
	if errors.Is(err, unixsock.ErrInUse) {
		return nil, fmt.Errorf("listen on %s: another worker is serving this session: %w", path, err)
	}
	return ln, err
}

// serve accepts connections until ln is closed.
func (w *worker) serve(ln *net.UnixListener) {
	for {
		nc, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			w.logOnce("accept", "accept failed", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		c := w.newConn(nc)
		if c == nil {
			continue
		}
		// Each connection runs a reader and a writer goroutine: the reader
		// exits when the connection fails or is closed, the writer when the
		// connection is shut down (c.done) and closes it.
		go c.readLoop()
		go c.writeLoop()
	}
}

// conn is one client connection.
type conn struct {
	w   *worker
	nc  *net.UnixConn
	log *slog.Logger

	ctrl     chan ctrlItem
	done     chan struct{} // closed by shutdown
	doneOnce sync.Once

	// Read-side state, owned by readLoop.
	authed   bool
	hook     bool // a hook connection: hook calls only
	ownAgent bool // the peer runs in this worker's own unit: a hook connection or nothing
	readOnly bool
	sub      *subscriber // current attachment

	closing  atomic.Bool // an answer that ends the connection is queued: read no more
	watching atomic.Bool // gets state and exit events
	attached atomic.Bool // gets exit events; has an active subscriber
	exitSent atomic.Bool // the exit event was written
}

// ctrlItem is one step for the writer, done in queue order.
type ctrlItem struct {
	ring       bool        // first an 'M' frame with the ring's memfd, from ringOff
	ringOff    uint64      //
	frame      []byte      // a complete 'J' frame, or nil
	flush      bool        // first send the attachment's output up to flushTo
	flushTo    uint64      //
	snapshot   []byte      // after frame: an 'S' frame with this screen
	snapOff    uint64      //
	activate   *subscriber // after that: send output of this subscriber
	deactivate bool        // stop sending output
	exit       bool        // this is the exit event
	closeAfter bool        // shut the connection down after this item
}

func (w *worker) newConn(nc *net.UnixConn) *conn {
	c := &conn{
		w: w, nc: nc, log: w.log,
		ctrl: make(chan ctrlItem, ctrlQueueLen),
		done: make(chan struct{}),
	}
	w.mu.Lock()
	tooMany := len(w.conns) >= maxConnections
	if !tooMany {
		w.conns[c] = struct{}{}
	}
	w.mu.Unlock()
	if tooMany {
		nc.SetWriteDeadline(time.Now().Add(flushDeadline))
		if f, err := proto.EncodeControl(&proto.Message{Error: &proto.RPCError{Code: proto.CodeInternalError, Message: fmt.Sprintf("session %s: too many connections (%d)", w.spec.SessionID, maxConnections)}}); err == nil {
			nc.Write(f)
		}
		nc.Close()
		return nil
	}
	return c
}

// shutdown ends the connection: the writer sends what is queued and closes
// it, which ends the reader. Writes get flushDeadline from now on, also one
// in progress: a peer that does not read cannot hold the writer (and the
// connection) forever.
func (c *conn) shutdown() {
	c.doneOnce.Do(func() {
		c.nc.SetWriteDeadline(time.Now().Add(flushDeadline))
		close(c.done)
	})
}

// enqueue queues an item without blocking; a connection whose queue is full
// is not reading and is shut down.
func (c *conn) enqueue(it ctrlItem) {
	select {
	case c.ctrl <- it:
	default:
		c.log.Warn("client is not reading its control messages; dropping it")
		c.shutdown()
	}
}

func (c *conn) readLoop() {
	defer c.w.dropConn(c)
	defer c.shutdown()
	cred, err := unixsock.Peer(c.nc, c.w.allowedUIDs...)
	if errors.Is(err, unixsock.ErrPeerNotAllowed) {
		c.log.Warn("refused a connection from another user", "peer_uid", cred.UID)
		c.replyErr(0, proto.CodeUnauthorized, fmt.Sprintf("peer uid %d may not use session %s", cred.UID, c.w.spec.SessionID), true)
		return
	}
	if err != nil {
		c.replyErr(0, proto.CodeInternalError, err.Error(), true)
		return
	}
	if msg := c.checkAgentPeer(cred.PID); msg != "" {
		c.log.Warn("refused a connection from an agent of a session", "peer_pid", cred.PID, "why", msg)
		// Its hello is read first: a close with it unread would reset the
		// connection, and the client would never see why.
		// The answer is to it, so that the client's hello gets it.
		var id uint64
		c.nc.SetReadDeadline(time.Now().Add(helloTimeout))
		if typ, n, err := proto.ReadFrameHeader(c.nc); err == nil && typ == proto.FrameControl && n <= 64<<10 {
			var payload []byte
			if proto.ReadPayload(c.nc, &payload, n) == nil {
				id = bestEffortID(payload)
			}
		}
		c.replyErr(id, proto.CodeUnauthorized, msg, true)
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(helloTimeout))
	buf := make([]byte, 4096)
	for {
		typ, n, err := proto.ReadFrameHeader(c.nc)
		if err == nil && typ != proto.FrameControl && !c.authed {
			// Refused on its header: no payload (a data frame's may be
			// 1 MiB) is taken in before hello.
			c.replyErr(0, proto.CodeUnauthorized, "the first request must be hello", true)
			return
		}
		payload := buf
		if err == nil {
			err = proto.ReadPayload(c.nc, &payload, n)
		}
		if err != nil {
			if errors.Is(err, proto.ErrFrameType) || errors.Is(err, proto.ErrFrameTooLarge) {
				c.replyErr(0, proto.CodeBadRequest, err.Error(), true)
			} else if errors.Is(err, os.ErrDeadlineExceeded) && !c.authed {
				c.replyErr(0, proto.CodeUnauthorized, fmt.Sprintf("no hello within %s", helloTimeout), true)
			}
			return
		}
		if cap(payload) > cap(buf) && cap(payload) <= 64<<10 {
			buf = payload[:0]
		}
		switch typ {
		case proto.FrameControl:
			c.handleControl(payload)
		case proto.FrameData:
			c.handleInputFrame(payload)
		case proto.FrameSnapshot, proto.FrameRing, proto.FrameHead:
			c.replyErr(0, proto.CodeBadRequest, fmt.Sprintf("%q frames only go from the worker to clients", typ), false)
		}
		if c.closing.Load() {
			return // the answer says the connection ends; nothing after it is served
		}
		select {
		case <-c.done:
			return
		default:
		}
	}
}

func (c *conn) reply(id uint64, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		c.replyErr(id, proto.CodeInternalError, "encode result: "+err.Error(), false)
		return
	}
	f, err := proto.EncodeControl(&proto.Message{ID: id, Result: b})
	if err != nil {
		c.replyErr(id, proto.CodeInternalError, err.Error(), false)
		return
	}
	c.enqueue(ctrlItem{frame: f})
}

func (c *conn) replyErr(id uint64, code, msg string, closeAfter bool) {
	c.replyRPCErr(id, &proto.RPCError{Code: code, Message: msg}, closeAfter)
}

func (c *conn) replyRPCErr(id uint64, e *proto.RPCError, closeAfter bool) {
	f, err := proto.EncodeControl(&proto.Message{ID: id, Error: e})
	if err != nil {
		f, _ = proto.EncodeControl(&proto.Message{ID: id, Error: &proto.RPCError{Code: proto.CodeInternalError, Message: "encode error"}})
	}
	if closeAfter {
		c.closing.Store(true)
	}
	c.enqueue(ctrlItem{frame: f, closeAfter: closeAfter})
}

// methods lists the methods for "unknown method" errors.
var methods = []string{proto.MethodHello, proto.MethodInfo, proto.MethodAttach, proto.MethodDetach, proto.MethodInput, proto.MethodResize, proto.MethodSignal, proto.MethodRemove, proto.MethodHealth, proto.MethodWatch, proto.MethodHook, proto.MethodRespond, proto.MethodEnd, proto.MethodIssue}

func (c *conn) handleControl(p []byte) {
	m, err := proto.DecodeMessage(p)
	if err != nil {
		c.replyErr(bestEffortID(p), proto.CodeBadRequest, "malformed control message: "+err.Error(), false)
		return
	}
	switch {
	case m.Event != "" || m.Result != nil || m.Error != nil || m.Data != nil:
		c.replyErr(m.ID, proto.CodeBadRequest, "clients send requests only (id, method, params)", false)
		return
	case m.Method == "":
		c.replyErr(m.ID, proto.CodeBadRequest, "request without a method", false)
		return
	case !slices.Contains(methods, m.Method):
		c.replyErr(m.ID, proto.CodeBadRequest, fmt.Sprintf("unknown method %q (want one of %s)", clip(m.Method, 64), strings.Join(methods, ", ")), false)
		return
	case !c.authed && m.Method != proto.MethodHello:
		c.replyErr(m.ID, proto.CodeUnauthorized, "the first request must be hello", false)
		return
	case c.hook && m.Method != proto.MethodHook && m.Method != proto.MethodIssue && m.Method != proto.MethodHello:
		c.replyErr(m.ID, proto.CodeUnauthorized, fmt.Sprintf("a hook connection may only call %s and %s, not %s", proto.MethodHook, proto.MethodIssue, m.Method), false)
		return
	case !c.hook && (m.Method == proto.MethodHook || m.Method == proto.MethodIssue):
		c.replyErr(m.ID, proto.CodeUnauthorized, m.Method+" is for hook connections (hello with the agent's LEGION_HOOK_TOKEN)", false)
		return
	}
	c.dispatch(m)
}

// clip shortens what a peer sent for an error message that quotes it.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// bestEffortID digs the id out of a request that failed strict decoding
// (from the first JSON value, if it decodes at all); 0 when there is none.
func bestEffortID(p []byte) uint64 {
	var v struct {
		ID uint64 `json:"id"`
	}
	if json.NewDecoder(bytes.NewReader(p)).Decode(&v) != nil {
		return 0
	}
	return v.ID
}

// params decodes a request's params strictly into v; missing params decode
// as {}.
func params(m *proto.Message, v any) *proto.RPCError {
	raw := m.Params
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := proto.DecodeStrict(raw, v); err != nil {
		return &proto.RPCError{Code: proto.CodeBadRequest, Message: fmt.Sprintf("%s params: %v", m.Method, err)}
	}
	return nil
}

func (c *conn) dispatch(m *proto.Message) {
	w := c.w
	var e *proto.RPCError
	switch m.Method {
	case proto.MethodHello:
		var p proto.HelloParams
		if e = params(m, &p); e == nil {
			var res *proto.HelloResult
			res, e = c.hello(&p)
			if e == nil {
				c.reply(m.ID, res)
				return
			}
			c.replyRPCErr(m.ID, e, e.Code == proto.CodeUnauthorized || e.Code == proto.CodeSessionNotFound)
			return
		}
	case proto.MethodInfo:
		var p struct{}
		if e = params(m, &p); e == nil {
			c.reply(m.ID, w.info())
			return
		}
	case proto.MethodHealth:
		var p struct{}
		if e = params(m, &p); e == nil {
			c.reply(m.ID, w.health())
			return
		}
	case proto.MethodWatch:
		var p struct{}
		if e = params(m, &p); e == nil {
			c.watch(m.ID)
			return
		}
	case proto.MethodAttach:
		var p proto.AttachParams
		if e = params(m, &p); e == nil {
			if e = c.attach(m.ID, &p); e == nil {
				return
			}
		}
	case proto.MethodDetach:
		var p struct{}
		if e = params(m, &p); e == nil {
			c.detach()
			f, err := proto.EncodeControl(&proto.Message{ID: m.ID, Result: json.RawMessage("{}")})
			if err == nil {
				c.enqueue(ctrlItem{frame: f, deactivate: true})
				return
			}
			e = &proto.RPCError{Code: proto.CodeInternalError, Message: err.Error()}
		}
	case proto.MethodInput:
		var p proto.InputParams
		if e = params(m, &p); e == nil {
			if e = c.input(p.Data); e == nil {
				c.reply(m.ID, struct{}{})
				return
			}
		}
	case proto.MethodResize:
		var p proto.ResizeParams
		if e = params(m, &p); e == nil {
			if e = w.resize(p.Cols, p.Rows); e == nil {
				c.reply(m.ID, struct{}{})
				return
			}
		}
	case proto.MethodSignal:
		var p proto.SignalParams
		if e = params(m, &p); e == nil {
			var res *proto.SignalResult
			if res, e = w.signal(&p); e == nil {
				c.reply(m.ID, res)
				return
			}
		}
	case proto.MethodRemove:
		var p struct{}
		if e = params(m, &p); e == nil {
			if e = w.requestRemove(); e == nil {
				c.reply(m.ID, struct{}{})
				return
			}
		}
	case proto.MethodHook:
		c.handleHook(m)
		return
	case proto.MethodIssue:
		c.handleIssue(m)
		return
	case proto.MethodRespond:
		var p proto.RespondParams
		if e = params(m, &p); e == nil {
			var res *proto.RespondResult
			if res, e = w.respond(&p); e == nil {
				c.reply(m.ID, res)
				return
			}
		}
	case proto.MethodEnd:
		var p proto.EndParams
		if e = params(m, &p); e == nil {
			if e = w.requestEnd(p.Reason); e == nil {
				c.reply(m.ID, struct{}{})
				return
			}
		}
	}
	c.replyRPCErr(m.ID, e, false)
}

// tokenEqual compares tokens in constant time (over their hashes, so the
// length leaks nothing either).
func tokenEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func (c *conn) hello(p *proto.HelloParams) (*proto.HelloResult, *proto.RPCError) {
	w := c.w
	c.authed, c.hook = false, false // a failed hello leaves the connection unauthenticated
	if p.RPCMajor != proto.RPCMajor || p.RPCMinor > proto.RPCMinor || p.RPCMinor < proto.RPCMinorMin {
		data, _ := json.Marshal(proto.VersionData{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, RPCMinorMin: proto.RPCMinorMin})
		return nil, &proto.RPCError{
			Code:    proto.CodeUnsupportedVersion,
			Message: fmt.Sprintf("client speaks rpc %d.%d; this worker speaks %d.%d and accepts %d.%d to %d.%d", p.RPCMajor, p.RPCMinor, proto.RPCMajor, proto.RPCMinor, proto.RPCMajor, proto.RPCMinorMin, proto.RPCMajor, proto.RPCMinor),
			Data:    data,
		}
	}
	if p.SessionID != "" && p.SessionID != w.spec.SessionID {
		return nil, &proto.RPCError{Code: proto.CodeSessionNotFound, Message: fmt.Sprintf("this worker hosts session %s, not %s", w.spec.SessionID, p.SessionID)}
	}
	// The hook token is the agent's: it is the run's, and opens a hook
	// connection only (no daemon instance is asked of the agent).
	if p.RPCMinor >= 1 && w.hookToken != "" && tokenEqual(p.Token, w.hookToken) {
		c.authed, c.hook = true, true
		return c.helloResult(), nil
	}
	if c.ownAgent {
		c.log.Warn("a process of the session's own unit tried the control token", "client", p.Client)
		return nil, &proto.RPCError{Code: proto.CodeUnauthorized, Message: "a process of session " + w.spec.SessionID + "'s own unit (its agent) may only open a hook connection, with LEGION_HOOK_TOKEN"}
	}
	if !tokenEqual(p.Token, w.spec.Token) {
		c.log.Warn("hello with a wrong token", "client", p.Client)
		return nil, &proto.RPCError{Code: proto.CodeUnauthorized, Message: "wrong token for session " + w.spec.SessionID}
	}
	if p.DaemonInstanceID != w.spec.DaemonInstanceID {
		c.log.Warn("hello from another daemon instance", "daemon_instance_id", p.DaemonInstanceID, "client", p.Client)
		return nil, &proto.RPCError{Code: proto.CodeUnauthorized, Message: fmt.Sprintf("session %s belongs to daemon instance %s, not %s", w.spec.SessionID, w.spec.DaemonInstanceID, p.DaemonInstanceID)}
	}
	c.authed = true
	return c.helloResult(), nil
}

// helloResult is the answer to a hello that succeeded.
func (c *conn) helloResult() *proto.HelloResult {
	w := c.w
	c.nc.SetReadDeadline(time.Time{}) // attach and watch streams, and held hook calls, are long-lived
	return &proto.HelloResult{
		RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor,
		WorkerVersion:    w.opts.Version,
		DaemonInstanceID: w.spec.DaemonInstanceID,
		SessionID:        w.spec.SessionID,
		Name:             w.spec.Name,
		WorkerPID:        os.Getpid(),
		Epoch:            w.lease.Nonce,
	}
}

func (c *conn) attach(id uint64, p *proto.AttachParams) *proto.RPCError {
	w := c.w
	if (p.Cols == 0) != (p.Rows == 0) || p.Cols < 0 || p.Rows < 0 || p.Cols > proto.MaxTermDim || p.Rows > proto.MaxTermDim {
		return &proto.RPCError{Code: proto.CodeBadRequest, Message: fmt.Sprintf("attach size %dx%d: want both 1..%d or neither", p.Cols, p.Rows, proto.MaxTermDim)}
	}
	if p.Cols > 0 {
		if e := w.resize(p.Cols, p.Rows); e != nil && e.Code != proto.CodeSessionNotRunning {
			return e
		}
	}
	c.detach()
	// A mapped client reads the ring itself and sees for itself when it
	// fell behind, so the worker never drops it.
	mapped := p.Mapped && w.out.ring.FD() >= 0
	limit := uint64(w.clientQueue)
	if mapped {
		limit = 0
	}
	sub := newSubscriber(limit, func() { c.nc.SetWriteDeadline(time.Now().Add(dropDeadline)) })
	sub.mapped = mapped
	res := proto.AttachResult{Mapped: mapped}
	var snap []byte
	oldest, head, _ := w.out.bounds()
	if p.Offset != nil && (p.Epoch == "" || p.Epoch == w.lease.Nonce) && *p.Offset >= oldest && *p.Offset <= head {
		res.Mode, res.Offset = proto.AttachReplay, *p.Offset
		w.out.subscribe(sub, res.Offset)
	} else {
		res.Mode = proto.AttachSnapshot
		snap, res.Offset = w.scr.snapshot(w.out, sub)
	}
	c.sub = sub
	c.readOnly = p.ReadOnly
	res.Head = w.out.head()
	res.Epoch = w.lease.Nonce

	// Under w.mu, so that finish either sees this attachment or this
	// attachment sees the exit.
	w.mu.Lock()
	defer w.mu.Unlock()
	res.Cols, res.Rows = w.cols, w.rows
	res.Running = w.state == proto.StateRunning
	res.Exit = w.exit
	b, err := json.Marshal(res)
	if err != nil {
		w.out.unsubscribe(sub)
		return &proto.RPCError{Code: proto.CodeInternalError, Message: "encode attach result: " + err.Error()}
	}
	f, err := proto.EncodeControl(&proto.Message{ID: id, Result: b})
	if err != nil {
		w.out.unsubscribe(sub)
		return &proto.RPCError{Code: proto.CodeInternalError, Message: err.Error()}
	}
	it := ctrlItem{frame: f, activate: sub, ring: mapped, ringOff: res.Offset}
	if res.Mode == proto.AttachSnapshot {
		it.snapshot, it.snapOff = snap, res.Offset
	}
	c.enqueue(it)
	c.attached.Store(true)
	if w.exit != nil {
		c.enqueueExit(w.exit)
	}
	return nil
}

// watch subscribes c to state and exit events and answers with the
// session's info. As with attach, the subscription and finish meet under
// w.mu: a watch that comes after the agent ended (the worker still serves
// while it lingers) gets the exit event after its answer, so linger does
// not wait for it in vain. The info is read before the lock (it reads
// files); if the run changed meanwhile it is read again.
func (c *conn) watch(id uint64) {
	w := c.w
	for {
		in := w.info()
		w.mu.Lock()
		if in.State != w.state || in.Run != w.run || in.Exit != w.exit {
			w.mu.Unlock()
			continue
		}
		c.watching.Store(true)
		c.reply(id, in)
		if w.exit != nil {
			c.enqueueExit(w.exit)
		}
		w.mu.Unlock()
		return
	}
}

// detach ends the current attachment, if any.
func (c *conn) detach() {
	if c.sub != nil {
		c.w.out.unsubscribe(c.sub)
		c.sub = nil
	}
	c.attached.Store(false)
	c.readOnly = false
}

func (c *conn) input(p []byte) *proto.RPCError {
	if c.hook {
		return &proto.RPCError{Code: proto.CodeUnauthorized, Message: "a hook connection may not type into the session"}
	}
	if c.sub != nil && c.readOnly {
		return &proto.RPCError{Code: proto.CodeBadRequest, Message: "this attachment is read-only"}
	}
	return c.w.input(p)
}

// handleInputFrame writes a client's 'D' frame to the PTY; errors go back
// as id-0 error responses. readLoop takes data frames only after hello.
func (c *conn) handleInputFrame(p []byte) {
	if e := c.input(p); e != nil {
		c.replyRPCErr(0, e, false)
	}
}

// enqueueExit queues the exit event after the output up to the exit offset.
func (c *conn) enqueueExit(e *proto.ExitInfo) {
	f, err := eventFrame(proto.EventExit, e)
	if err != nil {
		c.log.Error("encode exit event", "err", err)
		return
	}
	c.enqueue(ctrlItem{frame: f, flush: true, flushTo: e.Offset, exit: true})
}

func eventFrame(name string, data any) ([]byte, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", name, err)
	}
	return proto.EncodeControl(&proto.Message{Event: name, Data: b})
}

// checkAgentPeer says why the process pid may not use this worker ("" when
// it may): one in another worker's unit (another session's agent) never
// may; one in this worker's own unit (its agent) may open a hook
// connection only (c.ownAgent). A peer whose cgroup cannot be read may
// not, but for one outside the worker's PID namespace (SO_PEERCRED's pid
// 0) when the worker runs in a pod (self_watchdog: no systemd, no worker
// units): each session there is a pod of its own and its socket is on the
// pod's private emptyDir, so no other session's agent can be the peer,
// and its agent runs in the worker's namespace, with a pid.
func (c *conn) checkAgentPeer(pid int) string {
	if pid == 0 && c.w.spec.SelfWatchdog {
		return ""
	}
	cg, err := unixsock.Cgroup(pid)
	if err != nil {
		return fmt.Sprintf("cannot tell whether pid %d is an agent of another session: %v", pid, err)
	}
	unit, _ := unixsock.WorkerUnit(cg)
	if unit == "" {
		return ""
	}
	if cg == c.w.cgroup {
		c.ownAgent = true
		return ""
	}
	return fmt.Sprintf("pid %d runs in the worker unit %s: another session's agent may not use session %s", pid, unit, c.w.spec.SessionID)
}
