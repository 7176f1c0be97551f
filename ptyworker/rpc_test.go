package ptyworker

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// checkServing proves the worker still answers a well-behaved client.
func checkServing(t *testing.T, tw *testWorker) {
	t.Helper()
	c := tw.dial()
	h, err := c.Health(ctxT(t))
	if err != nil || !h.OK {
		t.Fatalf("after bad input Health() = %+v, %v; want ok", h, err)
	}
	c.Close()
}

func wantError(t *testing.T, m *message, id uint64, code string) {
	t.Helper()
	if m == nil {
		t.Fatalf("connection ended; want a %s error for id %d", code, id)
	}
	if m.Error == nil || m.Error.Code != code || m.ID != id {
		t.Fatalf("got %+v (error %+v); want a %s error for id %d", m, m.Error, code, id)
	}
	if m.Error.Message == "" {
		t.Errorf("%s error without a message", code)
	}
}

func TestRPCBadInput(t *testing.T) {
	spec := testSpec(t, "cat")
	tw := startWorker(t, spec, Options{})
	hello := HelloParams{RPCMajor: RPCMajor, RPCMinor: RPCMinor, Token: spec.Token, DaemonInstanceID: spec.DaemonInstanceID}

	t.Run("malformed JSON", func(t *testing.T) {
		r := tw.raw()
		r.send(FrameControl, []byte(`{"id":7,"method":"hello","params":{`))
		wantError(t, r.next(), 0, CodeBadRequest) // the id is unreadable
		r.send(FrameControl, []byte(`not json at all`))
		wantError(t, r.next(), 0, CodeBadRequest)
		r.send(FrameControl, []byte(`{"id":8,"method":"hello"} {"id":9}`))
		wantError(t, r.next(), 8, CodeBadRequest)
		r.send(FrameControl, []byte(`{"id":10,"method":"hello","params":{"rpc_major":1,"bogus":true}}`))
		wantError(t, r.next(), 10, CodeBadRequest)
		// The same connection goes on.
		r.hello(spec)
		r.request(11, MethodHealth, nil)
		if m := r.next(); m == nil || m.Error != nil || m.ID != 11 {
			t.Fatalf("health after malformed input: %+v", m)
		}
		checkServing(t, tw)
	})
	t.Run("unknown method", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		r.request(5, "frobnicate", nil)
		wantError(t, r.next(), 5, CodeBadRequest)
		r.request(6, "", nil)
		wantError(t, r.next(), 6, CodeBadRequest)
		r.request(7, MethodInfo, nil)
		if m := r.next(); m == nil || m.Error != nil {
			t.Fatalf("info after an unknown method: %+v", m)
		}
		checkServing(t, tw)
	})
	t.Run("bad params", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		r.request(2, MethodResize, map[string]any{"cols": "wide"})
		wantError(t, r.next(), 2, CodeBadRequest)
		r.request(3, MethodSignal, SignalParams{Signal: "NOPE"})
		wantError(t, r.next(), 3, CodeBadRequest)
		r.request(4, MethodSignal, SignalParams{Signal: "INT", Target: "everyone"})
		wantError(t, r.next(), 4, CodeBadRequest)
		r.request(5, MethodAttach, AttachParams{Cols: 80})
		wantError(t, r.next(), 5, CodeBadRequest)
		checkServing(t, tw)
	})
	t.Run("oversized control frame", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		var h [5]byte
		h[0] = FrameControl
		binary.BigEndian.PutUint32(h[1:], MaxControlFrame+1)
		r.nc.Write(h[:])
		wantError(t, r.next(), 0, CodeBadRequest)
		if m := r.next(); m != nil {
			t.Errorf("after an oversized frame got %+v; want the connection closed", m)
		}
		checkServing(t, tw)
	})
	t.Run("oversized data frame", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		var h [5]byte
		h[0] = FrameData
		binary.BigEndian.PutUint32(h[1:], MaxDataFrame+offsetLen+1)
		r.nc.Write(h[:])
		wantError(t, r.next(), 0, CodeBadRequest)
		if m := r.next(); m != nil {
			t.Errorf("after an oversized frame got %+v; want the connection closed", m)
		}
		checkServing(t, tw)
	})
	t.Run("unframed JSON line", func(t *testing.T) {
		r := tw.raw()
		r.nc.Write([]byte(`{"id":1,"method":"hello"}` + "\n"))
		m := r.next()
		wantError(t, m, 0, CodeBadRequest)
		if !strings.Contains(m.Error.Message, "frame type") {
			t.Errorf("error %q does not say the frame type is wrong", m.Error.Message)
		}
		checkServing(t, tw)
	})
	t.Run("request before hello", func(t *testing.T) {
		r := tw.raw()
		r.request(3, MethodInfo, nil)
		wantError(t, r.next(), 3, CodeUnauthorized)
		r.send(FrameData, []byte("rm -rf /\n"))
		wantError(t, r.next(), 0, CodeUnauthorized)
		checkServing(t, tw)
	})
	t.Run("data frame before hello", func(t *testing.T) {
		// Refused on its header: the worker does not take in up to 1 MiB
		// of payload from a peer that has not said hello.
		r := tw.raw()
		var h [5]byte
		h[0] = FrameData
		binary.BigEndian.PutUint32(h[1:], MaxDataFrame+offsetLen)
		r.nc.Write(h[:])
		m := r.next()
		wantError(t, m, 0, CodeUnauthorized)
		if !strings.Contains(m.Error.Message, "must be hello") {
			t.Errorf("error %q; want it to say the first request must be hello (not wait for the payload)", m.Error.Message)
		}
		if m := r.next(); m != nil {
			t.Errorf("after a data frame before hello got %+v; want the connection closed", m)
		}
		checkServing(t, tw)
	})
	t.Run("wrong token", func(t *testing.T) {
		r := tw.raw()
		p := hello
		p.Token = strings.Repeat("x", len(spec.Token))
		r.request(1, MethodHello, p)
		wantError(t, r.next(), 1, CodeUnauthorized)
		if m := r.next(); m != nil {
			t.Errorf("after a wrong token got %+v; want the connection closed", m)
		}
		checkServing(t, tw)
	})
	t.Run("guesses after a wrong token", func(t *testing.T) {
		// Requests already sent behind a refused hello are not served:
		// one connection gets one guess. (Were the next hello a right
		// guess, the remove behind it would end the session.)
		spec := testSpec(t, "cat")
		tw := startWorker(t, spec, Options{})
		hello := HelloParams{RPCMajor: RPCMajor, RPCMinor: RPCMinor, Token: spec.Token, DaemonInstanceID: spec.DaemonInstanceID}
		r := tw.raw()
		p := hello
		p.Token = strings.Repeat("x", len(spec.Token))
		r.pipeline(rawRequest{1, MethodHello, p}, rawRequest{2, MethodHello, hello}, rawRequest{3, MethodRemove, nil})
		wantError(t, r.next(), 1, CodeUnauthorized)
		if m := r.next(); m != nil {
			t.Errorf("requests sent behind a wrong token got %+v; want the connection closed", m)
		}
		checkServing(t, tw)
		if reg, err := ReadRegistry(spec.RegistryPath()); err != nil || reg.State != StateRunning {
			t.Errorf("registry after a remove sent behind a wrong token: %+v, %v; want the session running", reg, err)
		}
	})
	t.Run("failed second hello", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		p := hello
		p.RPCMinor = RPCMinor + 1000
		p.RPCMajor = RPCMajor + 1
		r.request(2, MethodHello, p)
		wantError(t, r.next(), 2, CodeUnsupportedVersion)
		r.request(3, MethodInfo, nil)
		wantError(t, r.next(), 3, CodeUnauthorized)
		checkServing(t, tw)
	})
	t.Run("long method name", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		r.request(2, strings.Repeat("m", 60000), nil)
		m := r.next()
		wantError(t, m, 2, CodeBadRequest)
		if len(m.Error.Message) > 512 {
			t.Errorf("the error quotes all of a %d-byte method name (%d bytes); want it clipped", 60000, len(m.Error.Message))
		}
		checkServing(t, tw)
	})
	t.Run("peer that never reads", func(t *testing.T) {
		// Its answers fill the socket, then its queue; the worker drops
		// it and closes the connection, though a write to it is blocked.
		r := tw.raw()
		r.nc.SetWriteDeadline(time.Now().Add(waitTimeout))
		var err error
		for i := 0; err == nil; i++ {
			err = WriteFrame(r.nc, FrameControl, []byte(fmt.Sprintf(`{"id":%d,"method":"nope-%s"}`, i, strings.Repeat("m", 200))))
		}
		if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("writing to a worker while never reading its answers ended with %v; want the worker to close the connection (EPIPE or ECONNRESET)", err)
		}
		checkServing(t, tw)
	})
	t.Run("wrong daemon instance", func(t *testing.T) {
		r := tw.raw()
		p := hello
		p.DaemonInstanceID = "another-daemon"
		r.request(1, MethodHello, p)
		wantError(t, r.next(), 1, CodeUnauthorized)
		checkServing(t, tw)
	})
	t.Run("wrong session", func(t *testing.T) {
		r := tw.raw()
		p := hello
		p.SessionID = "00000000-0000-0000-0000-000000000000"
		r.request(1, MethodHello, p)
		wantError(t, r.next(), 1, CodeSessionNotFound)
		checkServing(t, tw)
	})
	t.Run("wrong rpc_major", func(t *testing.T) {
		r := tw.raw()
		p := hello
		p.RPCMajor = RPCMajor + 1
		r.request(1, MethodHello, p)
		m := r.next()
		wantError(t, m, 1, CodeUnsupportedVersion)
		var v versionData
		if err := json.Unmarshal(m.Error.Data, &v); err != nil || v.RPCMajor != RPCMajor {
			t.Errorf("unsupported_version data = %s; want the worker's version", m.Error.Data)
		}
		// The connection stays open for a hello at a version both speak.
		r.hello(spec)
		checkServing(t, tw)
	})
	t.Run("newer rpc_minor negotiates down", func(t *testing.T) {
		c, err := Dial(ctxT(t), spec.SocketPath())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		p := hello
		p.RPCMinor = RPCMinor + 3
		res, err := c.HelloAs(ctxT(t), p)
		if err != nil {
			t.Fatalf("HelloAs(minor %d) = %v; want a retry at the worker's minor", p.RPCMinor, err)
		}
		if res.RPCMinor != RPCMinor {
			t.Errorf("HelloAs() minor = %d; want %d", res.RPCMinor, RPCMinor)
		}
	})
	for _, typ := range []byte{FrameSnapshot, FrameRing, FrameHead} {
		t.Run(fmt.Sprintf("%q frame from a client", typ), func(t *testing.T) {
			r := tw.raw()
			r.hello(spec)
			r.send(typ, make([]byte, 8))
			wantError(t, r.next(), 0, CodeBadRequest)
			checkServing(t, tw)
		})
	}
	t.Run("read-only attach refuses input", func(t *testing.T) {
		c := tw.dial()
		follow(c, 0, 0)
		if _, err := c.Attach(ctxT(t), AttachParams{ReadOnly: true}); err != nil {
			t.Fatal(err)
		}
		if err := c.Input(ctxT(t), []byte("x")); !IsCode(err, CodeBadRequest) {
			t.Errorf("Input() on a read-only attach = %v; want %s", err, CodeBadRequest)
		}
	})
}

func TestRPCPeerUID(t *testing.T) {
	spec := testSpec(t, "cat")
	other := uint32(os.Getuid()) + 4242
	tw := startWorker(t, spec, Options{AllowedUIDs: []uint32{other}})
	for i := range 2 {
		r := tw.raw()
		m := r.next()
		wantError(t, m, 0, CodeUnauthorized)
		if !strings.Contains(m.Error.Message, "peer uid") {
			t.Errorf("error %q does not name the peer uid", m.Error.Message)
		}
		if m := r.next(); m != nil {
			t.Errorf("connection %d: after unauthorized got %+v; want it closed", i, m)
		}
	}
	// The worker is unharmed: its registry still says running.
	r, err := ReadRegistry(spec.RegistryPath())
	if err != nil || r.State != StateRunning {
		t.Errorf("registry after refused peers = %+v, %v; want running", r, err)
	}
}

func TestSocketAndFileModes(t *testing.T) {
	spec := testSpec(t, "cat")
	startWorker(t, spec, Options{})
	for _, tc := range []struct {
		path string
		want os.FileMode
	}{
		{spec.SocketDir(), 0o700 | os.ModeDir},
		{spec.SocketPath(), 0o600 | os.ModeSocket},
		{dirOf(spec.RegistryPath()), 0o700 | os.ModeDir},
		{spec.RegistryPath(), 0o600},
		{dirOf(spec.TranscriptPath()), 0o700 | os.ModeDir},
		{spec.TranscriptPath(), 0o600},
	} {
		fi, err := os.Lstat(tc.path)
		if err != nil {
			t.Error(err)
			continue
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeDir | os.ModeSocket); got != tc.want {
			t.Errorf("mode of %s = %v; want %v", tc.path, got, tc.want)
		}
	}
	if len(spec.SocketPath()) > MaxSocketPath {
		t.Errorf("socket path %s is %d bytes; want at most %d", spec.SocketPath(), len(spec.SocketPath()), MaxSocketPath)
	}
}

func TestEventRelease(t *testing.T) {
	// sync.Pool keeps what was put on this P until a GC: hold both still.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))

	// Under the race detector sync.Pool drops a random quarter of what
	// is put in it, so a buffer is released until one comes back (the
	// first try does without -race).
	reused := false
	for try := 0; try < 20 && !reused; try++ {
		big := eventData(2 * minPooledData)
		ev := Event{Kind: EventKindOutput, Data: big}
		ev.Release()
		if ev.Data != nil {
			t.Fatalf("Data after Release = %q; want nil", ev.Data)
		}
		again := eventData(minPooledData + 100)
		if len(again) != minPooledData+100 {
			t.Fatalf("eventData(%d) has length %d", minPooledData+100, len(again))
		}
		reused = &again[0] == &big[0]
	}
	if !reused {
		t.Error("eventData after a Release did not reuse the released buffer (20 tries)")
	}
	// Too small to be worth pooling: neither kept nor handed out.
	small := make([]byte, 10)
	(&Event{Data: small}).Release()
	if got := eventData(minPooledData); &got[0] == &small[0] {
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
	c, err := Dial(t.Context(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer func() {
		if nc := <-accepted; nc != nil {
			nc.Close()
		}
	}()
	old := sendInputTimeout
	sendInputTimeout = 200 * time.Millisecond
	defer func() { sendInputTimeout = old }()
	if err := c.SendInput(make([]byte, MaxDataFrame)); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("SendInput of %d bytes to a worker that never reads: %v; want ErrClientClosed (frame cut short)", MaxDataFrame, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if _, err := c.Health(ctx); !errors.Is(err, ErrClientClosed) {
		t.Errorf("Health after a frame was cut short: %v; want ErrClientClosed at once", err)
	}
}
