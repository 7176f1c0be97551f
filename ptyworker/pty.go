package ptyworker

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/confine"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// child is the agent process on its PTY (the master: see ptmx).
//
// The agent is not reaped when it exits: done closes while it is a zombie,
// which keeps its PID, and so its process group ID, from being reused, so
// signals to the group after the exit (killing what it left holding the
// terminal) cannot reach a stranger. reap collects it once the worker is
// done with the group.
type child struct {
	cmd  *exec.Cmd
	ptm  *ptmx
	pid  int
	done chan struct{} // closed once the agent exited (not yet reaped)

	mu     sync.Mutex // held by reap and while signalling the group
	reaped bool       // cmd.Wait was called: the PID may be another's now
}

// startChild starts argv in its own session with the PTY as controlling
// terminal, the size set before exec.
//
// With a sandbox the agent is started through the trampoline (package
// confine): this worker's own program, restricted by the ruleset it gets
// as descriptor 3, execs argv.
func startChild(argv []string, dir string, env []string, cols, rows int, sandbox *api.Sandbox) (*child, error) {
	var ruleset *os.File
	if sandbox != nil {
		if _, err := lookPathIn(argv[0], env); err != nil {
			return nil, startError(argv, dir, err)
		}
		fd, flags, err := confine.Ruleset(sandbox)
		if err != nil {
			// Its permission prompts are off: unconfined, it must not run,
			// and a restart would not confine it.
			return nil, fmt.Errorf("%w: %w", ErrAgentNotStartable, err)
		}
		ruleset = os.NewFile(uintptr(fd), "landlock-ruleset")
		defer ruleset.Close()
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("sandbox: find the worker's own program: %w", err)
		}
		argv = confine.Command(self, flags, argv)
	}
	ptm, tty, err := openPTY()
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		tty.Close() // the child holds its own copy; ours must go so EIO can come
		if !ok {
			ptm.Close()
		}
	}()
	if err := setWinsize(ptm, cols, rows); err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if ruleset != nil {
		cmd.ExtraFiles = []*os.File{ruleset}
	}
	if err := cmd.Start(); err != nil {
		return nil, startError(argv, dir, err)
	}
	ok = true
	c := &child{cmd: cmd, ptm: ptm, pid: cmd.Process.Pid, done: make(chan struct{})}
	// Exits when the child exits, leaving it to reap.
	go func() {
		defer close(c.done)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, c.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return // nil: exited; any other error: Wait will say
			}
		}
	}()
	return c, nil
}

// reap waits for the agent to exit and collects it (exitInfo is valid
// after). Signals to its process group must not follow.
func (c *child) reap() {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reaped {
		c.cmd.Wait() // the result is in cmd.ProcessState (see exitInfo)
		c.reaped = true
	}
}

// errReaped: the agent was reaped, its process group ID may be another's.
var errReaped = errors.New("the agent has exited and was collected")

// openPTY opens a PTY pair. creack/pty leaves the master in blocking mode;
// the master returned is a duplicate that ptmx owns.
func openPTY() (ptm *ptmx, tty *os.File, err error) {
	blocking, tty, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	defer blocking.Close()
	fd, err := unix.FcntlInt(blocking.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		tty.Close()
		return nil, nil, fmt.Errorf("open pty: dup master: %w", err)
	}
	if ptm, err = newPTMX(fd); err != nil {
		unix.Close(fd)
		tty.Close()
		return nil, nil, err
	}
	return ptm, tty, nil
}

// setWinsize sets the PTY size.
func setWinsize(ptm *ptmx, cols, rows int) error {
	ws := &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}
	err := ptm.ioctl(func(fd int) error { return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws) })
	if err != nil {
		return fmt.Errorf("set pty size %dx%d: %w", cols, rows, err)
	}
	return nil
}

// foreground returns the PTY's foreground process group (tcgetpgrp).
func (c *child) foreground() (int, error) {
	var pgrp int
	err := c.ptm.ioctl(func(fd int) (err error) {
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("foreground process group: %w", err)
	}
	return pgrp, nil
}

// signal sends sig to the target group: TargetForeground is the terminal's
// foreground job (falling back to the agent's group when the terminal has
// none), TargetGroup the agent's own process group.
func (c *child) signal(sig syscall.Signal, target string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reaped {
		return 0, errReaped
	}
	pgid := c.pid // Setsid: the agent leads its own group
	if target == proto.TargetForeground {
		if fg, err := c.foreground(); err == nil && fg > 0 {
			pgid = fg
		}
	}
	if err := syscall.Kill(-pgid, sig); err != nil {
		return pgid, fmt.Errorf("signal %s to process group %d: %w", unix.SignalName(sig), pgid, err)
	}
	return pgid, nil
}

// killAll sends sig to the agent's group and to the foreground group when
// that differs (a job the agent's shell put in its own group).
func (c *child) killAll(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reaped {
		return
	}
	syscall.Kill(-c.pid, sig) // errors: the group is already gone
	if fg, err := c.foreground(); err == nil && fg > 0 && fg != c.pid {
		syscall.Kill(-fg, sig)
	}
}

// write sends input to the PTY, giving up after timeout when the agent does
// not read.
func (c *child) write(p []byte, timeout time.Duration) error {
	if err := c.ptm.write(p, timeout); err != nil {
		if errors.Is(err, errWriteTimeout) {
			return fmt.Errorf("write to pty: the agent has not read its input for %s", timeout)
		}
		return fmt.Errorf("write to pty: %w", err)
	}
	return nil
}

// exitInfo turns Wait's result into ExitInfo fields; call reap first.
func (c *child) exitInfo() (code int, sig string) {
	if c.cmd.ProcessState == nil {
		return -1, ""
	}
	st, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return -1, ""
	}
	if st.Signaled() {
		return -1, unix.SignalName(st.Signal())
	}
	return st.ExitStatus(), ""
}

// parseSignal accepts "INT", "SIGINT", "int" or a number.
func parseSignal(s string) (syscall.Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	if name == "" {
		return 0, errors.New("empty signal name")
	}
	var n int
	if _, err := fmt.Sscanf(name, "%d", &n); err == nil && fmt.Sprint(n) == name {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("signal number %d out of range", n)
		}
		return syscall.Signal(n), nil
	}
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig := unix.SignalNum(name)
	if sig == 0 {
		return 0, fmt.Errorf("unknown signal %q", s)
	}
	return sig, nil
}

// defaultTarget is where a signal goes when the caller does not say:
// keyboard signals to the foreground job, the rest to the agent's group.
func defaultTarget(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP:
		return proto.TargetForeground
	}
	return proto.TargetGroup
}

// childEnv builds the agent's environment: base without the variables that
// belong to the worker's unit (NOTIFY_SOCKET, WATCHDOG_*, LISTEN_*), then
// TERM if unset, the LEGION_* identity and the spec's env on top, and last,
// with a hook token (agent kind claude), the worker's hook socket and the
// token (EnvHookSocket, EnvHookToken), which no other source may set.
func childEnv(base []string, s *proto.Spec, hookToken string) []string {
	drop := func(k string) bool {
		switch k {
		case "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", proto.EnvHookSocket, proto.EnvHookToken:
			return true
		}
		return strings.HasPrefix(k, "LISTEN_") || strings.HasPrefix(k, "WATCHDOG_")
	}
	env := make([]string, 0, len(base)+len(s.Env)+8)
	idx := map[string]int{}
	set := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if drop(k) {
			return
		}
		if i, ok := idx[k]; ok {
			env[i] = kv
			return
		}
		idx[k] = len(env)
		env = append(env, kv)
	}
	for _, kv := range base {
		set(kv)
	}
	if _, ok := idx["TERM"]; !ok {
		set("TERM=xterm-256color")
	}
	set("LEGION_SESSION=" + s.AgentSessionID()) // see Spec.AgentSessionID
	set("LEGION_SESSION_NAME=" + s.Name)
	set("LEGION_TEAM=" + s.Team)
	if s.Issue != "" {
		set("LEGION_ISSUE=" + s.Issue)
	}
	if s.Mode != "" {
		set("LEGION_MODE=" + s.Mode)
	}
	if s.Role != "" {
		set("LEGION_ROLE=" + s.Role)
	}
	for _, kv := range s.Env {
		set(kv)
	}
	if s.Sandbox != nil {
		// The user's key agents would sign with keys the sandbox hides.
		for _, k := range []string{"SSH_AUTH_SOCK", "GPG_AGENT_INFO"} {
			if i, ok := idx[k]; ok {
				env[i] = k + "="
			}
		}
	}
	if hookToken != "" {
		env = append(env, proto.EnvHookSocket+"="+s.SocketPath(), proto.EnvHookToken+"="+hookToken)
	}
	return env
}

// agentEnv is the agent's environment (childEnv) with its variables read
// from files (Spec.EnvFiles). A file that cannot be read is
// ErrAgentNotStartable: a restart would read the same file.
func agentEnv(s *proto.Spec, hookToken string) ([]string, error) {
	more, err := proto.ReadEnvFiles(s.EnvFiles)
	if err != nil {
		return nil, fmt.Errorf("%w: the agent's environment: %w", ErrAgentNotStartable, err)
	}
	env := slices.DeleteFunc(childEnv(os.Environ(), s, hookToken), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, fromFile := s.EnvFiles[k]
		return fromFile
	})
	return append(env, more...), nil
}

// lookPathIn finds prog as exec.LookPath would with env's PATH, so that a
// sandboxed agent whose program is missing fails the start as an
// unsandboxed one does (see startError), not in the trampoline.
func lookPathIn(prog string, env []string) (string, error) {
	if strings.Contains(prog, "/") {
		return exec.LookPath(prog)
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if p, err := exec.LookPath(filepath.Join(d, prog)); err == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: prog, Err: exec.ErrNotFound}
}
