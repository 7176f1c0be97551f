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
type Ring struct {
	buf  []byte
	head uint64 // offset of the next byte to be written
}

// NewRing returns a ring holding the last size bytes.
func NewRing(size int) *Ring {
	if size <= 0 {
		panic("ptyworker: ring size must be positive")
	}
	return &Ring{buf: make([]byte, size)}
}

// Size is the ring's capacity in bytes.
func (r *Ring) Size() int { return len(r.buf) }

// Head is the offset of the next byte to be written (= bytes written so far).
func (r *Ring) Head() uint64 { return r.head }

// Oldest is the smallest offset still held.
func (r *Ring) Oldest() uint64 {
	if r.head <= uint64(len(r.buf)) {
		return 0
	}
	return r.head - uint64(len(r.buf))
}

// Write appends p, overwriting the oldest bytes when full. It never fails.
func (r *Ring) Write(p []byte) {
	n := len(r.buf)
	if len(p) >= n {
		r.head += uint64(len(p) - n)
		p = p[len(p)-n:]
	}
	pos := int(r.head % uint64(n))
	c := copy(r.buf[pos:], p)
	copy(r.buf, p[c:])
	r.head += uint64(len(p))
}

// ReadAt copies bytes from offset off into dst and returns how many; 0 when
// off is the head. An offset older than Oldest wraps ErrTooOld; one past the
// head is an error too.
func (r *Ring) ReadAt(dst []byte, off uint64) (int, error) {
	if off > r.head {
		return 0, fmt.Errorf("offset %d is past the head %d", off, r.head)
	}
	if off < r.Oldest() {
		return 0, fmt.Errorf("offset %d (oldest is %d): %w", off, r.Oldest(), ErrTooOld)
	}
	avail := r.head - off
	if uint64(len(dst)) > avail {
		dst = dst[:avail]
	}
	n := len(r.buf)
	pos := int(off % uint64(n))
	c := copy(dst, r.buf[pos:])
	copy(dst[c:], r.buf)
	return len(dst), nil
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
