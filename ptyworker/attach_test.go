package ptyworker

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hinshun/vt10x"
	"github.com/legion-dev/legion/ptyworker/proto"
)

func TestVimSnapshotAfterReattach(t *testing.T) {
	vim, err := exec.LookPath("vim")
	if err != nil {
		t.Skip("vim is not installed (Debian package vim): " + err.Error())
	}
	spec := testSpec(t)
	file := filepath.Join(spec.Cwd, "notes.txt")
	lines := []string{"first line of the file", "second line, with more words", "third and last line"}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.ArgvNew = []string{vim, "-u", "NONE", "-i", "NONE", "-n", "-N", file}
	spec.Env = []string{"HOME=" + spec.Cwd}
	tw := startWorker(t, spec, Options{})

	// A first client watches vim draw, then goes away.
	c1 := tw.dial()
	s1 := follow(c1, 80, 24)
	if _, err := c1.Attach(ctxT(t), proto.AttachParams{}); err != nil {
		t.Fatal(err)
	}
	s1.waitScreen(t, `notes.txt" 3L`)
	c1.Close()

	// Vim keeps working unseen: jump to the last line, add one.
	c2 := tw.dial()
	if err := c2.Input(ctxT(t), []byte("Goappended while detached\x1b")); err != nil {
		t.Fatal(err)
	}

	// A client attaching now gets the screen from the snapshot alone.
	var snap []byte
	waitFor(t, "snapshot with the appended line", func() bool {
		c := tw.dial()
		defer c.Close()
		res, err := c.Attach(ctxT(t), proto.AttachParams{})
		if err != nil || res.Mode != proto.AttachSnapshot {
			t.Fatalf("Attach() = %+v, %v; want a snapshot", res, err)
		}
		ev := <-c.Events()
		if ev.Kind != proto.EventKindSnapshot || ev.Offset != res.Offset {
			t.Fatalf("first event = kind %d offset %d; want a snapshot at %d", ev.Kind, ev.Offset, res.Offset)
		}
		snap = ev.Data
		return bytes.Contains(snap, []byte("appended while detached"))
	})
	vt := vt10x.New(vt10x.WithSize(80, 24))
	vt.Write(snap)
	screen := vt.String()
	rows := strings.Split(screen, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(rows[i], l) {
			t.Errorf("snapshot row %d = %q; want %q", i, strings.TrimRight(rows[i], " "), l)
		}
	}
	if !strings.HasPrefix(rows[3], "appended while detached") {
		t.Errorf("snapshot row 3 = %q; want the appended line", strings.TrimRight(rows[3], " "))
	}
	if !strings.HasPrefix(rows[4], "~") {
		t.Errorf("snapshot row 4 = %q; want vim's ~ filler", rows[4])
	}
	// The status line: vim's last row, written when the file was loaded and
	// left alone by the insert (no 'showmode' with -u NONE... it is cleared
	// or shows the file message).
	if !bytes.Contains(snap, []byte("\x1b[?1049h")) {
		t.Errorf("snapshot does not switch to the alternate screen vim uses")
	}
	if cur := vt.Cursor(); cur.Y != 3 {
		t.Errorf("snapshot cursor at row %d; want 3 (on the appended line)", cur.Y)
	}

	// Typing after the snapshot works on the same screen: a command shows
	// on the status line, and :q! ends vim.
	c3 := tw.dial()
	s3 := follow(c3, 80, 24)
	if _, err := c3.Attach(ctxT(t), proto.AttachParams{}); err != nil {
		t.Fatal(err)
	}
	c3.SendInput([]byte(":echo 'status-line-check'\r"))
	waitFor(t, "status line on the last row", func() bool {
		rows := strings.Split(s3.screen(), "\n")
		return strings.HasPrefix(rows[23], "status-line-check") && strings.HasPrefix(rows[0], lines[0])
	})
	c3.SendInput([]byte(":q!\r"))
	if err := tw.wait(); err != nil {
		t.Errorf("Run() after :q! = %v; want nil", err)
	}
}

func TestReplayFromOffset(t *testing.T) {
	spec := testSpec(t, "sh", "-c", `while read n; do i=0; while [ $i -lt $n ]; do echo "line $i of $n"; i=$((i+1)); done; echo batch-done; done`)
	spec.RingSize = proto.MinRingSize
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	s := follow(c, 80, 24)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	c.SendInput([]byte("20\n"))
	s.waitOutput(t, "batch-done\r\n")
	full := s.output()
	hello, err := c.HelloAs(ctxT(t), proto.HelloParams{RPCMajor: proto.RPCMajor, Token: spec.Token, DaemonInstanceID: spec.DaemonInstanceID})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("from an offset in the ring", func(t *testing.T) {
		mid := uint64(len(full) / 2)
		c2 := tw.dial()
		s2 := follow(c2, 80, 24)
		res, err := c2.Attach(ctxT(t), proto.AttachParams{Offset: &mid, Epoch: hello.Epoch})
		if err != nil {
			t.Fatal(err)
		}
		if res.Mode != proto.AttachReplay || res.Offset != mid {
			t.Fatalf("Attach(offset %d) = %+v; want a replay from %d", mid, res, mid)
		}
		waitFor(t, "the replayed bytes", func() bool { return len(s2.output()) >= len(full)-int(mid) })
		if got, want := s2.output(), full[mid:]; got != want {
			t.Errorf("replay from %d = %q; want %q", mid, got, want)
		}
	})
	t.Run("from an offset of another epoch", func(t *testing.T) {
		c2 := tw.dial()
		off := uint64(0)
		res, err := c2.Attach(ctxT(t), proto.AttachParams{Offset: &off, Epoch: "an-earlier-worker"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Mode != proto.AttachSnapshot {
			t.Errorf("Attach(other epoch) mode = %q; want %q", res.Mode, proto.AttachSnapshot)
		}
	})
	t.Run("from an offset no longer in the ring", func(t *testing.T) {
		c.SendInput([]byte("1000\n")) // ~17 KB: more than the 4 KiB ring
		ci := tw.dial()
		waitFor(t, "second batch", func() bool {
			in, err := ci.Info(ctxT(t))
			return err == nil && in.Head >= uint64(len(full))+15000
		})
		c2 := tw.dial()
		s2 := follow(c2, 80, 24)
		off := uint64(0)
		res, err := c2.Attach(ctxT(t), proto.AttachParams{Offset: &off, Epoch: hello.Epoch})
		if err != nil {
			t.Fatal(err)
		}
		if res.Mode != proto.AttachSnapshot {
			t.Fatalf("Attach(offset 0 after overrun) mode = %q; want %q", res.Mode, proto.AttachSnapshot)
		}
		// The screen shows the end of the last batch.
		s2.waitScreen(t, "line 999 of 1000")
		s2.waitScreen(t, "batch-done")
	})
}

func TestSlowClientDropped(t *testing.T) {
	// 8 MiB in 64 KiB pieces with short pauses: a busy agent, not a flood a
	// test client on a loaded machine could not keep up with.
	const n = 8 << 20
	spec := testSpec(t, "sh", "-c", `read go; i=0; while [ $i -lt 128 ]; do head -c 65536 /dev/zero | tr '\0' y; sleep 0.002; i=$((i+1)); done; echo; echo ALL-DONE; read end`)
	tw := startWorker(t, spec, Options{})

	// The slow client attaches and then reads nothing.
	slow := tw.raw()
	slow.hello(spec)
	slow.request(2, proto.MethodAttach, proto.AttachParams{})
	if m := slow.next(); m == nil || m.Error != nil {
		t.Fatalf("attach: %+v", m)
	}
	fast := tw.dial()
	fs := follow(fast, 0, 0)
	if _, err := fast.Attach(ctxT(t), proto.AttachParams{}); err != nil {
		t.Fatal(err)
	}
	fast.SendInput([]byte("\n"))
	fs.waitOutput(t, "ALL-DONE")
	if got := strings.Count(fs.output(), "y"); got != n {
		t.Errorf("fast client got %d bytes of output; want %d", got, n)
	}

	// The agent was not stalled (it finished its output); the slow client
	// now finds a desync event and then the end of the connection.
	var desync *proto.DesyncEventData
	for m := slow.next(); m != nil; m = slow.next() {
		if m.Event == proto.EventDesync {
			desync = &proto.DesyncEventData{}
			if err := json.Unmarshal(m.Data, desync); err != nil {
				t.Fatal(err)
			}
		}
	}
	if desync == nil {
		t.Fatal("slow client: no desync event before the connection ended")
	}
	if desync.Offset >= uint64(n) {
		t.Errorf("desync offset %d; want it well before the end %d", desync.Offset, n)
	}
	info, err := fast.Info(ctxT(t))
	if err != nil || !info.Running {
		t.Errorf("after dropping the slow client Info() = %+v, %v; want running", info, err)
	}
	fast.SendInput([]byte("\n"))
	if err := tw.wait(); err != nil {
		t.Errorf("Run() = %v", err)
	}
}
