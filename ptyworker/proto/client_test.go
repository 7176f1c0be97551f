package proto_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
)

func TestEventRelease(t *testing.T) {
	// sync.Pool keeps what was put on this P until a GC: hold both still.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))

	// Under the race detector sync.Pool drops a random quarter of what
	// is put in it, so a buffer is released until one comes back (the
	// first try does without -race).
	reused := false
	for try := 0; try < 20 && !reused; try++ {
		big := proto.EventData(2 * proto.MinPooledData)
		ev := proto.Event{Kind: proto.EventKindOutput, Data: big}
		ev.Release()
		if ev.Data != nil {
			t.Fatalf("Data after Release = %q; want nil", ev.Data)
		}
		again := proto.EventData(proto.MinPooledData + 100)
		if len(again) != proto.MinPooledData+100 {
			t.Fatalf("eventData(%d) has length %d", proto.MinPooledData+100, len(again))
		}
		reused = &again[0] == &big[0]
	}
	if !reused {
		t.Error("eventData after a Release did not reuse the released buffer (20 tries)")
	}
	// Too small to be worth pooling: neither kept nor handed out.
	small := make([]byte, 10)
	(&proto.Event{Data: small}).Release()
	if got := proto.EventData(proto.MinPooledData); &got[0] == &small[0] {
		t.Error("a 10-byte buffer was pooled")
	}
}

// TestClientFrameCutShort: a worker that stops reading makes SendInput
// give up mid-frame; the client then closes the connection (the rest of
// the stream would be misread) and later calls fail at once.
func TestClientFrameCutShort(t *testing.T) {
	dir := shortTempDir(t)
	ln, err := net.Listen("unix", filepath.Join(dir, "stuck.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc // held open, never read
		}
	}()
	c, err := proto.Dial(t.Context(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer func() {
		if nc := <-accepted; nc != nil {
			nc.Close()
		}
	}()
	defer proto.SetSendInputTimeout(200 * time.Millisecond)()
	if err := c.SendInput(make([]byte, proto.MaxDataFrame)); !errors.Is(err, proto.ErrClientClosed) {
		t.Fatalf("SendInput of %d bytes to a worker that never reads: %v; want ErrClientClosed (frame cut short)", proto.MaxDataFrame, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := c.Health(ctx); !errors.Is(err, proto.ErrClientClosed) {
		t.Errorf("Health after a frame was cut short: %v; want ErrClientClosed at once", err)
	}
}
