package ptyworker

import (
	"errors"
	"fmt"
)

// ErrTooOld is returned (wrapped) by Ring.ReadAt for an offset whose bytes
// were already overwritten.
var ErrTooOld = errors.New("offset no longer in the ring")

// Ring keeps the last Size() bytes of a stream, addressed by the stream's
// monotonic byte offset: the first byte ever written is offset 0. It is not
// safe for concurrent use; the worker guards it with its output lock.
//
// Beside those bytes it has RingSpare bytes of room, which Room hands out
// for the next bytes to be written in place: the PTY reader reads straight
// into the ring, without the lock, since the room overlaps none of the
// bytes the ring holds, and Commit then appends what it read. So the PTY's
// output is copied only once into the worker, not once more into the ring.
type Ring struct {
	buf  []byte // size + RingSpare bytes
	size int
	head uint64 // offset of the next byte to be written
}

// RingSpare is the most one Room hands out: the PTY reader's buffer.
const RingSpare = readBuf

// NewRing returns a ring holding the last size bytes.
func NewRing(size int) *Ring {
	if size <= 0 {
		panic("ptyworker: ring size must be positive")
	}
	return &Ring{buf: make([]byte, size+RingSpare), size: size}
}

// Size is the ring's capacity in bytes.
func (r *Ring) Size() int { return r.size }

// Head is the offset of the next byte to be written (= bytes written so far).
func (r *Ring) Head() uint64 { return r.head }

// Oldest is the smallest offset still held.
func (r *Ring) Oldest() uint64 {
	if r.head <= uint64(r.size) {
		return 0
	}
	return r.head - uint64(r.size)
}

// pos is where offset off is (or goes) in buf.
func (r *Ring) pos(off uint64) int { return int(off % uint64(len(r.buf))) }

// Room returns where the next bytes go: at most max (and RingSpare) bytes
// from the head on, fewer where buf wraps, never none. Filling it changes
// none of the bytes the ring holds (offsets Oldest to Head), so it may be
// filled without the ring's lock while others read them; Commit appends
// what was filled. There is one Room at a time: until its Commit, nothing
// else is written.
func (r *Ring) Room(max int) []byte {
	p := r.pos(r.head)
	return r.buf[p : p+min(max, RingSpare, len(r.buf)-p)]
}

// Commit appends the first n bytes of the last Room.
func (r *Ring) Commit(n int) { r.head += uint64(n) }

// Write appends p, overwriting the oldest bytes when full. It never fails.
func (r *Ring) Write(p []byte) {
	if len(p) > r.size {
		r.head += uint64(len(p) - r.size)
		p = p[len(p)-r.size:]
	}
	for len(p) > 0 {
		n := copy(r.Room(len(p)), p)
		r.Commit(n)
		p = p[n:]
	}
}

// Slices returns the bytes from offset off to the head, at most max of
// them, without copying: one slice, or two where buf wraps (b may be
// empty). Errors as ReadAt's. They stay what they are only while the
// ring's lock is held or, once it is released, while off is not older
// than Oldest (see Room): a caller that uses them outside the lock checks
// Oldest under it afterwards, and throws what it did with them away if
// they were overwritten meanwhile.
func (r *Ring) Slices(off uint64, max int) (a, b []byte, err error) {
	if off > r.head {
		return nil, nil, fmt.Errorf("offset %d is past the head %d", off, r.head)
	}
	if off < r.Oldest() {
		return nil, nil, fmt.Errorf("offset %d (oldest is %d): %w", off, r.Oldest(), ErrTooOld)
	}
	n := int(min(r.head-off, uint64(max)))
	p := r.pos(off)
	if p+n <= len(r.buf) {
		return r.buf[p : p+n], nil, nil
	}
	return r.buf[p:], r.buf[:n-(len(r.buf)-p)], nil
}

// ReadAt copies bytes from offset off into dst and returns how many; 0 when
// off is the head. An offset older than Oldest wraps ErrTooOld; one past the
// head is an error too.
func (r *Ring) ReadAt(dst []byte, off uint64) (int, error) {
	a, b, err := r.Slices(off, len(dst))
	if err != nil {
		return 0, err
	}
	n := copy(dst, a)
	return n + copy(dst[n:], b), nil
}

// ReadFrom returns a copy of every byte from offset off to the head, or an
// error wrapping ErrTooOld when off is no longer held.
func (r *Ring) ReadFrom(off uint64) ([]byte, error) {
	if off > r.head {
		return nil, fmt.Errorf("offset %d is past the head %d", off, r.head)
	}
	out := make([]byte, r.head-off)
	if _, err := r.ReadAt(out, off); err != nil {
		return nil, err
	}
	return out, nil
}
