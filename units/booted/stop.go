package booted

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/legion-dev/legion/internal/cgroups"
)

const (
	sigKill = syscall.SIGKILL
	sigTerm = syscall.SIGTERM
)

// child is a process this package started and reaps.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once reaped
	err    error         // its exit status, set before exited closes
}

// startChild starts cmd with a parent death signal and reaps it. Pdeathsig
// fires when the starting *thread* ends, so the goroutine that starts and
// waits keeps its thread locked for the child's whole life; it ends when
// the child exits (Stop makes sure it does).
func startChild(cmd *exec.Cmd, deathSig syscall.Signal) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: deathSig}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(c.exited)
			return
		}
		started <- nil
		c.err = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// end signals the child (through its os.Process, which never signals a
// reaped PID) and waits for it until timeout or ctx ends, then SIGKILLs
// it.
func (c *child) end(ctx context.Context, sig syscall.Signal, timeout time.Duration) error {
	select {
	case <-c.exited:
		return nil
	default:
	}
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal process %d: %w", c.cmd.Process.Pid, err)
	}
	var err error
	select {
	case <-c.exited:
		return nil
	case <-time.After(timeout):
		err = fmt.Errorf("process %d did not exit within %v of %v, so it was killed", c.cmd.Process.Pid, timeout, sig)
	case <-ctx.Done(): // the caller's deadline: kill, no error of ours
	}
	if kerr := c.cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
		return errors.Join(err, fmt.Errorf("kill process %d: %w", c.cmd.Process.Pid, kerr))
	}
	select {
	case <-c.exited:
		return err
	case <-time.After(killTimeout):
		return errors.Join(err, fmt.Errorf("process %d still running %v after SIGKILL", c.cmd.Process.Pid, killTimeout))
	}
}

// Reboot powers the container off and boots it again over the same
// overlay: its disk (/home, /var, /etc) stays, /run and every process
// start afresh. It returns once systemd inside is running again.
func (s *System) Reboot(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return fmt.Errorf("reboot %s: stopped", s.Machine)
	}
	if err := s.powerOff(ctx); err != nil {
		return fmt.Errorf("reboot %s: %w", s.Machine, err)
	}
	if err := s.bootOnce(ctx); err != nil {
		return fmt.Errorf("reboot %s: %w\nconsole, last lines:\n%s", s.Machine, err, s.ConsoleTail(40))
	}
	return nil
}

// powerOff ends the current boot: SIGTERM to nspawn makes systemd inside
// halt cleanly; then whatever is left in the boot's cgroups is killed and
// the cgroups are removed.
func (s *System) powerOff(ctx context.Context) error {
	if s.boot == nil {
		return nil
	}
	var errs []error
	if err := s.boot.end(ctx, sigTerm, poweroffTimeout); err != nil {
		errs = append(errs, fmt.Errorf("power off: %w", err))
	}
	s.boot, s.init = nil, 0
	dirs := s.bootCgroups()
	deadline := time.Now().Add(killTimeout)
	if err := dirs.KillAll(deadline); err != nil {
		errs = append(errs, err)
	}
	if err := dirs.Remove(deadline); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Stop powers the container off and removes everything Boot made: it
// kills the holder (its mount namespace, and so the overlay, the tmpfs and
// every mount, go with it) and whatever is left in the system's cgroups,
// removes the cgroups, children first, and the directory. The clean halt
// gets up to a minute, less when ctx ends sooner; the kill steps do not
// depend on ctx.
//
// Stop is idempotent: once a Stop has succeeded, later calls return nil;
// after a failed one, the next retries what is left.
func (s *System) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	var errs []error
	if err := s.powerOff(ctx); err != nil {
		errs = append(errs, err)
	}
	if s.holder != nil {
		if err := s.holder.end(ctx, sigKill, killTimeout); err != nil {
			errs = append(errs, fmt.Errorf("end the mount namespace's holder: %w", err))
		}
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
	if len(errs) == 0 {
		if err := os.RemoveAll(s.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", s.Dir, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stop booted system %s: %w", s.Machine, errors.Join(errs...))
	}
	s.stopped = true
	return nil
}

// sweepStale removes what systems named name left in base and in the
// cgroup hierarchies when the process that booted them died before Stop
// (its parent death signals ended them). Best effort; it kills nothing and
// leaves alone names not of the form NAME-PID-RANDOM, names whose PID is a
// live process, and cgroup trees that still hold a process (and then
// their directories).
func sweepStale(base, name string, l cgroups.Layout) {
	prefix := name + "-"
	busy := cgroups.RemoveStale(l, prefix)
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && cgroups.StaleName(e.Name(), prefix) && !busy[e.Name()] {
			_ = os.RemoveAll(filepath.Join(base, e.Name())) // best effort: a leftover stays for the next sweep
		}
	}
}
