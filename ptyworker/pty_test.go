package ptyworker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
)

func TestEchoThroughCat(t *testing.T) {
	tw := startWorker(t, testSpec(t, "cat"), Options{})
	c := tw.dial()
	s := follow(c, 80, 24)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Input(ctxT(t), []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	// The terminal echoes the line, then cat writes it back.
	s.waitOutput(t, "hello\r\nhello\r\n")
	if err := c.SendInput([]byte("fast path\n")); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "fast path\r\nfast path\r\n")
}

func TestResizeSeenByStty(t *testing.T) {
	spec := testSpec(t, "sh", "-c", `while read line; do stty size; done`)
	spec.Cols, spec.Rows = 90, 20
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	s := follow(c, 90, 20)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{}); err != nil {
		t.Fatal(err)
	}
	c.SendInput([]byte("a\n"))
	s.waitOutput(t, "20 90")
	if err := c.Resize(ctxT(t), 132, 43); err != nil {
		t.Fatal(err)
	}
	c.SendInput([]byte("b\n"))
	s.waitOutput(t, "43 132")

	// attach with a size resizes first; the latest resize wins.
	c2 := tw.dial()
	s2 := follow(c2, 100, 30)
	res, err := c2.Attach(ctxT(t), proto.AttachParams{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	if res.Cols != 100 || res.Rows != 30 {
		t.Errorf("Attach(100x30) size = %dx%d; want 100x30", res.Cols, res.Rows)
	}
	c2.SendInput([]byte("c\n"))
	s2.waitOutput(t, "30 100")

	for _, bad := range [][2]int{{0, 10}, {10, -1}, {5000, 10}} {
		if err := c.Resize(ctxT(t), bad[0], bad[1]); !proto.IsCode(err, proto.CodeBadRequest) {
			t.Errorf("Resize(%d, %d) = %v; want %s", bad[0], bad[1], err, proto.CodeBadRequest)
		}
	}
}

func TestSignalReachesForegroundJob(t *testing.T) {
	t.Run("trap in the agent", func(t *testing.T) {
		tw := startWorker(t, testSpec(t, "sh", "-c", `trap 'echo got-int' INT; echo ready; while :; do sleep 1; done`), Options{})
		c := tw.dial()
		s := follow(c, 80, 24)
		if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
			t.Fatal(err)
		}
		s.waitOutput(t, "ready")
		res, err := c.Signal(ctxT(t), "INT", "")
		if err != nil {
			t.Fatal(err)
		}
		if res.Target != proto.TargetForeground {
			t.Errorf("Signal(INT) target = %q; want %q", res.Target, proto.TargetForeground)
		}
		s.waitOutput(t, "got-int")
	})
	t.Run("job of an interactive shell", func(t *testing.T) {
		spec := testSpec(t, "sh", "-i")
		spec.Env = []string{"PS1=$ ", "ENV="}
		tw := startWorker(t, spec, Options{})
		c := tw.dial()
		s := follow(c, 80, 24)
		if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
			t.Fatal(err)
		}
		c.SendInput([]byte("sleep 600\n"))
		// The job control shell puts sleep in its own foreground group.
		info, err := c.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var res *proto.SignalResult
		waitFor(t, "sleep in the foreground", func() bool {
			fg, err := foregroundOf(info.ChildPID)
			return err == nil && fg != info.ChildPID
		})
		res, err = c.Signal(ctxT(t), "SIGINT", "")
		if err != nil {
			t.Fatal(err)
		}
		if res.Pgid == info.ChildPID {
			t.Errorf("Signal(INT) went to the shell's group %d; want the foreground job's", res.Pgid)
		}
		// The shell survives and reports the job's death by SIGINT.
		c.SendInput([]byte("echo shell-alive-$?\n"))
		s.waitOutput(t, "shell-alive-130\r\n")
	})
}

// procStat returns the fields of /proc/<pid>/stat after the command name:
// field 3 (the state) is the first.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	return strings.Fields(string(b[i+1:])), nil
}

// foregroundOf reads the foreground process group of pid's terminal from
// /proc/<pid>/stat (field 8, tpgid).
func foregroundOf(pid int) (int, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	var tpgid int
	_, err = fmt.Sscan(f[8-3], &tpgid)
	return tpgid, err
}

func TestExitRecorded(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		want     string // ExitInfo.String()
		wantFail bool
	}{
		{"code 0", "exit 0", "code 0", false},
		{"code 3", "echo bye; exit 3", "code 3", true},
		{"killed", "kill -KILL $$", "signal SIGKILL", true},
		{"terminated", "kill -TERM $$", "signal SIGTERM", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t, "sh", "-c", "read go; "+tc.script)
			tw := startWorker(t, spec, Options{})
			c := tw.dial()
			s := follow(c, 80, 24)
			if _, err := c.Attach(ctxT(t), proto.AttachParams{}); err != nil {
				t.Fatal(err)
			}
			c.SendInput([]byte("\n"))
			err := tw.wait()
			var ee *ExitError
			if got := errors.As(err, &ee); got != tc.wantFail {
				t.Fatalf("Run() = %v; want an *ExitError: %v", err, tc.wantFail)
			}
			if ee != nil && ee.Exit.String() != tc.want {
				t.Errorf("Run() exit = %s; want %s", ee.Exit.String(), tc.want)
			}
			r, err := proto.ReadRegistry(spec.RegistryPath())
			if err != nil {
				t.Fatal(err)
			}
			if r.State != proto.StateExited || r.LastExit == nil || r.LastExit.String() != tc.want || r.LastExit.Reason != "exited" {
				t.Errorf("registry state %q last exit %+v; want %s, %s, reason exited", r.State, r.LastExit, proto.StateExited, tc.want)
			}
			tr := readTranscript(t, spec)
			if want := "run 1 exit: " + tc.want + "; reason: exited\r\n"; !strings.Contains(tr, want) {
				t.Errorf("transcript = %q; want a line ending %q", tr, want)
			}
			waitFor(t, "exit event", func() bool { return s.exitInfo() != nil })
			if got := s.exitInfo().String(); got != tc.want {
				t.Errorf("exit event = %s; want %s", got, tc.want)
			}
		})
	}
}

func TestOutputBeforeExitDelivered(t *testing.T) {
	const n = 300000
	spec := testSpec(t, "sh", "-c", fmt.Sprintf(`read go; head -c %d /dev/zero | tr '\0' x; printf END; exit 7`, n))
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	s := follow(c, 80, 24)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	c.SendInput([]byte("\n"))
	waitFor(t, "exit event", func() bool { return s.exitInfo() != nil })
	out := s.output()
	if got := strings.Count(out, "x"); got != n {
		t.Errorf("got %d x; want %d", got, n)
	}
	if !strings.HasSuffix(out, "END") {
		t.Errorf("output ends %q; want END last", out[max(0, len(out)-20):])
	}
	e := s.exitInfo()
	s.mu.Lock()
	next, gap := s.next, s.gapError
	s.mu.Unlock()
	if e.Code != 7 || e.Offset != next {
		t.Errorf("exit event = %+v (received up to offset %d); want code 7 at offset %d", e, next, next)
	}
	if gap != nil {
		t.Error(gap)
	}
	var ee *ExitError
	if err := tw.wait(); !errors.As(err, &ee) || ee.Exit.Code != 7 {
		t.Errorf("Run() = %v; want exit code 7", err)
	}
}

func TestChildEnvironment(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "/nonexistent/notify")
	t.Setenv("WATCHDOG_USEC", "1000000")
	t.Setenv("WATCHDOG_PID", "1")
	t.Setenv("LISTEN_FDS", "3")
	t.Setenv("LISTEN_FDNAMES", "x")
	t.Setenv("TERM", "")
	os.Unsetenv("TERM")
	spec := testSpec(t, "sh", "-c", "read go; env; echo env-done")
	spec.Env = []string{"FOO=bar", "LEGION_ROLE=override"}
	tw := startWorker(t, spec, Options{Notify: func(string) error { return nil }})
	c := tw.dial()
	s := follow(c, 80, 24)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{}); err != nil {
		t.Fatal(err)
	}
	c.SendInput([]byte("\n"))
	s.waitOutput(t, "env-done")
	out := s.output()
	for _, bad := range []string{"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=", "LISTEN_FDS=", "LISTEN_FDNAMES="} {
		if strings.Contains(out, "\n"+bad) {
			t.Errorf("agent environment has %s", bad)
		}
	}
	for _, want := range []string{"TERM=xterm-256color", "LEGION_SESSION=" + spec.SessionID, "LEGION_TEAM=testteam", "LEGION_ISSUE=ENG-1", "LEGION_MODE=implement", "FOO=bar", "LEGION_ROLE=override"} {
		if !strings.Contains(out, want+"\r\n") {
			t.Errorf("agent environment lacks %s", want)
		}
	}
}

func TestResumeArgv(t *testing.T) {
	spec := testSpec(t, "sh", "-c", "echo argv=new; read x")
	spec.ArgvResume = []string{"sh", "-c", "echo argv=resume; read x"}
	spec.SessionFile = filepath.Join(spec.Cwd, "session.jsonl")
	spec.StaleAfter = proto.Duration(60e9)

	for _, want := range []string{proto.ArgvNew, proto.ArgvResume} {
		if want == proto.ArgvResume {
			if err := os.WriteFile(spec.SessionFile, []byte("{}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tw := startWorker(t, spec, Options{})
		c := tw.dial()
		info, err := c.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.ArgvKind != want {
			t.Errorf("ArgvKind = %q; want %q", info.ArgvKind, want)
		}
		s := follow(c, 80, 24)
		if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
			t.Fatal(err)
		}
		s.waitOutput(t, "argv="+want)
		c.SendInput([]byte("\n"))
		if err := tw.wait(); err != nil {
			t.Fatalf("Run() = %v", err)
		}
	}
	tr := readTranscript(t, spec)
	for _, want := range []string{"run 1 start (new): sh -c", "run 1 exit: code 0", "run 2 start (resume): sh -c", "run 2 exit: code 0"} {
		if !strings.Contains(tr, want) {
			t.Errorf("transcript lacks %q:\n%s", want, tr)
		}
	}
}

func TestRemove(t *testing.T) {
	spec := testSpec(t, "sh", "-c", `trap '' HUP; echo ready; while :; do sleep 1; done`)
	tw := startWorker(t, spec, Options{KillGrace: 200e6})
	c := tw.dial()
	s := follow(c, 80, 24)
	if _, err := c.Watch(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Removing: the agent is no longer taking input.
	if err := c.Input(ctxT(t), []byte("x")); !proto.IsCode(err, proto.CodeSessionNotRunning) {
		t.Errorf("Input after remove = %v; want %s", err, proto.CodeSessionNotRunning)
	}
	if err := tw.wait(); err != nil {
		t.Fatalf("Run() after remove = %v; want nil (exit 0: no restart)", err)
	}
	waitFor(t, "exit event", func() bool { return s.exitInfo() != nil })
	if e := s.exitInfo(); e.Reason != "removed" || e.Signal != "SIGKILL" {
		t.Errorf("exit = %+v; want reason removed, SIGKILL (the agent ignored SIGHUP)", e)
	}
	r, err := proto.ReadRegistry(spec.RegistryPath())
	if err != nil {
		t.Fatal(err)
	}
	if r.State != proto.StateRemoved {
		t.Errorf("registry state = %q; want %q", r.State, proto.StateRemoved)
	}

	// A restart of the unit does not bring it back.
	before := readTranscript(t, spec)
	if err := Run(ctxT(t), spec, Options{Logger: testLogger(t)}); err != nil {
		t.Errorf("Run() of a removed session = %v; want nil", err)
	}
	if after := readTranscript(t, spec); after != before {
		t.Errorf("Run() of a removed session wrote to the transcript: %q", after[len(before):])
	}
	// A new token (a new spawn) does.
	spec.Token += "-new"
	tw = startWorker(t, spec, Options{KillGrace: 100e6})
	if info, err := tw.dial().Info(ctxT(t)); err != nil || info.Run != 2 {
		t.Errorf("Info() = %+v, %v; want run 2", info, err)
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal
		bad  bool
	}{
		{"INT", syscall.SIGINT, false},
		{"sigterm", syscall.SIGTERM, false},
		{"SIGKILL", syscall.SIGKILL, false},
		{"9", syscall.SIGKILL, false},
		{"", 0, true},
		{"NOPE", 0, true},
		{"0", 0, true},
		{"65", 0, true},
	}
	for _, tc := range tests {
		got, err := parseSignal(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestDetachStopsOutput(t *testing.T) {
	tw := startWorker(t, testSpec(t, "cat"), Options{})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{}); err != nil {
		t.Fatal(err)
	}
	c.SendInput([]byte("before\n"))
	s.waitOutput(t, "before\r\nbefore\r\n")
	info, err := c.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Detach(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mark := info.Head
	c.SendInput([]byte("after\n"))
	waitFor(t, "the agent's output while detached", func() bool {
		in, err := c.Info(ctxT(t))
		return err == nil && in.Head >= mark+len64("after\r\nafter\r\n")
	})
	if strings.Contains(s.output(), "after") {
		t.Errorf("a detached client got output: %q", s.output())
	}
	// Reattaching from the offset it had replays what it missed.
	res, err := c.Attach(ctxT(t), proto.AttachParams{Offset: &mark})
	if err != nil || res.Mode != proto.AttachReplay {
		t.Fatalf("Attach(offset %d) = %+v, %v; want a replay", mark, res, err)
	}
	s.waitOutput(t, "after\r\nafter\r\n")
}

func len64(s string) uint64 { return uint64(len(s)) }

// TestInputToAgentNotReading: input to an agent that never reads ends in
// an io_error event once InputTimeout passes. The agent's terminal is raw,
// without echo, as startFullInput's: on a canonical terminal the line
// discipline echoes the input and throws away what does not fit a line,
// so even 1 MiB drains and nothing ever waits.
func TestInputToAgentNotReading(t *testing.T) {
	tw := startWorker(t, testSpec(t, "sh", "-c", "stty raw -echo; echo ready; exec sleep 1000"), Options{InputTimeout: 200e6})
	c := tw.dial()
	s := follow(c, 80, 24)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{}); err != nil {
		t.Fatal(err)
	}
	s.waitScreen(t, "ready") // in a snapshot if it came before the attach
	if err := c.SendInput(bytes.Repeat([]byte("x"), 1<<20)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an io_error event", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.errs) > 0
	})
	s.mu.Lock()
	e := s.errs[0]
	s.mu.Unlock()
	if e.Code != proto.CodeIOError || !strings.Contains(e.Message, "has not read its input") {
		t.Errorf("input to an agent that never reads: error %v; want %s", e, proto.CodeIOError)
	}
	if h, err := c.Health(ctxT(t)); err != nil || !h.OK {
		t.Errorf("Health() after a stuck input = %+v, %v; want ok", h, err)
	}
}

func TestStartFailure(t *testing.T) {
	spec := testSpec(t, "/nonexistent/agent", "--flag")
	err := Run(ctxT(t), spec, Options{Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/agent") {
		t.Fatalf("Run() with a missing program = %v; want an error naming it", err)
	}
	r, rerr := proto.ReadRegistry(spec.RegistryPath())
	if rerr != nil || r.State != proto.StateExited || r.LastExit == nil || !strings.HasPrefix(r.LastExit.Reason, "start failed: ") {
		t.Errorf("registry = %+v, %v; want exited with a start failure", r, rerr)
	}
	if tr := readTranscript(t, spec); !strings.Contains(tr, "run 1 exit: start failed: ") {
		t.Errorf("transcript lacks the start failure:\n%s", tr)
	}
	if _, err := os.Stat(spec.SocketPath()); !os.IsNotExist(err) {
		t.Errorf("socket %s left behind: %v", spec.SocketPath(), err)
	}
}

// A background job that keeps the terminal open does not keep the session
// alive once the agent exited: it is killed after the drain grace.
func TestBackgroundJobDoesNotHoldExit(t *testing.T) {
	spec := testSpec(t, "sh", "-c", "read go; sleep 1000 & echo agent-done; exit 0")
	tw := startWorker(t, spec, Options{DrainGrace: 100e6})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{}); err != nil {
		t.Fatal(err)
	}
	c.SendInput([]byte("\n"))
	if err := tw.wait(); err != nil {
		t.Errorf("Run() = %v; want nil (the agent exited 0)", err)
	}
	// The worker wrote the exit event, after all output, before Run
	// returned; this client may not have read it yet.
	waitFor(t, "the exit event", func() bool { return s.exitInfo() != nil })
	if !strings.Contains(s.output(), "agent-done") {
		t.Errorf("output %q lacks the agent's last words", s.output())
	}
}

// TestExitedAgentHeldUntilReaped: an agent that exited stays a zombie,
// keeping its process group ID reserved, until reap; signals to its group
// still reach a member it left behind, and none are sent once it is
// reaped.
func TestExitedAgentHeldUntilReaped(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "bg.pid")
	// The background sleep stays in the agent's process group and ignores
	// the SIGHUP the kernel sends the group when the agent, the session
	// leader, exits: only killAll can end it.
	c, err := startChild([]string{"sh", "-c", "trap '' HUP; sleep 60 & echo $! >" + pidFile + "; exit 3"}, "/", os.Environ(), 80, 24, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.killAll(syscall.SIGKILL); c.ptm.Close(); c.reap() })
	select {
	case <-c.done:
	case <-time.After(waitTimeout):
		t.Fatal("the agent did not exit")
	}
	state := func(pid int) string {
		f, err := procStat(pid)
		if err != nil {
			return "gone"
		}
		return f[0]
	}
	if st := state(c.pid); st != "Z" {
		t.Fatalf("exited agent %d: state %s; want Z (not yet reaped)", c.pid, st)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	bg, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	// The kernel sent the SIGHUP as the agent exited, before it became a
	// zombie; a job it killed would never sleep again. Waited for, not
	// looked at once: the job may still be on its way into sleep(1).
	waitfor.Check(t, waitTimeout, "the exited agent's background job to sleep", func() error {
		if st := state(bg); st != "S" {
			return fmt.Errorf("background job %d of the exited agent: state %s before killAll; want S (sleeping)", bg, st)
		}
		return nil
	})
	c.killAll(syscall.SIGKILL)
	waitfor.Check(t, waitTimeout, "the exited agent's background job to be killed", func() error {
		if st := state(bg); st != "gone" && st != "Z" {
			return fmt.Errorf("background job %d of the exited agent: state %s after SIGKILL to the group; want it killed", bg, st)
		}
		return nil
	})

	c.reap()
	if code, _ := c.exitInfo(); code != 3 {
		t.Errorf("exit code after reap = %d; want 3", code)
	}
	if st := state(c.pid); st != "gone" {
		t.Errorf("agent %d after reap: state %s; want gone", c.pid, st)
	}
	if _, err := c.signal(syscall.SIGTERM, proto.TargetGroup); !errors.Is(err, errReaped) {
		t.Errorf("signal after reap: %v; want errReaped (its group ID may be another's now)", err)
	}
}

// TestPTMXRead: output comes whole, then EIO once the agent is gone; a
// read waiting when the master is closed ends with os.ErrClosed, as
// os.File.Read's would, and so does every call after.
func TestPTMXRead(t *testing.T) {
	c, err := startChild([]string{"sh", "-c", "stty -onlcr; printf 'hello\nworld\n'"}, "/", os.Environ(), 80, 24, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.ptm.Close(); c.reap() })
	buf := make([]byte, 4)
	var got []byte
	for {
		n, err := c.ptm.readAvailable(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("read after %q: %v; want EIO at the end of output", got, err)
			}
			break
		}
	}
	if string(got) != "hello\nworld\n" {
		t.Errorf("read %q; want %q", got, "hello\nworld\n")
	}

	quiet, err := startChild([]string{"sleep", "60"}, "/", os.Environ(), 80, 24, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { quiet.killAll(syscall.SIGKILL); quiet.reap() })
	closeEndsCall(t, quiet.ptm, "read waiting for output", func() error {
		_, err := quiet.ptm.readAvailable(make([]byte, 64))
		return err
	})
	if _, err := quiet.ptm.readAvailable(make([]byte, 64)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read after close: %v; want os.ErrClosed", err)
	}
	if err := quiet.ptm.write([]byte("x"), time.Second); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after close: %v; want os.ErrClosed", err)
	}
	if err := setWinsize(quiet.ptm, 100, 30); !errors.Is(err, os.ErrClosed) {
		t.Errorf("resize after close: %v; want os.ErrClosed", err)
	}
}

// TestPTMXWrite: input to an agent that does not read fills the terminal;
// then a write gives up after its timeout, and one waiting for room ends
// when the master is closed.
func TestPTMXWrite(t *testing.T) {
	c, chunk := startFullInput(t)
	closeEndsCall(t, c.ptm, "write waiting for room", func() error { return c.ptm.write(chunk, time.Hour) })
}

// TestCallsAfterTheAgentEnded: between the agent's end (its terminal
// closed, then it is reaped) and the state saying so, input, resize and
// signal answer session_not_running, not io_error.
func TestCallsAfterTheAgentEnded(t *testing.T) {
	c, err := startChild([]string{"true"}, "/", os.Environ(), 80, 24, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{spec: testSpec(t, "true"), state: proto.StateRunning, child: c, cols: 80, rows: 24}
	w.opts.setDefaults()
	w.out = newOutput(proto.MinRingSize)
	w.scr = newScreen(80, 24)
	check := func(when, call string, e *proto.RPCError) {
		t.Helper()
		if e == nil || e.Code != proto.CodeSessionNotRunning {
			t.Errorf("%s after the agent %s: %v; want %s", call, when, e, proto.CodeSessionNotRunning)
		}
	}
	<-c.done
	c.ptm.Close() // as runSession does once the agent has exited
	check("closed its terminal", "input", w.input([]byte("x")))
	check("closed its terminal", "resize", w.resize(100, 30))
	c.reap()
	_, e := w.signal(&proto.SignalParams{Signal: "TERM"})
	check("was reaped", "signal", e)
}

// TestPTMXWriteToGoneAgent: once the agent's side of the terminal is gone
// with its input queue full, a write fails with EIO at once instead of
// waiting (or spinning) until its timeout.
func TestPTMXWriteToGoneAgent(t *testing.T) {
	c, chunk := startFullInput(t)
	c.killAll(syscall.SIGKILL)
	<-c.done
	done := make(chan error, 1)
	go func() { done <- c.ptm.write(chunk, time.Hour) }()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("write after the agent's side closed: %v; want EIO", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("a write to a terminal whose agent is gone did not end")
	}
}

// startFullInput starts an agent that never reads its input and fills
// that input until a write gives up after its timeout (errWriteTimeout,
// checked); it returns the agent and the chunk it wrote. Raw mode: a
// canonical terminal would throw away input past a full line instead of
// holding the writer back.
func startFullInput(t *testing.T) (*child, []byte) {
	t.Helper()
	c, err := startChild([]string{"sh", "-c", "stty raw -echo; echo ready; exec sleep 60"}, "/", os.Environ(), 80, 24, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.killAll(syscall.SIGKILL); c.ptm.Close(); c.reap() })
	var seen []byte
	buf := make([]byte, 64)
	for !bytes.Contains(seen, []byte("ready")) {
		n, err := c.ptm.readAvailable(buf)
		if err != nil {
			t.Fatalf("waiting for the agent to be ready: %v; got %q", err, seen)
		}
		seen = append(seen, buf[:n]...)
	}
	// A short timeout: the last write is expected to give up.
	chunk := bytes.Repeat([]byte("x"), 4096)
	var werr error
	for i := 0; i < 1000 && werr == nil; i++ {
		werr = c.ptm.write(chunk, 50*time.Millisecond)
	}
	if !errors.Is(werr, errWriteTimeout) {
		t.Fatalf("writing to an agent that does not read: %v; want errWriteTimeout", werr)
	}
	return c, chunk
}

// closeEndsCall runs call (what names it in failures) in a goroutine, waits
// until it is in progress on m, closes m and checks that the call then
// ends with os.ErrClosed.
func closeEndsCall(t *testing.T, m *ptmx, what string, call func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	waitInCall(t, m)
	m.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s, interrupted by closing the master: %v; want os.ErrClosed", what, err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("a %s did not end when the master was closed", what)
	}
}

// waitInCall waits until a call on m is in progress (it then waits in
// poll(2), or is about to: Close ends it either way).
func waitInCall(t *testing.T, m *ptmx) {
	t.Helper()
	waitFor(t, "a call on the master in progress", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.users > 0
	})
}
