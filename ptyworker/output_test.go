package ptyworker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestSubscriberWakes: the wake-up rule of subscriber. A caught-up consumer
// is woken by any output; one that is behind, or lazy, only once a batch
// is pending.
func TestSubscriberWakes(t *testing.T) {
	o := newOutput(1 << 20)
	s := newSubscriber(0, nil)
	o.subscribe(s, 0)
	woken := func() bool {
		select {
		case <-s.wake:
			return true
		default:
			return false
		}
	}
	woken() // subscribe's own poke

	batch := s.batch
	if batch != 256<<10 {
		t.Fatalf("batch of a subscriber with no limit on a 1 MiB ring = %d; want a quarter, %d", batch, 256<<10)
	}
	take := func() { s.next.Store(o.head()) }

	o.write([]byte("a"))
	if !woken() {
		t.Error("a caught-up consumer was not woken by output")
	}
	o.write([]byte("b"))
	if woken() {
		t.Error("a consumer that has not taken the last output was woken again by a byte")
	}
	take()
	s.lazy.Store(true)
	o.write([]byte("c"))
	if woken() {
		t.Error("a lazy consumer was woken by a byte")
	}
	o.write(make([]byte, batch-2))
	if woken() {
		t.Errorf("a lazy consumer was woken with %d bytes pending; want only at %d", batch-1, batch)
	}
	o.write([]byte("d"))
	if !woken() {
		t.Errorf("a lazy consumer was not woken with a batch (%d bytes) pending", batch)
	}
	take()
	s.lazy.Store(false)
	o.write([]byte("e"))
	if !woken() {
		t.Error("a consumer caught up and no longer lazy was not woken by output")
	}

	// What a consumer may fall behind bounds its batch: it must be woken
	// well before it would be dropped, or its output overwritten.
	for _, tc := range []struct {
		ring        int
		limit, want uint64
	}{
		{64 << 10, 0, 16 << 10},
		{64 << 10, 8 << 10, 2 << 10},
		{64 << 10, 1 << 30, 16 << 10},
		{8 << 20, 0, 2 << 20},
		{8 << 20, 1 << 20, 256 << 10},
		{8 << 20, 3, 1},
	} {
		s := newSubscriber(tc.limit, nil)
		newOutput(tc.ring).subscribe(s, 0)
		if s.batch != tc.want {
			t.Errorf("batch of a subscriber with limit %d on a %d-byte ring = %d; want %d", tc.limit, tc.ring, s.batch, tc.want)
		}
	}
}

// TestFloodTailDelivered: after a flood, in which the client connection
// and the transcript take output in batches, the few bytes that end it
// reach both without the agent writing more or exiting.
func TestFloodTailDelivered(t *testing.T) {
	spec := testSpec(t, "sh", "-c", "read go; head -c 4194304 /dev/zero | tr '\\0' x; echo TAIL-END; exec sleep 600")
	spec.RingSize = 8 << 20 // a test client on a loaded machine must not be dropped
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s := follow(c, 0, 0)
	if err := c.SendInput([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	// The transcript's start marker holds the command line, so the tail is
	// looked for with the flood's last byte before it and CRLF after.
	const tail = "xTAIL-END\r\n"
	s.waitOutput(t, tail)
	out := s.output()
	if n := strings.Count(out, "x"); n != 4<<20 {
		t.Errorf("client got %d bytes of the flood; want %d", n, 4<<20)
	}
	waitFor(t, "the transcript to end with the tail", func() bool {
		return strings.Contains(readTranscript(t, spec), tail)
	})
	if tr := readTranscript(t, spec); !bytes.Contains([]byte(tr), bytes.Repeat([]byte("x"), 4<<20)) {
		t.Errorf("the transcript does not hold the whole flood: %d x, len %d, tail %q", strings.Count(tr, "x"), len(tr), tr[len(tr)-40:])
	}
}

// TestFloodBytesExact: a flood of distinct lines, three times the ring (so
// it wraps while clients and the transcript follow it), reaches a client
// and the transcript byte for byte, in order.
func TestFloodBytesExact(t *testing.T) {
	var text bytes.Buffer
	for i := 0; text.Len() < 48<<20; i++ {
		fmt.Fprintf(&text, "%08d the quick brown fox jumps over the lazy dog\n", i)
	}
	file := filepath.Join(t.TempDir(), "flood.txt")
	if err := os.WriteFile(file, text.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t, "sh", "-c", "read go; exec cat "+file)
	// A test client must not be dropped: it may fall a ring behind only
	// if it stalls for as long as the PTY takes to fill it, about 200 ms
	// here (4 MiB, 50 ms, was too short on a loaded CI machine once).
	// Under -race the client fell 17 to 22 MiB behind in 1 run of 10: the
	// ring is twice as big there, and the flood still wraps it.
	spec.RingSize = 16 << 20
	if raceEnabled {
		spec.RingSize = 32 << 20
	}
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s := follow(c, 0, 0)
	if err := c.SendInput([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := tw.wait(); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	// The terminal echoes "go" and turns each \n into \r\n.
	want := "go\r\n" + strings.ReplaceAll(text.String(), "\n", "\r\n")
	waitFor(t, "the client to have all output", func() bool { return len(s.output()) >= len(want) })
	if got := s.output(); got != want {
		t.Errorf("client got %d bytes, first difference at %d; want the %d bytes the agent wrote", len(got), firstDiff(got, want), len(want))
	}
	s.mu.Lock()
	gap, desync := s.gapError, s.desync
	s.mu.Unlock()
	if gap != nil || desync != nil {
		t.Errorf("client stream: %v, desync %+v", gap, desync)
	}
	tr := readTranscript(t, spec)
	i := strings.Index(tr, "\r\n"+want+"\r\n"+MarkerPrefix)
	if i < 0 || !strings.HasPrefix(tr, "\r\n"+MarkerPrefix) || strings.Count(tr, MarkerPrefix) != 2 {
		t.Errorf("the transcript is not start marker, the output, exit marker: %d bytes, %d markers, output found at %d", len(tr), strings.Count(tr, MarkerPrefix), i)
	}
}

// firstDiff is the first index where a and b differ.
func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
