package ptyworker

import (
	"errors"
	"fmt"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// ErrTooOld is returned (wrapped) by Ring.ReadAt for an offset whose bytes
// were already overwritten.
var ErrTooOld = errors.New("offset no longer in the ring")

// Ring keeps the last Size() bytes of a stream, addressed by the stream's
// monotonic byte offset: the first byte ever written is offset 0. One
// goroutine writes (the worker guards the ring with its output lock);
// ReadAt must not run concurrently with Write either.
//
// A ring from NewSharedRing lives in a sealed memfd that clients map
// read-only (see ringmap.go): its head and the end of the write in
// progress are published in a header, so that a reader in another process
// can tell the bytes it copied from bytes overwritten meanwhile.
type Ring struct {
	buf []byte            // the data
	hdr *proto.RingHeader // in the mapping for a shared ring, else on the heap

	shared *sharedRing // nil for a heap ring
}

// NewRing returns a ring holding the last size bytes, on the heap.
func NewRing(size int) *Ring {
	if size <= 0 {
		panic("ptyworker: ring size must be positive")
	}
	return &Ring{buf: make([]byte, size), hdr: &proto.RingHeader{Magic: proto.RingMagic, Size: uint64(size)}}
}

// Size is the ring's capacity in bytes.
func (r *Ring) Size() int { return len(r.buf) }

// Head is the offset of the next byte to be written (= bytes written so far).
func (r *Ring) Head() uint64 { return r.hdr.Head.Load() }

// Oldest is the smallest offset still held.
func (r *Ring) Oldest() uint64 {
	head := r.Head()
	if head <= uint64(len(r.buf)) {
		return 0
	}
	return head - uint64(len(r.buf))
}

// Write appends p, overwriting the oldest bytes when full. It never fails.
// The header's reserve moves before the copy and its head after, so a
// reader that copied bytes below reserve-size knows they may be torn.
func (r *Ring) Write(p []byte) {
	n := len(r.buf)
	head := r.hdr.Head.Load()
	end := head + uint64(len(p))
	if len(p) >= n {
		head = end - uint64(n)
		p = p[len(p)-n:]
	}
	r.hdr.Reserve.Store(end)
	pos := int(head % uint64(n))
	c := copy(r.buf[pos:], p)
	copy(r.buf, p[c:])
	r.hdr.Head.Store(end)
}

// ReadAt copies bytes from offset off into dst and returns how many; 0 when
// off is the head. An offset older than Oldest wraps ErrTooOld; one past the
// head is an error too.
func (r *Ring) ReadAt(dst []byte, off uint64) (int, error) {
	head := r.Head()
	if off > head {
		return 0, fmt.Errorf("offset %d is past the head %d", off, head)
	}
	if off < r.Oldest() {
		return 0, fmt.Errorf("offset %d (oldest is %d): %w", off, r.Oldest(), ErrTooOld)
	}
	return proto.RingCopy(dst, r.buf, off, head), nil
}

// ReadFrom returns a copy of every byte from offset off to the head, or an
// error wrapping ErrTooOld when off is no longer held.
func (r *Ring) ReadFrom(off uint64) ([]byte, error) {
	head := r.Head()
	if off > head {
		return nil, fmt.Errorf("offset %d is past the head %d", off, head)
	}
	out := make([]byte, head-off)
	if _, err := r.ReadAt(out, off); err != nil {
		return nil, err
	}
	return out, nil
}
