package ptyworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hinshun/vt10x"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// waitTimeout is the generous deadline of every condition a test waits for.
const waitTimeout = 20 * time.Second

// testLogger logs to the test output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// shortTempDir is a temp dir with a short path (socket paths must stay
// under MaxSocketPath), removed at cleanup.
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "lw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// testSpec is a valid spec running argv in temp dirs.
func testSpec(t testing.TB, argv ...string) *proto.Spec {
	t.Helper()
	root := shortTempDir(t)
	tok, err := proto.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return &proto.Spec{
		Version:          proto.SpecVersion,
		SessionID:        uuid.NewString(),
		Name:             "test-session",
		Team:             "testteam",
		TeamShort:        "0123abcd",
		Issue:            "ENG-1",
		Mode:             "implement",
		Role:             "worker",
		Cwd:              root,
		ArgvNew:          argv,
		Token:            tok,
		DaemonInstanceID: "daemon-test",
		Paths:            proto.Paths{RuntimeDir: filepath.Join(root, "run"), StateDir: filepath.Join(root, "state")},
		Unit:             "legion-0123abcd-ENG\\x2d1-implement.service",
	}
}

// testWorker is a Run in a goroutine.
type testWorker struct {
	t      testing.TB
	spec   *proto.Spec
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// startWorker runs the worker and waits until its socket answers hello.
func startWorker(t testing.TB, spec *proto.Spec, opts Options) *testWorker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{t: t, spec: spec, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tw.done)
		tw.err = Run(ctx, spec, opts)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-tw.done:
		case <-time.After(waitTimeout):
			t.Errorf("worker of session %s did not stop", spec.SessionID)
		}
	})
	waitFor(t, "worker registry says running", func() bool {
		select {
		case <-tw.done:
			t.Fatalf("worker ended early: %v", tw.err)
		default:
		}
		r, err := proto.ReadRegistry(spec.RegistryPath())
		return err == nil && r.State == proto.StateRunning
	})
	return tw
}

// wait waits for Run to return and returns its error.
func (tw *testWorker) wait() error {
	tw.t.Helper()
	select {
	case <-tw.done:
		return tw.err
	case <-time.After(waitTimeout):
		tw.t.Fatalf("worker of session %s still running after %s", tw.spec.SessionID, waitTimeout)
		return nil
	}
}

// dial connects and says hello.
func (tw *testWorker) dial() *proto.Client {
	tw.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := proto.Dial(ctx, tw.spec.SocketPath())
	if err != nil {
		tw.t.Fatal(err)
	}
	tw.t.Cleanup(func() { c.Close() })
	if _, err := c.Hello(ctx, tw.spec.Token, tw.spec.DaemonInstanceID); err != nil {
		tw.t.Fatalf("hello: %v", err)
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitFor waits until cond holds, for up to waitTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, waitTimeout, what, cond)
}

// stream collects what a client receives: output bytes (with the offset
// they continue from), a terminal fed with everything, and events.
type stream struct {
	mu       sync.Mutex
	out      bytes.Buffer
	next     uint64 // offset after the last output byte
	vt       vt10x.Terminal
	exit     *proto.ExitInfo
	desync   *proto.DesyncEventData
	states   []proto.StateEventData
	errs     []*proto.RPCError
	snaps    int
	closed   bool
	gapError error
}

// follow consumes c's events into a stream until the channel closes. With
// cols 0 no terminal is fed (vt10x is slow: a test client that must keep up
// with a flood of output cannot afford one).
func follow(c *proto.Client, cols, rows int) *stream {
	s := &stream{}
	if cols > 0 {
		s.vt = vt10x.New(vt10x.WithSize(cols, rows))
	}
	go func() {
		for ev := range c.Events() {
			s.mu.Lock()
			switch ev.Kind {
			case proto.EventKindOutput:
				if s.next != 0 && ev.Offset != s.next && s.gapError == nil {
					s.gapError = errors.New("output offsets not contiguous")
				}
				s.out.Write(ev.Data)
				s.next = ev.Offset + uint64(len(ev.Data))
				if s.vt != nil {
					s.vt.Write(ev.Data)
				}
			case proto.EventKindSnapshot:
				s.snaps++
				s.next = ev.Offset
				if s.vt != nil {
					s.vt.Write(ev.Data)
				}
			case proto.EventKindExit:
				s.exit = ev.Exit
			case proto.EventKindDesync:
				s.desync = ev.Desync
			case proto.EventKindState:
				s.states = append(s.states, *ev.State)
			case proto.EventKindError:
				s.errs = append(s.errs, ev.Err)
			}
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	}()
	return s
}

func (s *stream) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

func (s *stream) screen() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vt.String()
}

func (s *stream) exitInfo() *proto.ExitInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exit
}

// waitOutput waits until the output contains want.
func (s *stream) waitOutput(t testing.TB, want string) {
	t.Helper()
	waitFor(t, "output containing "+strconvQuote(want), func() bool { return strings.Contains(s.output(), want) })
}

// waitScreen waits until the screen contains want.
func (s *stream) waitScreen(t testing.TB, want string) {
	t.Helper()
	waitFor(t, "screen containing "+strconvQuote(want), func() bool { return strings.Contains(s.screen(), want) })
}

func strconvQuote(s string) string {
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return "\"" + s + "\""
}

// readTranscript returns the session's transcript.
func readTranscript(t testing.TB, s *proto.Spec) string {
	t.Helper()
	b, err := os.ReadFile(s.TranscriptPath())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rawConn speaks the frame protocol by hand, for tests of bad input.
type rawConn struct {
	t   testing.TB
	nc  net.Conn
	buf []byte
}

// raw connects without saying hello.
func (tw *testWorker) raw() *rawConn {
	tw.t.Helper()
	nc, err := net.Dial("unix", tw.spec.SocketPath())
	if err != nil {
		tw.t.Fatal(err)
	}
	tw.t.Cleanup(func() { nc.Close() })
	return &rawConn{t: tw.t, nc: nc}
}

func (r *rawConn) send(typ byte, payload []byte) {
	r.t.Helper()
	if err := proto.WriteFrame(r.nc, typ, payload); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) request(id uint64, method string, params any) {
	r.t.Helper()
	r.send(proto.FrameControl, r.requestPayload(id, method, params))
}

func (r *rawConn) requestPayload(id uint64, method string, params any) []byte {
	r.t.Helper()
	m := map[string]any{"id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	b, err := json.Marshal(m)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// rawRequest is one request of rawConn.pipeline.
type rawRequest struct {
	id     uint64
	method string
	params any
}

// pipeline sends reqs in a single write, so all of them are in the worker's
// socket before it reads the first (a worker that closes after answering
// one would otherwise make the later writes fail now and then).
func (r *rawConn) pipeline(reqs ...rawRequest) {
	r.t.Helper()
	var b bytes.Buffer
	for _, q := range reqs {
		if err := proto.WriteFrame(&b, proto.FrameControl, r.requestPayload(q.id, q.method, q.params)); err != nil {
			r.t.Fatal(err)
		}
	}
	if _, err := r.nc.Write(b.Bytes()); err != nil {
		r.t.Fatal(err)
	}
}

// next reads the next control message, skipping data frames; nil at the
// end of the connection.
func (r *rawConn) next() *proto.Message {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(waitTimeout))
	for {
		typ, p, err := proto.ReadFrame(r.nc, r.buf)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				return nil
			}
			r.t.Fatalf("read frame: %v", err)
		}
		if typ != proto.FrameControl {
			continue
		}
		m, err := proto.DecodeMessage(p)
		if err != nil {
			r.t.Fatalf("worker sent a malformed message %q: %v", p, err)
		}
		return m
	}
}

// hello authenticates with the spec's token.
func (r *rawConn) hello(s *proto.Spec) {
	r.t.Helper()
	r.request(1, proto.MethodHello, proto.HelloParams{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, Token: s.Token, DaemonInstanceID: s.DaemonInstanceID})
	if m := r.next(); m == nil || m.Error != nil {
		r.t.Fatalf("hello: %+v", m)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
