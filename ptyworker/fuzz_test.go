package ptyworker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
)

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
	f.Add(frameSeed(proto.FrameControl, `{"id":1,"method":"info"}`))
	f.Add(frameSeed(proto.FrameControl, `{"id":1,"method":"attach","params":{"offset":0}}`))
	f.Add(frameSeed(proto.FrameControl, `{"id":2,"method":"resize","params":{"cols":0,"rows":99999}}`))
	f.Add(frameSeed(proto.FrameData, "typed input\n"))
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
			if _, _, err := proto.ReadFrame(nc, nil); err != nil {
				break
			}
		}
		nc.Close()
		c, err := proto.Dial(context.Background(), spec.SocketPath())
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
func startFuzzWorker(f *testing.F, spec *proto.Spec) *testWorker {
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{t: f, spec: spec, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tw.done)
		tw.err = Run(ctx, spec, Options{})
	}()
	err := waitfor.Until(waitTimeout, "fuzz worker of session "+spec.SessionID+" to start", func() error {
		r, err := proto.ReadRegistry(spec.RegistryPath())
		if err != nil {
			return err
		}
		if r.State != proto.StateRunning {
			return fmt.Errorf("registry says %s", r.State)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return tw
}

func frameSeed(typ byte, payload string) []byte {
	return proto.FrameBytes(typ, []byte(payload))
}
