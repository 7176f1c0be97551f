package activation

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"sync"

	"github.com/legion-dev/legion/ptyworker"
)

// WorkerConn speaks the worker protocol (package ptyworker) on a socket the
// helper brokered with Client.Attach, where hello is already done. It is
// the subset `legion attach` needs: attach, resize, detach, input and the
// pushed output and events.
//
// It exists because ptyworker.Client can only dial a path; with a
// constructor over an existing connection there (ptyworker.NewClient) this
// type would go.
type WorkerConn struct {
	nc     *net.UnixConn
	events chan ptyworker.Event

	wmu sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *wireMessage
	err     error
	done    chan struct{}

	closeOnce sync.Once
	closing   chan struct{} // closed by Close: the reader stops delivering
}

// NewWorkerConn wraps a brokered connection. Its reader goroutine ends
// when the connection ends (Close, or the worker hangs up); Events is
// closed then.
func NewWorkerConn(c net.Conn) (*WorkerConn, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("worker connection is a %T, want a unix socket", c)
	}
	w := &WorkerConn{nc: uc, events: make(chan ptyworker.Event, 256), pending: map[uint64]chan *wireMessage{}, done: make(chan struct{}), closing: make(chan struct{})}
	go w.readLoop()
	return w, nil
}

// Events delivers output (EventKindOutput), the snapshot, state, exit and
// desync events in the order the worker sent them.
func (w *WorkerConn) Events() <-chan ptyworker.Event { return w.events }

// Done is closed when the connection has ended; Err says why.
func (w *WorkerConn) Done() <-chan struct{} { return w.done }

// Err is why the connection ended.
func (w *WorkerConn) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close closes the connection and waits for the reader to end; events
// not yet received are dropped.
func (w *WorkerConn) Close() error {
	w.closeOnce.Do(func() { close(w.closing) })
	err := w.nc.Close()
	<-w.done
	return err
}

// deliver hands ev to the receiver; false when Close was called.
func (w *WorkerConn) deliver(ev ptyworker.Event) bool {
	select {
	case w.events <- ev:
		return true
	case <-w.closing:
		return false
	}
}

func (w *WorkerConn) readLoop() {
	var err error
	defer func() {
		w.mu.Lock()
		w.err = err
		for id, ch := range w.pending {
			close(ch)
			delete(w.pending, id)
		}
		w.mu.Unlock()
		close(w.events)
		close(w.done)
	}()
	buf := make([]byte, 64<<10)
	for {
		var typ byte
		var p []byte
		typ, p, err = ptyworker.ReadFrame(w.nc, buf)
		if err != nil {
			return
		}
		switch typ {
		case ptyworker.FrameData, ptyworker.FrameSnapshot:
			if len(p) < 8 {
				err = fmt.Errorf("worker sent a short data frame (%d bytes)", len(p))
				return
			}
			ev := ptyworker.Event{Kind: ptyworker.EventKindOutput, Offset: binary.BigEndian.Uint64(p), Data: append([]byte(nil), p[8:]...)}
			if typ == ptyworker.FrameSnapshot {
				ev.Kind = ptyworker.EventKindSnapshot
			}
			if !w.deliver(ev) {
				return
			}
		case ptyworker.FrameControl:
			var m wireMessage
			if err = json.Unmarshal(p, &m); err != nil {
				err = fmt.Errorf("worker sent a malformed message: %w", err)
				return
			}
			w.dispatch(&m)
		}
	}
}

func (w *WorkerConn) dispatch(m *wireMessage) {
	if m.Event != "" {
		ev := ptyworker.Event{}
		var target any
		switch m.Event {
		case ptyworker.EventState:
			ev.Kind, ev.State = ptyworker.EventKindState, &ptyworker.StateEventData{}
			target = ev.State
		case ptyworker.EventExit:
			ev.Kind, ev.Exit = ptyworker.EventKindExit, &ptyworker.ExitInfo{}
			target = ev.Exit
		case ptyworker.EventDesync:
			ev.Kind, ev.Desync = ptyworker.EventKindDesync, &ptyworker.DesyncEventData{}
			target = ev.Desync
		default:
			return
		}
		if json.Unmarshal(m.Data, target) == nil {
			w.deliver(ev)
		}
		return
	}
	if m.ID == 0 {
		if m.Error != nil {
			w.deliver(ptyworker.Event{Kind: ptyworker.EventKindError, Err: m.Error})
		}
		return
	}
	w.mu.Lock()
	ch, ok := w.pending[m.ID]
	delete(w.pending, m.ID)
	w.mu.Unlock()
	if ok {
		ch <- m
	}
}

func (w *WorkerConn) call(ctx context.Context, method string, params, out any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	ch := make(chan *wireMessage, 1)
	w.mu.Lock()
	if w.err != nil || isClosed(w.done) {
		w.mu.Unlock()
		return fmt.Errorf("%s: worker connection closed", method)
	}
	w.nextID++
	id := w.nextID
	w.pending[id] = ch
	w.mu.Unlock()
	b, err := json.Marshal(wireMessage{ID: id, Method: method, Params: raw})
	if err == nil {
		err = w.write(ptyworker.FrameControl, b)
	}
	if err != nil {
		w.mu.Lock()
		delete(w.pending, id)
		w.mu.Unlock()
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: worker connection closed", method)
		}
		if m.Error != nil {
			return m.Error
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		w.mu.Lock()
		delete(w.pending, id)
		w.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func (w *WorkerConn) write(typ byte, p []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return ptyworker.WriteFrame(w.nc, typ, p)
}

// Attach starts the output stream (see ptyworker.AttachParams).
func (w *WorkerConn) Attach(ctx context.Context, p ptyworker.AttachParams) (*ptyworker.AttachResult, error) {
	var r ptyworker.AttachResult
	if err := w.call(ctx, ptyworker.MethodAttach, p, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Resize sets the PTY size.
func (w *WorkerConn) Resize(ctx context.Context, cols, rows int) error {
	return w.call(ctx, ptyworker.MethodResize, ptyworker.ResizeParams{Cols: cols, Rows: rows}, nil)
}

// Detach stops the output stream.
func (w *WorkerConn) Detach(ctx context.Context) error {
	return w.call(ctx, ptyworker.MethodDetach, struct{}{}, nil)
}

// SendInput writes keystrokes as data frames, without waiting.
func (w *WorkerConn) SendInput(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), ptyworker.MaxDataFrame)
		if err := w.write(ptyworker.FrameData, p[:n]); err != nil {
			return fmt.Errorf("send input: %w", err)
		}
		p = p[n:]
	}
	return nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
