package ptyworker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
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

func wantError(t *testing.T, m *proto.Message, id uint64, code string) {
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
	hello := proto.HelloParams{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, Token: spec.Token, DaemonInstanceID: spec.DaemonInstanceID}

	t.Run("malformed JSON", func(t *testing.T) {
		r := tw.raw()
		r.send(proto.FrameControl, []byte(`{"id":7,"method":"hello","params":{`))
		wantError(t, r.next(), 0, proto.CodeBadRequest) // the id is unreadable
		r.send(proto.FrameControl, []byte(`not json at all`))
		wantError(t, r.next(), 0, proto.CodeBadRequest)
		r.send(proto.FrameControl, []byte(`{"id":8,"method":"hello"} {"id":9}`))
		wantError(t, r.next(), 8, proto.CodeBadRequest)
		r.send(proto.FrameControl, []byte(`{"id":10,"method":"hello","params":{"rpc_major":1,"bogus":true}}`))
		wantError(t, r.next(), 10, proto.CodeBadRequest)
		// The same connection goes on.
		r.hello(spec)
		r.request(11, proto.MethodHealth, nil)
		if m := r.next(); m == nil || m.Error != nil || m.ID != 11 {
			t.Fatalf("health after malformed input: %+v", m)
		}
		checkServing(t, tw)
	})
	t.Run("unknown method", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		r.request(5, "frobnicate", nil)
		wantError(t, r.next(), 5, proto.CodeBadRequest)
		r.request(6, "", nil)
		wantError(t, r.next(), 6, proto.CodeBadRequest)
		r.request(7, proto.MethodInfo, nil)
		if m := r.next(); m == nil || m.Error != nil {
			t.Fatalf("info after an unknown method: %+v", m)
		}
		checkServing(t, tw)
	})
	t.Run("bad params", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		r.request(2, proto.MethodResize, map[string]any{"cols": "wide"})
		wantError(t, r.next(), 2, proto.CodeBadRequest)
		r.request(3, proto.MethodSignal, proto.SignalParams{Signal: "NOPE"})
		wantError(t, r.next(), 3, proto.CodeBadRequest)
		r.request(4, proto.MethodSignal, proto.SignalParams{Signal: "INT", Target: "everyone"})
		wantError(t, r.next(), 4, proto.CodeBadRequest)
		r.request(5, proto.MethodAttach, proto.AttachParams{Cols: 80})
		wantError(t, r.next(), 5, proto.CodeBadRequest)
		checkServing(t, tw)
	})
	t.Run("oversized control frame", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		var h [5]byte
		h[0] = proto.FrameControl
		binary.BigEndian.PutUint32(h[1:], proto.MaxControlFrame+1)
		r.nc.Write(h[:])
		wantError(t, r.next(), 0, proto.CodeBadRequest)
		if m := r.next(); m != nil {
			t.Errorf("after an oversized frame got %+v; want the connection closed", m)
		}
		checkServing(t, tw)
	})
	t.Run("oversized data frame", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		var h [5]byte
		h[0] = proto.FrameData
		binary.BigEndian.PutUint32(h[1:], proto.MaxDataFrame+proto.OffsetLen+1)
		r.nc.Write(h[:])
		wantError(t, r.next(), 0, proto.CodeBadRequest)
		if m := r.next(); m != nil {
			t.Errorf("after an oversized frame got %+v; want the connection closed", m)
		}
		checkServing(t, tw)
	})
	t.Run("unframed JSON line", func(t *testing.T) {
		r := tw.raw()
		r.nc.Write([]byte(`{"id":1,"method":"hello"}` + "\n"))
		m := r.next()
		wantError(t, m, 0, proto.CodeBadRequest)
		if !strings.Contains(m.Error.Message, "frame type") {
			t.Errorf("error %q does not say the frame type is wrong", m.Error.Message)
		}
		checkServing(t, tw)
	})
	t.Run("request before hello", func(t *testing.T) {
		r := tw.raw()
		r.request(3, proto.MethodInfo, nil)
		wantError(t, r.next(), 3, proto.CodeUnauthorized)
		r.send(proto.FrameData, []byte("rm -rf /\n"))
		wantError(t, r.next(), 0, proto.CodeUnauthorized)
		checkServing(t, tw)
	})
	t.Run("data frame before hello", func(t *testing.T) {
		// Refused on its header: the worker does not take in up to 1 MiB
		// of payload from a peer that has not said hello.
		r := tw.raw()
		var h [5]byte
		h[0] = proto.FrameData
		binary.BigEndian.PutUint32(h[1:], proto.MaxDataFrame+proto.OffsetLen)
		r.nc.Write(h[:])
		m := r.next()
		wantError(t, m, 0, proto.CodeUnauthorized)
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
		r.request(1, proto.MethodHello, p)
		wantError(t, r.next(), 1, proto.CodeUnauthorized)
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
		hello := proto.HelloParams{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, Token: spec.Token, DaemonInstanceID: spec.DaemonInstanceID}
		r := tw.raw()
		p := hello
		p.Token = strings.Repeat("x", len(spec.Token))
		r.pipeline(rawRequest{1, proto.MethodHello, p}, rawRequest{2, proto.MethodHello, hello}, rawRequest{3, proto.MethodRemove, nil})
		wantError(t, r.next(), 1, proto.CodeUnauthorized)
		if m := r.next(); m != nil {
			t.Errorf("requests sent behind a wrong token got %+v; want the connection closed", m)
		}
		checkServing(t, tw)
		if reg, err := proto.ReadRegistry(spec.RegistryPath()); err != nil || reg.State != proto.StateRunning {
			t.Errorf("registry after a remove sent behind a wrong token: %+v, %v; want the session running", reg, err)
		}
	})
	t.Run("failed second hello", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		p := hello
		p.RPCMinor = proto.RPCMinor + 1000
		p.RPCMajor = proto.RPCMajor + 1
		r.request(2, proto.MethodHello, p)
		wantError(t, r.next(), 2, proto.CodeUnsupportedVersion)
		r.request(3, proto.MethodInfo, nil)
		wantError(t, r.next(), 3, proto.CodeUnauthorized)
		checkServing(t, tw)
	})
	t.Run("long method name", func(t *testing.T) {
		r := tw.raw()
		r.hello(spec)
		r.request(2, strings.Repeat("m", 60000), nil)
		m := r.next()
		wantError(t, m, 2, proto.CodeBadRequest)
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
			err = proto.WriteFrame(r.nc, proto.FrameControl, []byte(fmt.Sprintf(`{"id":%d,"method":"nope-%s"}`, i, strings.Repeat("m", 200))))
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
		r.request(1, proto.MethodHello, p)
		wantError(t, r.next(), 1, proto.CodeUnauthorized)
		checkServing(t, tw)
	})
	t.Run("wrong session", func(t *testing.T) {
		r := tw.raw()
		p := hello
		p.SessionID = "00000000-0000-0000-0000-000000000000"
		r.request(1, proto.MethodHello, p)
		wantError(t, r.next(), 1, proto.CodeSessionNotFound)
		checkServing(t, tw)
	})
	t.Run("wrong rpc_major", func(t *testing.T) {
		r := tw.raw()
		p := hello
		p.RPCMajor = proto.RPCMajor + 1
		r.request(1, proto.MethodHello, p)
		m := r.next()
		wantError(t, m, 1, proto.CodeUnsupportedVersion)
		var v proto.VersionData
		if err := json.Unmarshal(m.Error.Data, &v); err != nil || v.RPCMajor != proto.RPCMajor {
			t.Errorf("unsupported_version data = %s; want the worker's version", m.Error.Data)
		}
		// The connection stays open for a hello at a version both speak.
		r.hello(spec)
		checkServing(t, tw)
	})
	t.Run("newer rpc_minor negotiates down", func(t *testing.T) {
		c, err := proto.Dial(ctxT(t), spec.SocketPath())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		p := hello
		p.RPCMinor = proto.RPCMinor + 3
		res, err := c.HelloAs(ctxT(t), p)
		if err != nil {
			t.Fatalf("HelloAs(minor %d) = %v; want a retry at the worker's minor", p.RPCMinor, err)
		}
		if res.RPCMinor != proto.RPCMinor {
			t.Errorf("HelloAs() minor = %d; want %d", res.RPCMinor, proto.RPCMinor)
		}
	})
	for _, typ := range []byte{proto.FrameSnapshot, proto.FrameRing, proto.FrameHead} {
		t.Run(fmt.Sprintf("%q frame from a client", typ), func(t *testing.T) {
			r := tw.raw()
			r.hello(spec)
			r.send(typ, make([]byte, 8))
			wantError(t, r.next(), 0, proto.CodeBadRequest)
			checkServing(t, tw)
		})
	}
	t.Run("read-only attach refuses input", func(t *testing.T) {
		c := tw.dial()
		follow(c, 0, 0)
		if _, err := c.Attach(ctxT(t), proto.AttachParams{ReadOnly: true}); err != nil {
			t.Fatal(err)
		}
		if err := c.Input(ctxT(t), []byte("x")); !proto.IsCode(err, proto.CodeBadRequest) {
			t.Errorf("Input() on a read-only attach = %v; want %s", err, proto.CodeBadRequest)
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
		wantError(t, m, 0, proto.CodeUnauthorized)
		if !strings.Contains(m.Error.Message, "peer uid") {
			t.Errorf("error %q does not name the peer uid", m.Error.Message)
		}
		if m := r.next(); m != nil {
			t.Errorf("connection %d: after unauthorized got %+v; want it closed", i, m)
		}
	}
	// The worker is unharmed: its registry still says running.
	r, err := proto.ReadRegistry(spec.RegistryPath())
	if err != nil || r.State != proto.StateRunning {
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
		{proto.DirOf(spec.RegistryPath()), 0o700 | os.ModeDir},
		{spec.RegistryPath(), 0o600},
		{proto.DirOf(spec.TranscriptPath()), 0o700 | os.ModeDir},
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
	if len(spec.SocketPath()) > proto.MaxSocketPath {
		t.Errorf("socket path %s is %d bytes; want at most %d", spec.SocketPath(), len(spec.SocketPath()), proto.MaxSocketPath)
	}
}
