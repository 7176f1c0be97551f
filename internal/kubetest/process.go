package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stopGrace is how long a component has to exit after SIGTERM before it is
// killed: the API server drains its requests for a few seconds.
const stopGrace = 15 * time.Second

// logTail is how many lines of each component's log a failed test prints.
const logTail = 60

// component is one process of the control plane.
type component struct {
	name string
	cmd  *exec.Cmd
	log  string // Dir/<name>.log: its stdout and stderr
	done chan struct{}
	err  error // how it exited, once done is closed
}

// start runs bin with args as a child of the test process, its output in
// dir/<name>.log, and registers its end in t.Cleanup: SIGTERM, then SIGKILL
// after stopGrace. Pdeathsig kills it should the test process die first
// (a panic, a timeout, SIGKILL), so no component outlives its test.
func start(t testing.TB, dir, name, bin string, env []string, args ...string) (*component, error) {
	t.Helper()
	c := &component{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(c.log)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Dir = dir
	c.cmd.Env = env // nil: this process's
	c.cmd.Stdout, c.cmd.Stderr = f, f
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startOnSpawner(c.cmd); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	f.Close() // the child holds its own copy
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.stop)
	return c, nil
}

// spawn carries start requests to the spawner thread.
var spawn = make(chan spawnRequest)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var spawnerOnce sync.Once

// startOnSpawner starts cmd from one OS thread that never exits. Pdeathsig
// fires when the thread that forked the child exits, not the process
// (golang/go#27505), and Go ends a thread when a goroutine that locked it
// returns without unlocking (as code entering namespaces does): a child
// started from such a thread would be killed in mid-test. The spawner
// goroutine locks its thread and lives as long as the test process.
func startOnSpawner(cmd *exec.Cmd) error {
	spawnerOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives until the process exits
			for r := range spawn {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error)
	spawn <- spawnRequest{cmd, done}
	return <-done
}

// stop ends the component by its PID: SIGTERM, then SIGKILL if it has not
// exited after stopGrace. It returns once the process is reaped.
func (c *component) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM) // it may have exited meanwhile: then done is closed below
	select {
	case <-c.done:
	case <-time.After(stopGrace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// exited returns a non-nil error, naming the component and its log, if the
// process has exited: a control plane whose part died is not ready.
func (c *component) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s (pid %d) exited: %v; its log %s ends:\n%s", c.name, c.cmd.Process.Pid, c.err, c.log, tail(c.log, 20))
	default:
		return nil
	}
}

// tail returns the last n lines of file, or a note saying why it cannot.
func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	b = bytes.TrimRight(b, "\n")
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago: it holds all n listeners open at once (so no two are equal)
// and closes them. Another process may take one before the component binds
// it; the component then exits and Start fails naming its log.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(errors.New("find a free port on 127.0.0.1"), err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// hostPort is 127.0.0.1:port.
func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
