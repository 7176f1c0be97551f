package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// finalLogMax bounds the log text Log keeps in memory after Stop.
const finalLogMax = 1 << 20

// Stop stops the manager and removes everything Start made: it runs
// `systemctl --user exit` (the manager stops its units, then exits) and
// waits until ctx ends or 30 s pass; if the manager is still running then,
// it gets SIGKILL. Then it SIGKILLs whatever is left in the sandbox's
// cgroups, removes the cgroups and the sandbox directory, and stops the
// copy to Options.Log. The kill steps do not depend on ctx: with a ctx
// that is already done, Stop kills at once and still cleans up (which
// takes up to about 10 s more).
//
// Stop is idempotent and safe for concurrent use: once a Stop has
// succeeded, later calls return nil; after a failed Stop, the next one
// retries what is left. The error, if any, quotes the manager's log.
func (s *Sandbox) Stop(ctx context.Context) error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.stopped {
		return nil
	}
	var errs []error
	if err := s.stopManager(ctx); err != nil {
		errs = append(errs, err)
	}
	if s.cgroups != nil {
		deadline := time.Now().Add(killTimeout)
		if err := s.cgroups.KillAll(deadline); err != nil {
			errs = append(errs, err)
		}
		if err := s.cgroups.Remove(deadline); err != nil {
			errs = append(errs, err)
		}
	}
	if c := s.console; c != nil {
		// No process of the manager is left to hold the terminal open, so
		// with ours closed the copier drains what is buffered and ends.
		c.pts.Close()
		s.console = nil
		select {
		case <-c.copied:
		case <-time.After(killTimeout):
			errs = append(errs, errors.New("the manager's console is still held open by some process"))
		}
		if c.tee != nil {
			c.tee.detach()
		}
	}
	if len(errs) > 0 {
		errs = append(errs, fmt.Errorf("manager log, last lines:\n%s", s.logTail(30)))
	}
	s.logMu.Lock()
	if s.finalLog == nil { // a retried Stop finds the files gone
		text := s.readLog()
		if len(text) > finalLogMax {
			text = "(earlier lines dropped)\n" + text[len(text)-finalLogMax:]
		}
		s.finalLog = &text
	}
	s.logMu.Unlock()
	if err := os.RemoveAll(s.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove sandbox dir: %w", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("stop private systemd user manager in %s: %w", s.Dir, errors.Join(errs...))
	}
	s.stopped = true
	return nil
}

// stopManager ends the manager process: politely, then by SIGKILL. Signals
// go through s.proc, which never signals a PID that was reaped (and maybe
// reused).
func (s *Sandbox) stopManager(ctx context.Context) error {
	if s.proc == nil { // never launched
		return nil
	}
	select {
	case <-s.exited:
		return nil
	default:
	}
	exitCtx, cancel := context.WithTimeout(ctx, exitTimeout)
	defer cancel()
	if exitCtx.Err() == nil {
		if _, err := s.Systemctl(exitCtx, "exit"); err != nil {
			// Not reachable (a failed start, say): a user manager exits on
			// SIGTERM too.
			if err := s.proc.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				return fmt.Errorf("stop manager %d: %w", s.proc.Pid, err)
			}
		}
	}
	var err error
	select {
	case <-s.exited:
		return nil
	case <-exitCtx.Done():
		if ctx.Err() == nil { // our timeout, not the caller's
			err = fmt.Errorf("manager %d did not exit within %v, so it was killed", s.proc.Pid, exitTimeout)
		}
	}
	if kerr := s.proc.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
		return errors.Join(err, fmt.Errorf("kill manager %d: %w", s.proc.Pid, kerr))
	}
	select {
	case <-s.exited:
		return err
	case <-time.After(killTimeout):
		return errors.Join(err, fmt.Errorf("manager %d still running %v after SIGKILL", s.proc.Pid, killTimeout))
	}
}

// Log returns what the manager has logged so far at level info (unit
// starts, exits, failures) and what its units printed, after anything the
// launcher printed. There is no journal in the sandbox. After Stop, Log
// returns the text as it was when Stop removed the files (at most the last
// MiB).
func (s *Sandbox) Log() string {
	s.logMu.Lock()
	final := s.finalLog
	s.logMu.Unlock()
	if final != nil {
		return *final
	}
	return s.readLog()
}

func (s *Sandbox) readLog() string {
	var b strings.Builder
	for _, path := range []string{s.launcherLog, s.managerLog} {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(&b, "(read %s: %v)\n", path, err)
		}
		b.Write(data)
	}
	return b.String()
}

func (s *Sandbox) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(s.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
