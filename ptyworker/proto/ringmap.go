package proto

// The client's side of a mapped attach (see ptyworker's ringmap.go for the
// worker's): the layout of the shared ring's memfd, which both sides use,
// and the read-only view a Client keeps of it.

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RingDataOffset is where a shared ring's data starts in its mapping,
// after the header page.
const RingDataOffset = 4096

// RingMappable says whether this build may read a mapped ring. The reader
// checks the header's reserve after copying, which is sound when loads are
// not reordered with later loads, as on amd64 (TSO); elsewhere clients
// take data frames.
const RingMappable = runtime.GOARCH == "amd64"

// RingHeader is the start of a shared ring's mapping (one page); the
// worker's heap ring has one too, so both write the same way.
type RingHeader struct {
	Magic   uint64        // RingMagic
	Size    uint64        // data bytes, which start at RingDataOffset
	Head    atomic.Uint64 // offset of the next byte to be written
	Reserve atomic.Uint64 // end of the write in progress (>= head): bytes below reserve-size may be overwritten
}

// RingMagic marks a ring mapping ("LGNRING1").
const RingMagic = 0x4c474e52494e4731

// RingCopy copies from data, a ring's bytes, the stream from off up to at
// most head into dst, and returns how many bytes it copied.
func RingCopy(dst, data []byte, off, head uint64) int {
	if avail := head - off; uint64(len(dst)) > avail {
		dst = dst[:avail]
	}
	n := len(data)
	pos := int(off % uint64(n))
	c := copy(dst, data[pos:])
	copy(dst[c:], data)
	return len(dst)
}

// HeaderAt is the ring header at the start of a mapping.
func HeaderAt(mem []byte) *RingHeader {
	return (*RingHeader)(unsafe.Pointer(unsafe.SliceData(mem)))
}

// ringView is a client's read-only mapping of a worker's ring, and the
// offset of the next byte it delivers.
type ringView struct {
	mem  []byte
	hdr  *RingHeader
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
	if st.Size <= RingDataOffset || st.Size > RingDataOffset+MaxRingSize {
		return nil, fmt.Errorf("the worker's output ring is %d bytes; want a %d-byte header and up to %d bytes of data", st.Size, RingDataOffset, MaxRingSize)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("the worker's output ring: map %d bytes: %w", st.Size, err)
	}
	hdr := HeaderAt(mem)
	if magic, size := hdr.Magic, hdr.Size; magic != RingMagic || size != uint64(st.Size-RingDataOffset) {
		unix.Munmap(mem)
		return nil, fmt.Errorf("the worker's output ring has a bad header (magic %#x, size %d of %d bytes mapped)", magic, size, st.Size)
	}
	if head := hdr.Head.Load(); start > head {
		unix.Munmap(mem)
		return nil, fmt.Errorf("the worker's output ring: start offset %d is past its head %d", start, head)
	}
	return &ringView{mem: mem, hdr: hdr, data: mem[RingDataOffset:], pos: start}, nil
}

// take copies output from the view's offset, up to head, into dst and
// moves the offset on. ok is false when those bytes were overwritten before
// or while they were copied: the client fell more than the ring behind.
func (v *ringView) take(dst []byte, head uint64) (n int, ok bool) {
	if head > v.hdr.Head.Load() {
		head = v.hdr.Head.Load() // a head frame never runs ahead; be safe anyway
	}
	if head <= v.pos {
		return 0, true
	}
	n = RingCopy(dst, v.data, v.pos, head)
	if v.hdr.Reserve.Load() > v.pos+uint64(len(v.data)) {
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
	return RingMappable && ok
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
