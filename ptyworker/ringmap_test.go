package ptyworker

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// needMappable skips where clients never map the ring (not amd64).
func needMappable(t *testing.T) {
	t.Helper()
	if !ringMappable {
		t.Skip("mapped attach is for amd64 only; clients here take data frames")
	}
}

// TestMappedAttach: a client that asks for the ring gets it, and with it
// every byte of a busy agent's output, in order, then the exit event;
// one attached from an offset gets the output from there.
func TestMappedAttach(t *testing.T) {
	needMappable(t)
	const n = 8 << 20
	spec := testSpec(t, "sh", "-c", `read go; i=0; while [ $i -lt 128 ]; do head -c 65536 /dev/zero | tr '\0' y; sleep 0.002; i=$((i+1)); done; echo; echo ALL-DONE; read end`)
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	s := follow(c, 0, 0)
	res, err := c.Attach(ctxT(t), AttachParams{Mapped: true, Offset: new(uint64)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Mapped || res.Mode != AttachReplay {
		t.Fatalf("Attach(mapped, offset 0) = %+v; want mapped, a replay", res)
	}
	c.SendInput([]byte("\n"))
	s.waitOutput(t, "ALL-DONE")
	if got := strings.Count(s.output(), "y"); got != n {
		t.Errorf("mapped client got %d bytes of output; want %d", got, n)
	}
	c.SendInput([]byte("\n"))
	if err := tw.wait(); err != nil {
		t.Errorf("Run() = %v", err)
	}
	waitFor(t, "the exit event", func() bool { return s.exitInfo() != nil })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gapError != nil {
		t.Error(s.gapError)
	}
	if s.next != s.exit.Offset {
		t.Errorf("output ends at offset %d; the exit event says %d", s.next, s.exit.Offset)
	}
}

// TestMappedAttachFromOffset: replay from an offset and a snapshot attach
// work on the ring as on data frames.
func TestMappedAttachFromOffset(t *testing.T) {
	needMappable(t)
	spec := testSpec(t, "sh", "-c", `read n; i=0; while [ $i -lt $n ]; do echo "line $i"; i=$((i+1)); done; echo batch-done; read end`)
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	c.SendInput([]byte("50\n"))
	s.waitOutput(t, "batch-done\r\n")
	full := s.output()

	mid := uint64(len(full) / 2)
	c2 := tw.dial()
	s2 := follow(c2, 0, 0)
	res, err := c2.Attach(ctxT(t), AttachParams{Offset: &mid, Mapped: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Mapped || res.Mode != AttachReplay || res.Offset != mid {
		t.Fatalf("Attach(mapped, offset %d) = %+v; want a mapped replay from %d", mid, res, mid)
	}
	waitFor(t, "the replayed bytes", func() bool { return len(s2.output()) >= len(full)-int(mid) })
	if got, want := s2.output(), full[mid:]; got != want {
		t.Errorf("mapped replay from %d = %q; want %q", mid, got, want)
	}

	c3 := tw.dial()
	s3 := follow(c3, 80, 24)
	res, err = c3.Attach(ctxT(t), AttachParams{Mapped: true, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Mapped || res.Mode != AttachSnapshot {
		t.Fatalf("Attach(mapped) = %+v; want a mapped snapshot", res)
	}
	s3.waitScreen(t, "batch-done")
	c3.SendInput([]byte("end\n"))
	s3.waitScreen(t, "end")
}

// TestMappedClientLapped: a mapped client that stops reading does not
// slow the agent; once it reads again it finds the bytes it wanted
// overwritten, gets a desync event and its connection ends, and a client
// that kept up lost nothing.
func TestMappedClientLapped(t *testing.T) {
	needMappable(t)
	// The flood: 4 MiB, four times the ring, in 64 KiB pieces with short
	// pauses (a busy agent: a test client on a loaded machine keeps up).
	const flood = 4 << 20
	spec := testSpec(t, "sh", "-c", `while read l; do if [ "$l" = flood ]; then i=0; while [ $i -lt 64 ]; do head -c 65536 /dev/zero | tr '\0' y; sleep 0.002; i=$((i+1)); done; echo; echo ALL-DONE; else echo "got $l"; fi; done`)
	tw := startWorker(t, spec, Options{})

	slow := tw.dial()
	if res, err := slow.Attach(ctxT(t), AttachParams{Mapped: true}); err != nil || !res.Mapped {
		t.Fatalf("slow Attach(mapped) = %+v, %v", res, err)
	}
	fast := tw.dial()
	fs := follow(fast, 0, 0)
	if _, err := fast.Attach(ctxT(t), AttachParams{Mapped: true}); err != nil {
		t.Fatal(err)
	}
	// One line at a time, each its own head frame: more than the slow
	// client's reader can queue as events, so it stops taking from the
	// ring; then four times the ring.
	for i := range 300 {
		fast.SendInput(fmt.Appendf(nil, "%d\n", i))
		fs.waitOutput(t, fmt.Sprintf("got %d\r\n", i))
	}
	fast.SendInput([]byte("flood\n"))
	fs.waitOutput(t, "ALL-DONE")
	if got := strings.Count(fs.output(), "y"); got != flood {
		t.Errorf("fast client got %d bytes of the flood; want %d", got, flood)
	}

	// Now the slow client reads: the events its reader queued, then the
	// desync, then the end.
	var desync *DesyncEventData
	for ev := range slow.Events() {
		if ev.Kind == EventKindDesync {
			desync = ev.Desync
		}
	}
	if desync == nil {
		t.Fatalf("slow client: no desync event before its events ended (%v)", slow.Err())
	}
	if !strings.Contains(desync.Reason, "ring") {
		t.Errorf("desync = %+v; want the ring as the reason", desync)
	}
	info, err := fast.Info(ctxT(t))
	if err != nil || !info.Running {
		t.Errorf("after the slow client's desync Info() = %+v, %v; want running", info, err)
	}
	if desync.Offset >= info.Head-uint64(spec.RingSize) {
		t.Errorf("desync offset %d; want one the ring no longer holds (head %d)", desync.Offset, info.Head)
	}
}

// TestSharedRingSealed: the memfd clients get can be mapped read-only
// only, however it is opened: no client can change the worker's output.
func TestSharedRingSealed(t *testing.T) {
	r, err := NewSharedRing(64 << 10)
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
		if mem, err := unix.Mmap(fd, 0, ringDataOffset+64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
			unix.Munmap(mem)
			t.Errorf("%s: a writable shared mapping was allowed", name)
		}
		if _, err := unix.Pwrite(fd, []byte("x"), ringDataOffset); err == nil {
			t.Errorf("%s: pwrite was allowed", name)
		}
		if err := unix.Ftruncate(fd, 1<<20); err == nil {
			t.Errorf("%s: ftruncate was allowed", name)
		}
	}
	v, err := mapRing(fd, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.unmap()
	if err := unix.Mprotect(v.mem, unix.PROT_READ|unix.PROT_WRITE); err == nil {
		t.Error("a client's read-only mapping could be made writable")
	}
	buf := make([]byte, 16)
	if n, ok := v.take(buf, r.Head()); !ok || string(buf[:n]) != "hello" {
		t.Errorf("take = %q, %v; want hello", buf[:n], ok)
	}
}

// TestRingViewLapped: a view finds out that bytes it has not taken were
// overwritten, and takes what is still there.
func TestRingViewLapped(t *testing.T) {
	r, err := NewSharedRing(MinRingSize)
	if err != nil {
		t.Fatal(err)
	}
	v, err := mapRing(r.FD(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.unmap()
	r.Write([]byte(strings.Repeat("a", MinRingSize-1)))
	buf := make([]byte, 2*MinRingSize)
	if n, ok := v.take(buf, r.Head()); !ok || n != MinRingSize-1 {
		t.Fatalf("take = %d, %v; want %d, true", n, ok, MinRingSize-1)
	}
	r.Write([]byte("bc"))
	r.Write([]byte(strings.Repeat("d", MinRingSize)))
	if n, ok := v.take(buf, r.Head()); ok {
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
	if _, err := mapRing(fd, 0); err == nil || !strings.Contains(err.Error(), "not sealed") {
		t.Errorf("mapRing(unsealed memfd) = %v; want an error about its seals", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		t.Fatal(err)
	}
	if _, err := mapRing(fd, 0); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("mapRing(empty memfd) = %v; want an error about its size", err)
	}
	if err := unix.Ftruncate(fd, ringDataOffset+4096); err != nil {
		t.Fatal(err)
	}
	if _, err := mapRing(fd, 0); err == nil || !strings.Contains(err.Error(), "bad header") {
		t.Errorf("mapRing(zeroed memfd) = %v; want a bad header", err)
	}
	r, err := NewSharedRing(MinRingSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mapRing(r.FD(), 10); err == nil || !strings.Contains(err.Error(), "past its head") {
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
	r := newRightsReader(c.(*net.UnixConn))
	defer r.close()
	n, err := r.Read(make([]byte, 16))
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("Read = %d, %v; want an error saying the descriptors were truncated", n, err)
	}
}
