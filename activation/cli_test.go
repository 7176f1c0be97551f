package activation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/waitfor"
)

// echoScript echoes each line as "got:<line>"; "size" prints `stty size`.
const echoScript = `while IFS= read -r l; do case "$l" in size) stty size;; *) echo "got:$l";; esac; done`

// ptyRun is the CLI running on a real PTY, as a person would run it.
type ptyRun struct {
	cmd  *exec.Cmd
	ptm  *os.File
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func startOnPTY(t *testing.T, e *testEnv, args ...string) *ptyRun {
	t.Helper()
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(ptm, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.bin, args...)
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &ptyRun{cmd: cmd, ptm: ptm, tty: tty, done: make(chan error, 1)}
	// Copies the PTY's output until the master is closed at cleanup.
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
		ptm.Close()
		tty.Close()
	})
	return r
}

func (r *ptyRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

func (r *ptyRun) waitOutput(t *testing.T, want string) {
	t.Helper()
	waitfor.Check(t, waitFor, fmt.Sprintf("PTY output showing %q", want), func() error {
		if out := r.output(); !strings.Contains(out, want) {
			return fmt.Errorf("got:\n%q", out)
		}
		return nil
	})
}

func (r *ptyRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(waitFor):
		t.Fatalf("attach did not end; output:\n%q", r.output())
		return nil
	}
}

// cooked reports whether the terminal is back in cooked mode (line
// editing and echo on), as the shell left it.
func (r *ptyRun) cooked(t *testing.T) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(r.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio.Lflag&unix.ICANON != 0 && tio.Lflag&unix.ECHO != 0
}

// TestAttachSendKill drives the CLI like a person: send, attach on a real
// terminal (typing, resize, the detach key in its three encodings, a
// signal), read-only attach, kill, and attach to an ended or unknown
// session.
func TestAttachSendKill(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	e.spawn(ctx, "echoer", "/bin/sh", "-c", echoScript)

	e.mustLegion(ctx, "send", "echoer", "hello world")
	e.poll(ctx, "sent text in the transcript", func() (bool, string) {
		out, _, _ := e.legion(ctx, "sessions", "logs", "echoer")
		return strings.Contains(out, "got:hello world"), out
	})

	t.Run("type, resize, detach with the raw key", func(t *testing.T) {
		a := startOnPTY(t, e, "attach", "echoer")
		a.waitOutput(t, "[attached to echoer")
		a.ptm.Write([]byte("abc\r"))
		a.waitOutput(t, "got:abc")
		if err := pty.Setsize(a.ptm, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
			t.Fatal(err)
		}
		waitfor.Check(t, waitFor, "stty size to see 30 100 after the resize", func() error {
			if out := a.output(); !strings.Contains(out, "30 100") {
				a.ptm.Write([]byte("size\r")) // ask again
				return fmt.Errorf("output:\n%q", out)
			}
			return nil
		})
		a.ptm.Write([]byte{0x1c})
		if err := a.wait(t); err != nil {
			t.Errorf("attach after Ctrl-\\ = %v; want exit 0", err)
		}
		// The attach has exited, but its last bytes may still be on
		// their way through the terminal to the test's reader.
		a.waitOutput(t, "[detached from echoer]")
		if !a.cooked(t) {
			t.Errorf("terminal left in raw mode after detach")
		}
	})
	for _, tc := range []struct{ name, key string }{
		{"CSI-u", "\x1b[92;5u"},
		{"modifyOtherKeys", "\x1b[27;5;92~"},
	} {
		t.Run("detach with "+tc.name, func(t *testing.T) {
			a := startOnPTY(t, e, "attach", "echoer")
			a.waitOutput(t, "[attached to echoer")
			a.ptm.Write([]byte(tc.key))
			if err := a.wait(t); err != nil {
				t.Errorf("attach after %q = %v; want exit 0", tc.key, err)
			}
			if !a.cooked(t) {
				t.Errorf("terminal left in raw mode")
			}
		})
	}
	t.Run("custom detach key", func(t *testing.T) {
		a := startOnPTY(t, e, "attach", "--detach-key", "ctrl-]", "echoer")
		a.waitOutput(t, "detach with ctrl-]")
		a.ptm.Write([]byte{0x1d})
		if err := a.wait(t); err != nil {
			t.Errorf("attach after Ctrl-] = %v; want exit 0", err)
		}
	})
	t.Run("SIGTERM restores the terminal", func(t *testing.T) {
		a := startOnPTY(t, e, "attach", "echoer")
		a.waitOutput(t, "[attached to echoer")
		a.cmd.Process.Signal(syscall.SIGTERM)
		a.wait(t)
		if !a.cooked(t) {
			t.Errorf("terminal left in raw mode after SIGTERM")
		}
	})
	t.Run("read-only drops keystrokes", func(t *testing.T) {
		a := startOnPTY(t, e, "attach", "--read-only", "echoer")
		a.waitOutput(t, "[attached to echoer")
		a.ptm.Write([]byte("zzz\r"))
		a.ptm.Write([]byte{0x1c})
		if err := a.wait(t); err != nil {
			t.Errorf("read-only attach = %v; want exit 0", err)
		}
		e.mustLegion(ctx, "send", "echoer", "marker")
		e.poll(ctx, "the marker", func() (bool, string) {
			out, _, _ := e.legion(ctx, "sessions", "logs", "echoer")
			return strings.Contains(out, "got:marker"), out
		})
		if out, _, _ := e.legion(ctx, "sessions", "logs", "echoer"); strings.Contains(out, "got:zzz") {
			t.Errorf("read-only attach delivered keystrokes:\n%q", out)
		}
	})

	out := e.mustLegion(ctx, "sessions", "kill", "echoer")
	if !strings.Contains(out, "session echoer stopped") {
		t.Errorf("kill printed %q", out)
	}
	var s api.Session
	if err := json.Unmarshal([]byte(e.mustLegion(ctx, "sessions", "status", "--json", "echoer")), &s); err != nil || s.State != api.StateExited || s.Exit == nil {
		t.Errorf("status after kill = %+v, %v; want exited with exit info", s, err)
	}

	t.Run("ended session", func(t *testing.T) {
		_, stderr, err := e.legion(ctx, "attach", "echoer")
		if !isExit(err) || !strings.Contains(stderr, "is not running (exited)") || !strings.Contains(stderr, "last exit") {
			t.Errorf("attach to a killed session = %v, %q; want an error with its exit information", err, stderr)
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		_, stderr, err := e.legion(ctx, "attach", "nobody")
		if !isExit(err) || !strings.Contains(stderr, `no session named "nobody"`) {
			t.Errorf("attach to an unknown session = %v, %q", err, stderr)
		}
	})
	t.Run("bad name", func(t *testing.T) {
		for _, args := range [][]string{{"attach", "../x"}, {"send", "a/b", "x"}, {"sessions", "status", ".."}, {"spawn", "--name", "x/y", "--", "/bin/true"}} {
			_, stderr, err := e.legion(ctx, args...)
			var ee *exec.ExitError
			if !errorsAs(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr, "session name") {
				t.Errorf("legion %s = %v, %q; want exit 2 naming the session name rule", strings.Join(args, " "), err, stderr)
			}
		}
	})
}

// TestLogsFollowAcrossRestarts: `legion sessions logs -f` follows the
// transcript across every restart systemd does and ends by itself when
// systemd gives up, having printed the transcript byte for byte.
func TestLogsFollowAcrossRestarts(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	res := e.spawnArgs(ctx, "--name", "crasher", "--cooldown", "100ms", "--json", "--",
		"/bin/sh", "-c", "echo run-start; sleep 0.2; exit 3")
	out := e.mustLegion(ctx, "sessions", "logs", "-f", "crasher")
	transcript, err := os.ReadFile(filepath.Join(e.stateDir, "transcripts", res.ID+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(transcript) {
		t.Errorf("logs -f printed %d bytes, the transcript has %d; want them equal", len(out), len(transcript))
	}
	var s api.Session
	if err := json.Unmarshal([]byte(e.mustLegion(ctx, "sessions", "status", "--json", "crasher")), &s); err != nil {
		t.Fatal(err)
	}
	// Each run printed "run-start" on a line of its own (the start marker
	// quotes the argv, so count whole lines). systemd counts the restart
	// it refused at the start limit too, so NRestarts is runs or runs-1.
	runs := strings.Count(out, "\nrun-start\r\n")
	if s.State != api.StateFailed || s.Exit == nil || s.Exit.Code == nil || *s.Exit.Code != 3 || runs < 2 || (int(s.Restarts) != runs && int(s.Restarts) != runs-1) {
		t.Errorf("after logs -f: status %+v (exit %v), %d runs in the transcript; want failed, exit code 3, restarts = runs or runs-1, runs >= 2", s, s.Exit, runs)
	}
}

func (e *testEnv) spawnArgs(ctx context.Context, args ...string) api.SpawnResult {
	e.t.Helper()
	var r api.SpawnResult
	out := e.mustLegion(ctx, append([]string{"spawn"}, args...)...)
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("spawn printed %q: %v", out, err)
	}
	return r
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestAttachFollowsRestart: when the agent exits and systemd restarts the
// session, an attached terminal says how the run ended, waits, and joins
// the new run, even when the helper was killed meanwhile.
func TestAttachFollowsRestart(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	e.spawnArgs(ctx, "--name", "flaky", "--cooldown", "200ms", "--json", "--",
		"/bin/sh", "-c", `echo "started run"; read x; echo "bye $x"; exit 4`)
	a := startOnPTY(t, e, "attach", "flaky")
	a.waitOutput(t, "[attached to flaky")
	a.waitOutput(t, "started run")
	// The helper dies under the attached terminal: typing still works
	// (the connection is the worker's), and the reattach below finds the
	// new helper.
	e.killHelper(ctx)
	a.ptm.Write([]byte("one\r"))
	a.waitOutput(t, "bye one")
	a.waitOutput(t, "run 1 ended: code 4")
	// The second run's screen arrives on the same terminal.
	waitfor.Check(t, waitFor, "attach to show the second run", func() error {
		if out := a.output(); strings.Count(out, "started run") < 2 {
			return fmt.Errorf("output:\n%q", out)
		}
		return nil
	})
	a.ptm.Write([]byte("two\r"))
	a.waitOutput(t, "bye two")
	a.waitOutput(t, "run 2 ended: code 4")
	a.ptm.Write([]byte{0x1c})
	if err := a.wait(t); err != nil {
		t.Errorf("attach = %v; want exit 0 after the detach key", err)
	}
	if !a.cooked(t) {
		t.Errorf("terminal left in raw mode")
	}
}

// TestLogsFollowAcrossHelperRestarts: a `legion sessions logs -f` keeps
// following while the helper is stopped and killed under it (it dials
// again and goes on at the next byte) and has printed the transcript byte
// for byte when the session ends.
func TestLogsFollowAcrossHelperRestarts(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	res := e.spawn(ctx, "talker", "/bin/sh", "-c", streamScript)
	cmd := exec.CommandContext(ctx, e.bin, "sessions", "logs", "-f", "talker")
	cmd.Env = os.Environ()
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	grow := func() {
		n := out.Len()
		e.poll(ctx, "more followed output", func() (bool, string) { return out.Len() > n+100, errOut.String() })
	}
	grow()
	for i := range 4 {
		if i%2 == 0 {
			e.killHelper(ctx)
		} else {
			e.stopHelper(ctx)
		}
		grow()
	}
	e.mustLegion(ctx, "sessions", "kill", "talker")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("logs -f = %v; stderr %s", err, errOut.String())
		}
	case <-ctx.Done():
		t.Fatal("logs -f did not end after the session was killed")
	}
	transcript, err := os.ReadFile(filepath.Join(e.stateDir, "transcripts", res.ID+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(transcript) {
		t.Errorf("logs -f printed %d bytes, the transcript has %d; want them equal", out.Len(), len(transcript))
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
