package ptyworker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// PrepareError is Run's error when one of the spec's prepare commands
// (proto.Spec.Prepare) failed: the agent was not started. It does not
// wrap ErrAgentNotStartable: the worker exits 1, and its supervisor
// (systemd, a Job) runs the commands again after its cooldown, up to its
// start limit.
type PrepareError struct {
	Index   int    // in Spec.Prepare
	Command string // the program's base name and its leading words (prepareName)
	Why     string // "exit 1", "timed out after 5m0s", "exec git: ..."
	Stderr  string // the tail of its stderr, on one line; "" if it wrote none
}

func (e *PrepareError) Error() string {
	s := "prepare: " + e.Command + ": " + e.Why
	if e.Stderr != "" {
		s += ": " + e.Stderr
	}
	return s
}

// prepareTail is how many bytes at the end of a failed prepare command's
// stderr its PrepareError keeps.
const prepareTail = 1024

// prepare runs the spec's prepare commands in order, each in "/" (the
// agent's directory may be what they make) with the agent's environment
// but no hook socket and no sandbox's blanks (they are the team's
// commands, not the agent's), stdin and stdout /dev/null, for at most
// timeout each. Under systemd, which waits TimeoutStartSec= for READY=1,
// each start extends that wait by the command's timeout, and the
// watchdog is fed while it runs. The first failure is a *PrepareError; a
// ctx ended first is ctx's error.
func (w *worker) prepare(ctx context.Context, timeout time.Duration) error {
	s := w.spec
	if len(s.Prepare) == 0 {
		return nil
	}
	bare := *s
	bare.Sandbox = nil
	env, err := agentEnv(&bare, "")
	if err != nil {
		return err
	}
	for i, argv := range s.Prepare {
		name := prepareName(argv)
		w.tr.writeMarker(fmt.Sprintf("run %d prepare %d of %d: %s", w.run, i+1, len(s.Prepare), name))
		w.opts.Notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d\nSTATUS=preparing (%d of %d): %s", (timeout + time.Minute).Microseconds(), i+1, len(s.Prepare), name))
		t0 := time.Now()
		if err := w.runPrepare(ctx, argv, env, timeout); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			err.Index, err.Command = i, name
			return err
		}
		w.log.Info("prepared", "command", name, "index", i, "took", time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// runPrepare runs one prepare command in its own process group, killed
// whole at the timeout or when ctx ends, feeding the watchdog meanwhile.
func (w *worker) runPrepare(ctx context.Context, argv, env []string, timeout time.Duration) *PrepareError {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = "/", env
	var stderr tailBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A descendant that keeps stderr open does not hold the start.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return &PrepareError{Why: prepareStartError(argv[0], env, err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // ends when the command is reaped
	tick := time.NewTicker(w.tick)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			w.opts.Notify("WATCHDOG=1")
			continue
		case err := <-done:
			if err == nil {
				return nil
			}
			e := &PrepareError{Stderr: stderr.line()}
			var ee *exec.ExitError
			switch {
			case errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
				e.Why = fmt.Sprintf("timed out after %s", timeout)
			case errors.As(err, &ee) && ee.ExitCode() >= 0:
				e.Why = fmt.Sprintf("exit %d", ee.ExitCode())
			case errors.As(err, &ee):
				e.Why = ee.ProcessState.String() // "signal: killed"
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					e.Why = "killed by " + unix.SignalName(ws.Signal())
				}
			default:
				e.Why = err.Error()
			}
			return e
		}
	}
}

// prepareStartError says why a prepare command could not be started,
// as startError does for the agent (but the worker is not done for:
// what prepare runs may be installed by the next try).
func prepareStartError(prog string, env []string, err error) string {
	if errors.Is(err, exec.ErrNotFound) {
		path := ""
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				path = v
			}
		}
		return fmt.Sprintf("exec %s: executable file not found in $PATH (PATH=%s)", prog, path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		err = pe.Err
	}
	return fmt.Sprintf("exec %s: %v", prog, err)
}

// prepareName is how logs, the transcript and a PrepareError name a
// prepare command: its program's base name and at most two following
// arguments that are plain words ("legion worktree ensure"). The other
// arguments (a repository's URL, a path) stay out of them.
func prepareName(argv []string) string {
	name := []string{filepath.Base(argv[0])}
	for _, a := range argv[1:min(len(argv), 3)] {
		if a == "" || strings.ContainsFunc(a, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) || a[0] == '-' {
			break
		}
		name = append(name, a)
	}
	return strings.Join(name, " ")
}

// tailBuffer keeps the last prepareTail bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - prepareTail; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// line is the tail as one line of text: valid UTF-8, its lines trimmed
// and joined with " | ", other control characters dropped.
func (t *tailBuffer) line() string {
	s := strings.ToValidUTF8(string(t.b), "")
	var lines []string
	for l := range strings.Lines(s) {
		l = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, l)
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " | ")
}

// recordPrepareFailure reports a failed prepare as a failed start: the registry's
// last exit (proto.StartFailedPrefix and the cause), the transcript, the
// log with the stderr's tail, and systemd's STATUS=.
func (w *worker) recordPrepareFailure(err error) {
	e := &proto.ExitInfo{Code: -1, Reason: proto.StartFailedPrefix + err.Error(), Time: time.Now(), Run: w.run}
	w.tr.writeMarker(fmt.Sprintf("run %d exit: %s", w.run, e.Reason))
	w.writeRegistry(func(r *proto.Registry) { r.State, r.LastExit = proto.StateExited, e })
	var pe *PrepareError
	if errors.As(err, &pe) {
		w.log.Error("prepare failed; the agent is not started", "command", pe.Command, "index", pe.Index, "why", pe.Why, "stderr", pe.Stderr, "run", w.run)
	}
	w.opts.Notify("STATUS=" + e.Reason)
}
