package ptyworker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
	"golang.org/x/sys/unix"
)

func frameSeed(typ byte, payload string) []byte {
	return frameBytes(typ, []byte(payload))
}

// FuzzReadFrame feeds arbitrary bytes to the frame and control-message
// decoders: no panics, limits hold, and what decodes re-encodes to the same
// message.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameSeed(FrameControl, `{"id":1,"method":"hello","params":{"rpc_major":1,"rpc_minor":0,"token":"t","daemon_instance_id":"d"}}`))
	f.Add(frameSeed(FrameControl, `{"event":"exit","data":{"code":3}}`))
	f.Add(append(frameSeed(FrameData, "\x00\x00\x00\x00\x00\x00\x00\x05hello"), frameSeed(FrameControl, `{"id":2,"result":{}}`)...))
	f.Add([]byte("J\xff\xff\xff\xff"))
	f.Add([]byte(`{"id":1}` + "\n"))
	f.Add(append(frameSeed(FrameRing, "\x00\x00\x00\x00\x00\x00\x00\x00"), frameSeed(FrameHead, "\x00\x00\x00\x00\x00\x00\x10\x00")...))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			typ, p, err := ReadFrame(r, nil)
			if err != nil {
				return
			}
			if len(p) > frameLimit(typ) {
				t.Fatalf("frame %q of %d bytes passed the limit %d", typ, len(p), frameLimit(typ))
			}
			if typ != FrameControl {
				continue
			}
			m, err := decodeMessage(p)
			if err != nil {
				continue
			}
			enc, err := encodeControl(m)
			if err != nil {
				continue // over the limit once re-encoded (escapes grow)
			}
			_, p2, err := ReadFrame(bytes.NewReader(enc), nil)
			if err != nil {
				t.Fatalf("re-encoded message does not read back: %v", err)
			}
			m2, err := decodeMessage(p2)
			if err != nil {
				t.Fatalf("re-encoded message %q does not decode: %v", p2, err)
			}
			if m.ID != m2.ID || m.Method != m2.Method || m.Event != m2.Event {
				t.Fatalf("round trip changed the message: %+v -> %+v", m, m2)
			}
			for _, v := range []any{&HelloParams{}, &AttachParams{}, &InputParams{}, &ResizeParams{}, &SignalParams{}} {
				params(m, v)
			}
		}
	})
}

// FuzzClientFrames feeds arbitrary bytes, as a worker's side of a unix
// socket, to a Client: whatever comes (a head frame before any ring, a
// ring frame without its descriptor, data frames, events), the client
// neither panics nor hangs, and its events end with the connection.
func FuzzClientFrames(f *testing.F) {
	f.Add(frameSeed(FrameHead, "\x00\x00\x00\x00\x00\x00\x10\x00"))
	f.Add(frameSeed(FrameRing, "\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add(append(frameSeed(FrameData, "\x00\x00\x00\x00\x00\x00\x00\x05hello"), frameSeed(FrameControl, `{"event":"exit","data":{"code":3}}`)...))
	f.Add(frameSeed(FrameControl, `{"event":"desync","data":{"offset":7}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		worker := os.NewFile(uintptr(fds[0]), "worker")
		cf := os.NewFile(uintptr(fds[1]), "client")
		nc, err := net.FileConn(cf)
		cf.Close()
		if err != nil {
			worker.Close()
			t.Fatal(err)
		}
		c := NewClient(nc)
		go func() {
			worker.Write(in)
			worker.Close()
		}()
		for ev := range c.Events() {
			ev.Release()
		}
		c.Close()
	})
}

// FuzzParseSpec: spec parsing never panics, and an accepted spec survives a
// write/parse round trip.
func FuzzParseSpec(f *testing.F) {
	s := testSpec(f, "cat")
	s.SessionFile = "/x/s.jsonl"
	s.StaleAfter = Duration(time.Minute)
	b, _ := json.Marshal(s)
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"stale_after":"10m","ring_size":-1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ParseSpec(in)
		if err != nil {
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSpec(out); err != nil {
			t.Fatalf("accepted spec does not parse back: %v\n%s", err, out)
		}
	})
}

// FuzzScreen: any output, cut anywhere, gives the same screen as uncut, and
// its rendering replays without panicking.
func FuzzScreen(f *testing.F) {
	f.Add([]byte("héllo\x1b[31m wörld\x1b[0m\r\n✓"), uint16(3))
	f.Add([]byte("\x1b[?1049h\x1b[2J\x1b[5;5Hx\x1b[?2004h\x1b[>1u"), uint16(7))
	f.Add([]byte("\xe2\x82"), uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		if len(in) > 4096 {
			return
		}
		whole := feedScreen(t, in, nil, 20, 6)
		split := feedScreen(t, in, []int{int(cut)}, 20, 6)
		if w, g := whole.vt.String(), split.vt.String(); w != g {
			t.Fatalf("cut at %d changes the screen:\n%s\nwant\n%s", cut, g, w)
		}
		render(whole.vt, &whole.modes)
	})
}

// FuzzWorkerConn writes arbitrary bytes to a live worker's connection after
// hello: the worker must neither crash nor stop serving other clients.
func FuzzWorkerConn(f *testing.F) {
	f.Add(frameSeed(FrameControl, `{"id":1,"method":"info"}`))
	f.Add(frameSeed(FrameControl, `{"id":1,"method":"attach","params":{"offset":0}}`))
	f.Add(frameSeed(FrameControl, `{"id":2,"method":"resize","params":{"cols":0,"rows":99999}}`))
	f.Add(frameSeed(FrameData, "typed input\n"))
	f.Add([]byte("X\x00\x00\x00\x01!"))
	f.Add([]byte("J\x7f\xff\xff\xff"))
	spec := testSpec(f, "cat")
	// One worker for all inputs: start it once, stop it when the fuzz ends.
	// Each call of the target has its own (go test -count=2 calls it twice,
	// and the first call's worker is stopped by then).
	var (
		fuzzWorkerOnce sync.Once
		fuzzWorker     *testWorker
	)
	f.Cleanup(func() {
		if fuzzWorker != nil {
			fuzzWorker.cancel()
			<-fuzzWorker.done
		}
	})
	f.Fuzz(func(t *testing.T, in []byte) {
		// Methods that end the session or touch its processes are out.
		for _, bad := range []string{"remove", "signal"} {
			if bytes.Contains(bytes.ToLower(in), []byte(bad)) {
				return
			}
		}
		fuzzWorkerOnce.Do(func() { fuzzWorker = startFuzzWorker(f, spec) })
		nc, err := net.Dial("unix", spec.SocketPath())
		if err != nil {
			t.Fatalf("worker stopped serving: %v", err)
		}
		r := &rawConn{t: t, nc: nc}
		r.hello(spec)
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		nc.Write(in)
		// Read what comes back for a moment, then hang up.
		nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		for {
			if _, _, err := ReadFrame(nc, nil); err != nil {
				break
			}
		}
		nc.Close()
		c, err := Dial(context.Background(), spec.SocketPath())
		if err != nil {
			t.Fatalf("after input %q the worker stopped serving: %v", in, err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Hello(ctx, spec.Token, spec.DaemonInstanceID); err != nil {
			t.Fatalf("after input %q hello fails: %v", in, err)
		}
		if h, err := c.Health(ctx); err != nil || !h.OK {
			t.Fatalf("after input %q health = %+v, %v", in, h, err)
		}
	})
}

// startFuzzWorker starts the shared worker outside any one fuzz input's
// test (its cleanup belongs to the fuzz target).
func startFuzzWorker(f *testing.F, spec *Spec) *testWorker {
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{t: f, spec: spec, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tw.done)
		tw.err = Run(ctx, spec, Options{})
	}()
	err := waitfor.Until(waitTimeout, "fuzz worker of session "+spec.SessionID+" to start", func() error {
		r, err := ReadRegistry(spec.RegistryPath())
		if err != nil {
			return err
		}
		if r.State != StateRunning {
			return fmt.Errorf("registry says %s", r.State)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return tw
}
