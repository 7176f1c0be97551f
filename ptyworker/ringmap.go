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
	"errors"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// ringDataOffset is where a shared ring's data starts in its mapping,
// after the header page.
const ringDataOffset = 4096

// ringMappable says whether this build may read a mapped ring. The reader
// checks the header's reserve after copying, which is sound when loads are
// not reordered with later loads, as on amd64 (TSO); elsewhere clients
// take data frames.
const ringMappable = runtime.GOARCH == "amd64"

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
	total := ringDataOffset + size
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
	hdr := headerAt(mem)
	hdr.magic, hdr.size = ringMagic, uint64(size)
	sh := &sharedRing{fd: fd, mem: mem}
	r := &Ring{buf: mem[ringDataOffset:], hdr: hdr, shared: sh}
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

// ringView is a client's read-only mapping of a worker's ring, and the
// offset of the next byte it delivers.
type ringView struct {
	mem  []byte
	hdr  *ringHeader
	data []byte
	pos  uint64
}

// mapRing maps the ring memfd fd read-only, to be read from offset start.
// It checks the header; fd may be closed afterwards.
func mapRing(fd int, start uint64) (*ringView, error) {
	// A ring that could shrink under the mapping would fault the reader.
	if seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("the worker's output ring is not sealed against shrinking (seals %#x, %v)", seals, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("the worker's output ring: fstat: %w", err)
	}
	if st.Size <= ringDataOffset || st.Size > ringDataOffset+MaxRingSize {
		return nil, fmt.Errorf("the worker's output ring is %d bytes; want a %d-byte header and up to %d bytes of data", st.Size, ringDataOffset, MaxRingSize)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("the worker's output ring: map %d bytes: %w", st.Size, err)
	}
	hdr := headerAt(mem)
	if magic, size := hdr.magic, hdr.size; magic != ringMagic || size != uint64(st.Size-ringDataOffset) {
		unix.Munmap(mem)
		return nil, fmt.Errorf("the worker's output ring has a bad header (magic %#x, size %d of %d bytes mapped)", magic, size, st.Size)
	}
	if head := hdr.head.Load(); start > head {
		unix.Munmap(mem)
		return nil, fmt.Errorf("the worker's output ring: start offset %d is past its head %d", start, head)
	}
	return &ringView{mem: mem, hdr: hdr, data: mem[ringDataOffset:], pos: start}, nil
}

// take copies output from the view's offset, up to head, into dst and
// moves the offset on. ok is false when those bytes were overwritten before
// or while they were copied: the client fell more than the ring behind.
func (v *ringView) take(dst []byte, head uint64) (n int, ok bool) {
	if head > v.hdr.head.Load() {
		head = v.hdr.head.Load() // a head frame never runs ahead; be safe anyway
	}
	if head <= v.pos {
		return 0, true
	}
	n = ringCopy(dst, v.data, v.pos, head)
	if v.hdr.reserve.Load() > v.pos+uint64(len(v.data)) {
		return 0, false
	}
	v.pos += uint64(n)
	return n, true
}

func (v *ringView) unmap() {
	if v != nil {
		unix.Munmap(v.mem)
	}
}

// canMap says whether a client on nc may ask for a mapped attach.
func canMap(nc net.Conn) bool {
	_, ok := nc.(*net.UnixConn)
	return ringMappable && ok
}

// rightsReader reads a unix connection with recvmsg(2), keeping the
// descriptors that come with the bytes (a mapped attach's ring) for the
// client's reader.
type rightsReader struct {
	uc  *net.UnixConn
	oob []byte
	fds []int
}

func newRightsReader(uc *net.UnixConn) *rightsReader {
	return &rightsReader{uc: uc, oob: make([]byte, unix.CmsgSpace(4*4))}
}

func (r *rightsReader) Read(p []byte) (int, error) {
	n, oobn, flags, _, err := r.uc.ReadMsgUnix(p, r.oob)
	n = max(n, 0) // it may say -1 with an error, which io.Reader must not
	if err == nil && flags&unix.MSG_CTRUNC != 0 {
		// The kernel closed what did not fit: a frame's descriptor may be
		// among them, and the stream is not to be trusted.
		err = errors.New("worker connection: the descriptors passed with its bytes were truncated (a worker passes one, with a mapped attach)")
	}
	if oobn > 0 {
		if msgs, perr := unix.ParseSocketControlMessage(r.oob[:oobn]); perr == nil {
			for i := range msgs {
				if fds, ferr := unix.ParseUnixRights(&msgs[i]); ferr == nil {
					r.fds = append(r.fds, fds...)
				}
			}
		}
	}
	return n, err
}

// takeFD returns the oldest descriptor received, or -1.
func (r *rightsReader) takeFD() int {
	if len(r.fds) == 0 {
		return -1
	}
	fd := r.fds[0]
	r.fds = r.fds[1:]
	return fd
}

// close closes the descriptors no frame claimed.
func (r *rightsReader) close() {
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
}
