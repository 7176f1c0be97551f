package proto

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrClientClosed is returned by calls on a closed or broken client.
var ErrClientClosed = errors.New("worker connection closed")

// EventKind says what an Event carries.
type EventKind int

// Event kinds.
const (
	EventKindOutput   EventKind = iota + 1 // Data from Offset
	EventKindSnapshot                      // Data redraws the screen as of Offset
	EventKindState                         // State
	EventKindExit                          // Exit
	EventKindDesync                        // Desync; the worker closes the connection after it
	EventKindError                         // Err: an error the worker sent outside any call (id 0)
)

// Event is what a worker pushes: output, snapshots and events.
type Event struct {
	Kind   EventKind
	Offset uint64
	Data   []byte
	State  *StateEventData
	Exit   *ExitInfo
	Desync *DesyncEventData
	Err    *RPCError
}

// Release hands the event's Data back for reuse by later output events
// of any client; the consumer must not touch Data after. It is optional
// (without it Data is garbage collected as usual) and spares a consumer
// that copies output on, like `legion attach`, an allocation and a
// garbage-collection share per frame.
func (e *Event) Release() {
	if cap(e.Data) >= minPooledData {
		b := e.Data[:0]
		dataPool.Put(&b)
	}
	e.Data = nil
}

// minPooledData is the smallest Data worth recycling; smaller frames
// (keystroke echoes) are cheap to allocate.
const minPooledData = 4 << 10

// dataPool holds released Data buffers (*[]byte).
var dataPool sync.Pool

// eventData returns a buffer of n bytes for an output event.
func eventData(n int) []byte {
	if n >= minPooledData {
		if p, ok := dataPool.Get().(*[]byte); ok && cap(*p) >= n {
			return (*p)[:n]
		}
	}
	return make([]byte, n)
}

// Client is a connection to a worker. Calls may be made from several
// goroutines. Pushed output and events arrive on Events(), which must be
// drained while attached or watching: a client that stops reading is, by
// design, eventually dropped by the worker with a desync event.
type Client struct {
	nc     net.Conn
	events chan Event

	wmu sync.Mutex // serialises frame writes

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *Message
	err     error // set once the reader stopped

	done chan struct{} // closed when the reader stopped

	closeOnce sync.Once
	closing   chan struct{} // closed by Close: the reader stops delivering
}

// Dial connects to the worker socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("dial worker %s: %w", path, err)
	}
	return NewClient(c), nil
}

// NewClient speaks the worker protocol on an established connection (one
// a broker handed over, say). If hello was already said on it, skip Hello.
func NewClient(nc net.Conn) *Client {
	cl := &Client{
		nc:      nc,
		events:  make(chan Event, 256),
		pending: map[uint64]chan *Message{},
		done:    make(chan struct{}),
		closing: make(chan struct{}),
	}
	// The reader exits when the connection fails or Close is called; it
	// then closes Events() and fails pending calls.
	go cl.readLoop()
	return cl
}

// Events returns the channel of pushed output and events. It is closed when
// the connection ends.
func (c *Client) Events() <-chan Event { return c.events }

// Done is closed when the connection has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (nil while it is up).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection and waits for the reader to end; pushed
// output and events not yet received are dropped, so Close never waits
// for Events() to be drained.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	err := c.nc.Close()
	<-c.done
	return err
}

// deliver hands ev to the receiver of Events(); false when Close was
// called.
func (c *Client) deliver(ev Event) bool {
	select {
	case c.events <- ev:
		return true
	case <-c.closing:
		return false
	}
}

func (c *Client) readLoop() {
	var err error
	defer func() {
		c.mu.Lock()
		if err == nil {
			err = ErrClientClosed
		}
		if c.err == nil { // else a cut-short frame ended the client first
			c.err = err
		}
		for id, ch := range c.pending {
			close(ch)
			delete(c.pending, id)
		}
		c.mu.Unlock()
		close(c.events)
		close(c.done)
	}()
	var buf []byte
	// Small frames (control messages, keystroke echoes) come whole in one
	// read(2); the payload of a large data frame, read into the event's
	// own slice, mostly bypasses the buffer (bufio reads straight into a
	// destination at least its size). On a unix socket the reads keep the
	// descriptor of a mapped attach's ring.
	var src io.Reader = c.nc
	var rights *rightsReader
	if uc, ok := c.nc.(*net.UnixConn); ok {
		rights = newRightsReader(uc)
		src = rights
		defer rights.close()
	}
	var ring *ringView // the mapped ring, from an 'M' frame
	defer func() { ring.unmap() }()
	br := bufio.NewReaderSize(src, 16<<10)
	for {
		var typ byte
		var n int
		if typ, n, err = ReadFrameHeader(br); err != nil {
			err = fmt.Errorf("%w: %w", ErrClientClosed, err)
			return
		}
		switch typ {
		case FrameControl:
			if err = ReadPayload(br, &buf, n); err != nil {
				err = fmt.Errorf("%w: %w", ErrClientClosed, err)
				return
			}
			m, derr := DecodeMessage(buf)
			if derr != nil {
				err = fmt.Errorf("worker sent a malformed message: %w", derr)
				return
			}
			c.dispatch(m)
		case FrameData, FrameSnapshot:
			if n < OffsetLen {
				err = fmt.Errorf("worker sent a short data frame (%d bytes)", n)
				return
			}
			var off [OffsetLen]byte
			data := eventData(n - OffsetLen)
			if err = ReadFull(br, off[:]); err == nil {
				err = ReadFull(br, data)
			}
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrClientClosed, err)
				return
			}
			ev := Event{Kind: EventKindOutput, Offset: binary.BigEndian.Uint64(off[:]), Data: data}
			if typ == FrameSnapshot {
				ev.Kind = EventKindSnapshot
			}
			if !c.deliver(ev) {
				return
			}
		case FrameRing, FrameHead:
			var off [OffsetLen]byte
			if n != OffsetLen {
				err = fmt.Errorf("worker sent a %q frame of %d bytes; want %d", typ, n, OffsetLen)
				return
			}
			if err = ReadFull(br, off[:]); err != nil {
				err = fmt.Errorf("%w: %w", ErrClientClosed, err)
				return
			}
			at := binary.BigEndian.Uint64(off[:])
			if typ == FrameRing {
				if ring, err = c.mapRing(rights, ring, at); err != nil {
					return
				}
				continue
			}
			if ring == nil {
				err = errors.New("worker sent a head frame before its ring")
				return
			}
			if !c.deliverRing(ring, at) {
				err = ErrClientClosed
				return
			}
		}
	}
}

// mapRing maps the ring an 'M' frame announced (its descriptor came with
// the frame's bytes), replacing old.
func (c *Client) mapRing(rights *rightsReader, old *ringView, from uint64) (*ringView, error) {
	fd := -1
	if rights != nil {
		fd = rights.takeFD()
	}
	if fd < 0 {
		return old, errors.New("worker sent a ring frame without the ring's descriptor")
	}
	v, err := mapRing(fd, from)
	unix.Close(fd)
	if err != nil {
		return old, err
	}
	old.unmap()
	return v, nil
}

// deliverRing delivers the output of a mapped ring up to head, in events
// of at most DataChunk bytes. A client that fell more than the ring behind
// gets a desync event, as one the worker drops does, and the connection is
// closed; false then, or when Close was called.
func (c *Client) deliverRing(v *ringView, head uint64) bool {
	for v.pos < head {
		from := v.pos
		data := eventData(int(min(head-from, DataChunk)))
		n, ok := v.take(data, head)
		if !ok {
			d := &DesyncEventData{
				Offset: from,
				Reason: fmt.Sprintf("client fell more than the %d-byte ring behind the output (head %d); reattach from offset %d or take a snapshot", len(v.data), head, from),
			}
			c.deliver(Event{Kind: EventKindDesync, Desync: d})
			c.nc.Close()
			return false
		}
		if n == 0 {
			return true // a head frame never runs ahead of the ring's head
		}
		if !c.deliver(Event{Kind: EventKindOutput, Offset: from, Data: data[:n]}) {
			return false
		}
	}
	return true
}

func (c *Client) dispatch(m *Message) {
	if m.Event != "" {
		ev := Event{}
		var target any
		switch m.Event {
		case EventState:
			ev.Kind, ev.State = EventKindState, &StateEventData{}
			target = ev.State
		case EventExit:
			ev.Kind, ev.Exit = EventKindExit, &ExitInfo{}
			target = ev.Exit
		case EventDesync:
			ev.Kind, ev.Desync = EventKindDesync, &DesyncEventData{}
			target = ev.Desync
		default:
			return // a newer worker's event: ignore
		}
		if err := json.Unmarshal(m.Data, target); err != nil {
			return
		}
		c.deliver(ev)
		return
	}
	if m.ID == 0 {
		if m.Error != nil {
			c.deliver(Event{Kind: EventKindError, Err: m.Error})
		}
		return
	}
	c.mu.Lock()
	ch, ok := c.pending[m.ID]
	delete(c.pending, m.ID)
	c.mu.Unlock()
	if ok {
		ch <- m
	}
}

// call sends a request and waits for its response, decoding the result
// into out (when not nil).
func (c *Client) call(ctx context.Context, method string, params, out any) error {
	id, ch, err := c.send(ctx, method, params)
	if err != nil {
		return err
	}
	return c.await(ctx, method, id, ch, out)
}

// send writes one request and returns its id and the channel its answer
// comes on; await waits for that answer.
func (c *Client) send(ctx context.Context, method string, params any) (uint64, chan *Message, error) {
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: encode params: %w", method, err)
		}
		raw = b
	}
	ch := make(chan *Message, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, nil, fmt.Errorf("%s: %w", method, err)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()

	f, err := EncodeControl(&Message{ID: id, Method: method, Params: raw})
	if err == nil {
		err = c.writeFrame(ctx, f)
	}
	if err != nil {
		c.forget(id)
		return 0, nil, fmt.Errorf("%s: %w", method, err)
	}
	return id, ch, nil
}

// await waits for the answer to request id (see send) and decodes its
// result into out.
func (c *Client) await(ctx context.Context, method string, id uint64, ch chan *Message, out any) error {
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: %w", method, c.Err())
		}
		if m.Error != nil {
			return m.Error
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				return fmt.Errorf("%s: decode result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// forget drops the wait for the answer to request id.
func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// writeFrame writes a complete frame, bounded by ctx's deadline. A frame
// cut short (the deadline passed mid-write) would make the worker read the
// next frame's bytes as the rest of it, so then the connection is closed.
func (c *Client) writeFrame(ctx context.Context, f []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	dl, _ := ctx.Deadline()
	c.nc.SetWriteDeadline(dl)
	n, err := c.nc.Write(f)
	switch {
	case err == nil:
		return nil
	case n > 0:
		// The client is broken from here on: calls made before the
		// reader has seen the close must say so too.
		err = fmt.Errorf("%w: a frame was cut short after %d of %d bytes: %w", ErrClientClosed, n, len(f), err)
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
		c.nc.Close()
		return err
	case errors.Is(err, net.ErrClosed):
		return fmt.Errorf("%w: %w", ErrClientClosed, err)
	}
	return err
}

// sendInputTimeout bounds each frame SendInput writes: a worker that has
// not taken input for this long is stuck (it answers an agent that does
// not read its input with an error well before).
var sendInputTimeout = 30 * time.Second

// Hello authenticates. When the worker has an older rpc_minor it says so
// with unsupported_version, and Hello tries again at the worker's minor.
func (c *Client) Hello(ctx context.Context, token, daemonID string) (*HelloResult, error) {
	return c.HelloAs(ctx, HelloParams{RPCMajor: RPCMajor, RPCMinor: RPCMinor, Token: token, DaemonInstanceID: daemonID})
}

// HelloAs is Hello with every parameter given.
func (c *Client) HelloAs(ctx context.Context, p HelloParams) (*HelloResult, error) {
	var res HelloResult
	err := c.call(ctx, MethodHello, p, &res)
	var re *RPCError
	if errors.As(err, &re) && re.Code == CodeUnsupportedVersion && len(re.Data) > 0 {
		var v VersionData
		if json.Unmarshal(re.Data, &v) == nil && v.RPCMajor == p.RPCMajor && v.RPCMinor < p.RPCMinor && v.RPCMinor >= 0 {
			p.RPCMinor = v.RPCMinor
			err = c.call(ctx, MethodHello, p, &res)
		}
	}
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// HelloWatch is HelloAs, then Watch, in one round trip: both requests
// are written before either answer is read (the worker serves a
// connection's requests in order, so the watch is served authenticated).
// A helper that reconnects to 1,000 workers at its start wakes each
// worker once instead of twice. When hello fails, its error is returned
// (the watch was refused too); a hello refused for its rpc version is
// tried again as HelloAs does, and the watch after it.
func (c *Client) HelloWatch(ctx context.Context, p HelloParams) (*HelloResult, *Info, error) {
	hid, hch, err := c.send(ctx, MethodHello, p)
	if err != nil {
		return nil, nil, err
	}
	wid, wch, err := c.send(ctx, MethodWatch, nil)
	if err != nil {
		c.forget(hid)
		return nil, nil, err
	}
	var hr HelloResult
	if err := c.await(ctx, MethodHello, hid, hch, &hr); err != nil {
		c.forget(wid)
		var re *RPCError
		if errors.As(err, &re) && re.Code == CodeUnsupportedVersion {
			r, err := c.HelloAs(ctx, p)
			if err != nil {
				return nil, nil, err
			}
			in, err := c.Watch(ctx)
			if err != nil {
				return nil, nil, err
			}
			return r, in, nil
		}
		return nil, nil, err
	}
	var in Info
	if err := c.await(ctx, MethodWatch, wid, wch, &in); err != nil {
		return nil, nil, err
	}
	return &hr, &in, nil
}

// Info returns the session's description and state.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	var in Info
	if err := c.call(ctx, MethodInfo, nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Attach starts the output stream (see AttachParams); output, a snapshot
// and the exit event arrive on Events().
func (c *Client) Attach(ctx context.Context, p AttachParams) (*AttachResult, error) {
	p.Mapped = p.Mapped && canMap(c.nc)
	var res AttachResult
	if err := c.call(ctx, MethodAttach, p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Detach stops the output stream.
func (c *Client) Detach(ctx context.Context) error { return c.call(ctx, MethodDetach, nil, nil) }

// Input writes p to the PTY and waits for the worker to confirm it.
func (c *Client) Input(ctx context.Context, p []byte) error {
	return c.call(ctx, MethodInput, InputParams{Data: p}, nil)
}

// SendInput writes p to the PTY as data frames without waiting (the fast
// path for keystrokes); failures come back as EventKindError events.
func (c *Client) SendInput(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), MaxDataFrame)
		f := FrameBytes(FrameData, p[:n])
		ctx, cancel := context.WithTimeout(context.Background(), sendInputTimeout)
		err := c.writeFrame(ctx, f)
		cancel()
		if err != nil {
			return fmt.Errorf("send input: %w", err)
		}
		p = p[n:]
	}
	return nil
}

// Resize sets the PTY size.
func (c *Client) Resize(ctx context.Context, cols, rows int) error {
	return c.call(ctx, MethodResize, ResizeParams{Cols: cols, Rows: rows}, nil)
}

// Signal sends a signal ("INT", "TERM", "KILL", ...) to the foreground job
// or the agent's group; see SignalParams.
func (c *Client) Signal(ctx context.Context, sig, target string) (*SignalResult, error) {
	var res SignalResult
	if err := c.call(ctx, MethodSignal, SignalParams{Signal: sig, Target: target}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Remove ends the session for good. Once the agent has ended it is too
// late: the error is session_not_running.
func (c *Client) Remove(ctx context.Context) error { return c.call(ctx, MethodRemove, nil, nil) }

// Health is a cheap liveness check.
func (c *Client) Health(ctx context.Context) (*HealthResult, error) {
	var h HealthResult
	if err := c.call(ctx, MethodHealth, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Watch subscribes to state and exit events and returns the current info.
func (c *Client) Watch(ctx context.Context) (*Info, error) {
	var in Info
	if err := c.call(ctx, MethodWatch, nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Hook forwards one hook payload on a hook connection (one whose hello
// used the hook token) and returns what the hook command is to print, if
// anything. A PermissionRequest's call returns only once a person
// decided, the agent moved on, or the worker ended.
func (c *Client) Hook(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	var res HookResult
	if err := c.call(ctx, MethodHook, payload, &res); err != nil {
		return nil, err
	}
	return res.Output, nil
}

// Respond delivers a person's answer to what the agent waits on (see
// RespondParams).
func (c *Client) Respond(ctx context.Context, p RespondParams) (*RespondResult, error) {
	var res RespondResult
	if err := c.call(ctx, MethodRespond, p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// End ends the agent because its work is done: the worker ends it (SIGINT
// first) and exits 0, recording "completed: <reason>". It returns once
// the worker took the request; the exit event follows.
func (c *Client) End(ctx context.Context, reason string) error {
	return c.call(ctx, MethodEnd, EndParams{Reason: reason}, nil)
}
