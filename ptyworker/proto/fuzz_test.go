package proto_test

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"testing"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
	"golang.org/x/sys/unix"
)

func frameSeed(typ byte, payload string) []byte {
	return proto.FrameBytes(typ, []byte(payload))
}

// FuzzReadFrame feeds arbitrary bytes to the frame and control-message
// decoders: no panics, limits hold, and what decodes re-encodes to the same
// message.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameSeed(proto.FrameControl, `{"id":1,"method":"hello","params":{"rpc_major":1,"rpc_minor":0,"token":"t","daemon_instance_id":"d"}}`))
	f.Add(frameSeed(proto.FrameControl, `{"event":"exit","data":{"code":3}}`))
	f.Add(append(frameSeed(proto.FrameData, "\x00\x00\x00\x00\x00\x00\x00\x05hello"), frameSeed(proto.FrameControl, `{"id":2,"result":{}}`)...))
	f.Add([]byte("J\xff\xff\xff\xff"))
	f.Add([]byte(`{"id":1}` + "\n"))
	f.Add(append(frameSeed(proto.FrameRing, "\x00\x00\x00\x00\x00\x00\x00\x00"), frameSeed(proto.FrameHead, "\x00\x00\x00\x00\x00\x00\x10\x00")...))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			typ, p, err := proto.ReadFrame(r, nil)
			if err != nil {
				return
			}
			if len(p) > proto.FrameLimit(typ) {
				t.Fatalf("frame %q of %d bytes passed the limit %d", typ, len(p), proto.FrameLimit(typ))
			}
			if typ != proto.FrameControl {
				continue
			}
			m, err := proto.DecodeMessage(p)
			if err != nil {
				continue
			}
			enc, err := proto.EncodeControl(m)
			if err != nil {
				continue // over the limit once re-encoded (escapes grow)
			}
			_, p2, err := proto.ReadFrame(bytes.NewReader(enc), nil)
			if err != nil {
				t.Fatalf("re-encoded message does not read back: %v", err)
			}
			m2, err := proto.DecodeMessage(p2)
			if err != nil {
				t.Fatalf("re-encoded message %q does not decode: %v", p2, err)
			}
			if m.ID != m2.ID || m.Method != m2.Method || m.Event != m2.Event {
				t.Fatalf("round trip changed the message: %+v -> %+v", m, m2)
			}
			for _, v := range []any{&proto.HelloParams{}, &proto.AttachParams{}, &proto.InputParams{}, &proto.ResizeParams{}, &proto.SignalParams{}} {
				if len(m.Params) > 0 {
					proto.DecodeStrict(m.Params, v) // must not panic; errors are fine
				}
			}
		}
	})
}

// FuzzClientFrames feeds arbitrary bytes, as a worker's side of a unix
// socket, to a Client: whatever comes (a head frame before any ring, a
// ring frame without its descriptor, data frames, events), the client
// neither panics nor hangs, and its events end with the connection.
func FuzzClientFrames(f *testing.F) {
	f.Add(frameSeed(proto.FrameHead, "\x00\x00\x00\x00\x00\x00\x10\x00"))
	f.Add(frameSeed(proto.FrameRing, "\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add(append(frameSeed(proto.FrameData, "\x00\x00\x00\x00\x00\x00\x00\x05hello"), frameSeed(proto.FrameControl, `{"event":"exit","data":{"code":3}}`)...))
	f.Add(frameSeed(proto.FrameControl, `{"event":"desync","data":{"offset":7}}`))
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
		c := proto.NewClient(nc)
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
	s.StaleAfter = proto.Duration(time.Minute)
	b, _ := json.Marshal(s)
	f.Add(b)
	s.Prepare = [][]string{{"legion", "worktree", "ensure", "t", "ENG-1"}}
	b, _ = json.Marshal(s)
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"stale_after":"10m","ring_size":-1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := proto.ParseSpec(in)
		if err != nil {
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := proto.ParseSpec(out); err != nil {
			t.Fatalf("accepted spec does not parse back: %v\n%s", err, out)
		}
	})
}
