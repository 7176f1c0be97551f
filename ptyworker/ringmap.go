package ptyworker

// Mapped attach: a local client reads the output ring straight from the
// worker's memory instead of receiving data frames. The worker keeps its
// ring in a memfd, sealed so that no one can map it writable any more (its
// own mapping stays so); an attach with mapped set gets the descriptor in
// an 'M' frame and then, instead of data frames, 'H' frames that say how
// far the output reaches. The client copies the bytes out itself, so the
// output is copied once on its way instead of three times (into the
// socket, out of it, into the event), and the worker's part shrinks to a
// few bytes per batch: on a small machine that is what lets a client keep
// up with a flood at the speed of a raw PTY read (BenchmarkOutputThroughput).
//
// The worker is never slowed by a mapped client: one that falls more than
// the ring behind finds the bytes it wanted overwritten (the header's
// reserve tells), gets a desync event from its own Client and is closed,
// as a dropped client would be.

import (
	"fmt"
	"runtime"

	"github.com/legion-dev/legion/ptyworker/proto"
	"golang.org/x/sys/unix"
)

// sharedRing is the memory behind a ring from NewSharedRing.
type sharedRing struct {
	fd  int    // the memfd, sealed: shrink, grow, future writes, seals
	mem []byte // the worker's writable mapping: header page, then data
}

// NewSharedRing returns a ring of size bytes in a sealed memfd that clients
// may map read-only (FD).
func NewSharedRing(size int) (*Ring, error) {
	if size <= 0 {
		panic("ptyworker: ring size must be positive")
	}
	fd, err := unix.MemfdCreate("legion-output", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("output ring: memfd_create: %w", err)
	}
	total := proto.RingDataOffset + size
	mem, err := func() ([]byte, error) {
		if err := unix.Ftruncate(fd, int64(total)); err != nil {
			return nil, fmt.Errorf("output ring: size the memfd to %d bytes: %w", total, err)
		}
		mem, err := unix.Mmap(fd, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("output ring: map %d bytes: %w", total, err)
		}
		// F_SEAL_FUTURE_WRITE (Linux 5.1) keeps this mapping writable and
		// refuses every later write or writable mapping: clients can read
		// the ring, never change it.
		seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_FUTURE_WRITE | unix.F_SEAL_SEAL
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			unix.Munmap(mem)
			return nil, fmt.Errorf("output ring: seal the memfd: %w", err)
		}
		return mem, nil
	}()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	hdr := proto.HeaderAt(mem)
	hdr.Magic, hdr.Size = proto.RingMagic, uint64(size)
	sh := &sharedRing{fd: fd, mem: mem}
	r := &Ring{buf: mem[proto.RingDataOffset:], hdr: hdr, shared: sh}
	// Unmapped once nothing uses the ring: a worker's output lives as
	// long as its process, but tests run many workers in one.
	runtime.AddCleanup(r, func(sh *sharedRing) {
		unix.Munmap(sh.mem)
		unix.Close(sh.fd)
	}, sh)
	return r, nil
}

// FD is the sealed memfd of a shared ring, or -1 for a heap ring. It stays
// the ring's: a caller that hands it on sends a copy (SCM_RIGHTS).
func (r *Ring) FD() int {
	if r.shared == nil {
		return -1
	}
	return r.shared.fd
}
