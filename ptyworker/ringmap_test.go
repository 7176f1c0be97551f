package ptyworker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// needMappable skips where clients never map the ring (not amd64).
func needMappable(t *testing.T) {
	t.Helper()
	if !proto.RingMappable {
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
	res, err := c.Attach(ctxT(t), proto.AttachParams{Mapped: true, Offset: new(uint64)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Mapped || res.Mode != proto.AttachReplay {
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
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	c.SendInput([]byte("50\n"))
	s.waitOutput(t, "batch-done\r\n")
	full := s.output()

	mid := uint64(len(full) / 2)
	c2 := tw.dial()
	s2 := follow(c2, 0, 0)
	res, err := c2.Attach(ctxT(t), proto.AttachParams{Offset: &mid, Mapped: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Mapped || res.Mode != proto.AttachReplay || res.Offset != mid {
		t.Fatalf("Attach(mapped, offset %d) = %+v; want a mapped replay from %d", mid, res, mid)
	}
	waitFor(t, "the replayed bytes", func() bool { return len(s2.output()) >= len(full)-int(mid) })
	if got, want := s2.output(), full[mid:]; got != want {
		t.Errorf("mapped replay from %d = %q; want %q", mid, got, want)
	}

	c3 := tw.dial()
	s3 := follow(c3, 80, 24)
	res, err = c3.Attach(ctxT(t), proto.AttachParams{Mapped: true, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Mapped || res.Mode != proto.AttachSnapshot {
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
	if res, err := slow.Attach(ctxT(t), proto.AttachParams{Mapped: true}); err != nil || !res.Mapped {
		t.Fatalf("slow Attach(mapped) = %+v, %v", res, err)
	}
	fast := tw.dial()
	fs := follow(fast, 0, 0)
	if _, err := fast.Attach(ctxT(t), proto.AttachParams{Mapped: true}); err != nil {
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
	var desync *proto.DesyncEventData
	for ev := range slow.Events() {
		if ev.Kind == proto.EventKindDesync {
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
