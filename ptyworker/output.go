package ptyworker

import (
	"sync"
	"sync/atomic"
	"time"
)

// output is the session's output path: the PTY reader appends to the ring,
// and every consumer (attached clients, the transcript, the screen) follows
// the ring at its own offset. The reader only copies into the ring and pokes
// consumers without blocking, so no consumer can stall the agent; a client
// that falls more than its limit behind is dropped.
type output struct {
	mu     sync.Mutex
	ring   *Ring
	subs   map[*subscriber]struct{}
	closed bool // the reader hit the end of output

	lastWrite atomic.Int64 // unix nanoseconds of the last output
}

// subscriber is one consumer of output.
//
// A consumer is woken when output arrives after it had caught up, so a
// keystroke's echo reaches it at once. During a flood, though, a consumer
// that keeps up is caught up after every PTY read, and a wake-up per read
// (a thread woken, a frame or a write(2), the client's thread woken in
// turn) costs the machine more than the reading: the agent, the kernel's
// tty worker and the worker's reader all wait for a CPU behind them. So a
// consumer may mark itself lazy while it has a timer of its own running:
// then it is woken only once batch bytes are pending. A client connection
// does so after taking floodMin bytes or more at once (for floodPause), the
// transcript while its write delay runs. A consumer must take all that is
// pending before it waits (or look again on its own): only then is it
// caught up.
type subscriber struct {
	wake  chan struct{} // capacity 1: "there may be more output"
	next  atomic.Uint64 // next offset the consumer will take
	limit uint64        // largest allowed lag in bytes; 0: never dropped
	batch uint64        // pending bytes that wake a lazy consumer; set by subscribe
	lazy  atomic.Bool   // see above; set and cleared by the consumer

	mapped bool // a mapped client: gets head frames, not data (ringmap.go)

	dropped atomic.Bool
	onDrop  func() // called under output.mu when dropped; must not block
}

// Flood batching (see subscriber): a client connection that took floodMin
// bytes or more at once is lazy for floodPause. A lazy consumer is woken
// once a quarter of what it may fall behind (its limit, else the ring) is
// pending: the fewer wake-ups the better during a flood, and three
// quarters are left, so that it is neither dropped nor overrun while it
// rests. With the default 1 MiB ring that is 256 KiB. A screenful of
// output is well under floodMin.
const (
	floodMin   = 16 << 10
	floodPause = 2 * time.Millisecond
)

func newSubscriber(limit uint64, onDrop func()) *subscriber {
	return &subscriber{wake: make(chan struct{}, 1), limit: limit, onDrop: onDrop}
}

func (s *subscriber) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func newOutput(size int) *output {
	return newOutputOn(NewRing(size))
}

func newOutputOn(r *Ring) *output {
	return &output{ring: r, subs: map[*subscriber]struct{}{}}
}

// write appends p (the reader's buffer, copied) and wakes consumers,
// dropping clients that fell more than their limit behind.
func (o *output) write(p []byte) {
	o.mu.Lock()
	prev := o.ring.Head()
	o.ring.Write(p)
	head := o.ring.Head()
	for s := range o.subs {
		next := s.next.Load()
		if s.limit > 0 && head-next > s.limit {
			s.dropped.Store(true)
			delete(o.subs, s)
			if s.onDrop != nil {
				s.onDrop()
			}
		}
		if next == prev && !s.lazy.Load() || head-next >= s.batch {
			s.poke()
		}
	}
	o.mu.Unlock()
	o.lastWrite.Store(time.Now().UnixNano())
}

// close marks the end of output and wakes every consumer.
func (o *output) close() {
	o.mu.Lock()
	o.closed = true
	for s := range o.subs {
		s.poke()
	}
	o.mu.Unlock()
}

// subscribe registers s starting at offset from.
func (o *output) subscribe(s *subscriber, from uint64) {
	o.mu.Lock()
	room := s.limit
	if room == 0 || room > uint64(o.ring.Size()) {
		room = uint64(o.ring.Size())
	}
	s.batch = max(1, room/4)
	s.next.Store(from)
	o.subs[s] = struct{}{}
	o.mu.Unlock()
	s.poke()
}

func (o *output) unsubscribe(s *subscriber) {
	o.mu.Lock()
	delete(o.subs, s)
	o.mu.Unlock()
}

// readAt copies output from off into dst; see Ring.ReadAt.
func (o *output) readAt(dst []byte, off uint64) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ring.ReadAt(dst, off)
}

// bounds returns the oldest offset held, the head, and whether output ended.
func (o *output) bounds() (oldest, head uint64, closed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ring.Oldest(), o.ring.Head(), o.closed
}

func (o *output) head() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ring.Head()
}

// lastOutput is when the agent last wrote anything (zero: never).
func (o *output) lastOutput() time.Time {
	n := o.lastWrite.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
