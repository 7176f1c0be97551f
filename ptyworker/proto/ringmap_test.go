package proto_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/legion-dev/legion/ptyworker"
	"github.com/legion-dev/legion/ptyworker/proto"
	"golang.org/x/sys/unix"
)

// TestSharedRingSealed: the memfd clients get can be mapped read-only
// only, however it is opened: no client can change the worker's output.
func TestSharedRingSealed(t *testing.T) {
	r, err := ptyworker.NewSharedRing(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	r.Write([]byte("hello"))
	fd := r.FD()
	reopened, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(reopened)
	for name, fd := range map[string]int{"the ring's descriptor": fd, "the memfd opened again read-write": reopened} {
		if mem, err := unix.Mmap(fd, 0, proto.RingDataOffset+64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
			unix.Munmap(mem)
			t.Errorf("%s: a writable shared mapping was allowed", name)
		}
		if _, err := unix.Pwrite(fd, []byte("x"), proto.RingDataOffset); err == nil {
			t.Errorf("%s: pwrite was allowed", name)
		}
		if err := unix.Ftruncate(fd, 1<<20); err == nil {
			t.Errorf("%s: ftruncate was allowed", name)
		}
	}
	v, err := proto.MapRing(fd, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Unmap()
	if err := unix.Mprotect(v.Mem(), unix.PROT_READ|unix.PROT_WRITE); err == nil {
		t.Error("a client's read-only mapping could be made writable")
	}
	buf := make([]byte, 16)
	if n, ok := v.Take(buf, r.Head()); !ok || string(buf[:n]) != "hello" {
		t.Errorf("take = %q, %v; want hello", buf[:n], ok)
	}
}

// TestRingViewLapped: a view finds out that bytes it has not taken were
// overwritten, and takes what is still there.
func TestRingViewLapped(t *testing.T) {
	r, err := ptyworker.NewSharedRing(proto.MinRingSize)
	if err != nil {
		t.Fatal(err)
	}
	v, err := proto.MapRing(r.FD(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Unmap()
	r.Write([]byte(strings.Repeat("a", proto.MinRingSize-1)))
	buf := make([]byte, 2*proto.MinRingSize)
	if n, ok := v.Take(buf, r.Head()); !ok || n != proto.MinRingSize-1 {
		t.Fatalf("take = %d, %v; want %d, true", n, ok, proto.MinRingSize-1)
	}
	r.Write([]byte("bc"))
	r.Write([]byte(strings.Repeat("d", proto.MinRingSize)))
	if n, ok := v.Take(buf, r.Head()); ok {
		t.Errorf("take after the ring wrapped past the view = %d, true; want false", n)
	}
}

// TestMapRingRefusesBadInput: a descriptor that is not a ring is refused
// with a clear error.
func TestMapRingRefusesBadInput(t *testing.T) {
	fd, err := unix.MemfdCreate("not-a-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := proto.MapRing(fd, 0); err == nil || !strings.Contains(err.Error(), "not sealed") {
		t.Errorf("mapRing(unsealed memfd) = %v; want an error about its seals", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		t.Fatal(err)
	}
	if _, err := proto.MapRing(fd, 0); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("mapRing(empty memfd) = %v; want an error about its size", err)
	}
	if err := unix.Ftruncate(fd, proto.RingDataOffset+4096); err != nil {
		t.Fatal(err)
	}
	if _, err := proto.MapRing(fd, 0); err == nil || !strings.Contains(err.Error(), "bad header") {
		t.Errorf("mapRing(zeroed memfd) = %v; want a bad header", err)
	}
	r, err := ptyworker.NewSharedRing(proto.MinRingSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proto.MapRing(r.FD(), 10); err == nil || !strings.Contains(err.Error(), "past its head") {
		t.Errorf("mapRing(from past the head) = %v; want an error", err)
	}
}

// TestRightsReaderTruncated: descriptors beyond what the client expects
// (the kernel truncates them) end the stream with an error that says so,
// instead of a frame read without its descriptor.
func TestRightsReaderTruncated(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	f := os.NewFile(uintptr(fds[1]), "client")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pass := make([]int, 8) // more than the client's room for four
	for i := range pass {
		pass[i] = fds[0]
	}
	if err := unix.Sendmsg(fds[0], []byte("M"), unix.UnixRights(pass...), nil, 0); err != nil {
		t.Fatal(err)
	}
	r := proto.NewRightsReader(c.(*net.UnixConn))
	defer r.Close()
	n, err := r.Read(make([]byte, 16))
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("Read = %d, %v; want an error saying the descriptors were truncated", n, err)
	}
}
