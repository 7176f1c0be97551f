package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

const dbusSocketUnit = `[Unit]
Description=D-Bus session bus socket of a private manager (written by units/sandbox)

[Socket]
ListenStream=%t/bus
SocketMode=0600
`

const dbusServiceUnit = `[Unit]
Description=D-Bus session bus of a private manager (written by units/sandbox)
Requires=dbus.socket

[Service]
ExecStart=%s --session --address=systemd: --nofork --nopidfile --systemd-activation
`

// managerConf sends the output of units that do not say otherwise to the
// manager's console, and so into Log: there is no journal to take it.
const managerConf = `# Written by units/sandbox: unit output goes to the sandbox's log.
[Manager]
DefaultStandardOutput=tty
DefaultStandardError=inherit
`

// writeFiles makes the sandbox's directories, the manager's configuration
// and the bus units.
func (s *Sandbox) writeFiles(dbusDaemon string) error {
	units := filepath.Join(s.RuntimeDir, "systemd", "user")
	for _, d := range []string{s.RuntimeDir, s.Home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	for _, kv := range s.Vars() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "XDG_") && strings.HasSuffix(k, "_HOME") {
			if err := os.MkdirAll(v, 0o700); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(units, "sockets.target.wants"), 0o700); err != nil {
		return err
	}
	confDir := filepath.Join(s.Home, ".config", "systemd")
	if err := os.MkdirAll(confDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(confDir, "user.conf"), []byte(managerConf), 0o600); err != nil {
		return err
	}
	files := map[string]string{
		"dbus.socket":  dbusSocketUnit,
		"dbus.service": fmt.Sprintf(dbusServiceUnit, dbusDaemon),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(units, name), []byte(text), 0o600); err != nil {
			return err
		}
	}
	if err := makeSocketNode(filepath.Join(s.Dir, inaccessibleSock)); err != nil {
		return err
	}
	return os.Symlink("../dbus.socket", filepath.Join(units, "sockets.target.wants", "dbus.socket"))
}

// inaccessibleSock is the sandbox's mode-0000 socket node (in its
// directory), which the manager script binds over
// /run/systemd/inaccessible/sock: a shell cannot make a socket node.
const inaccessibleSock = "inaccessible-sock"

// makeSocketNode makes a unix socket node at path, mode 0000, with nothing
// listening on it: bound, then closed.
func makeSocketNode(path string) error {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket node %s: %w", path, err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		return fmt.Errorf("socket node %s: %w", path, err)
	}
	return os.Chmod(path, 0)
}

// launchScript runs as the manager's future PID: it moves itself into the
// manager's cgroups (N files follow N), then execs the rest of its argv.
const launchScript = `n=$1; shift
while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 1; shift; n=$((n-1)); done
exec "$@"`

// managerScript runs inside the new mount and cgroup namespaces: argv is
// the systemd binary, the terminal the manager logs to, then (target, type,
// options) triples to mount.
//
// It refuses to go on unless every cgroup reads as "/": a user manager that
// does not own the root of its cgroup namespace moves every process of that
// root into its init.scope, which on a shared machine means other
// sessions' processes.
//
// A user manager logs to /dev/console, never to stderr, and there is no
// journal here: the sandbox's pty is bind-mounted over /dev/console (and
// /dev/null over /dev/kmsg), in this namespace only, so nothing reaches the
// machine's console or kernel log.
//
// On a booted system PID 1 makes /run/systemd/inaccessible/ (mode-0000
// nodes of each type), and a user manager bind-mounts them over what a
// unit's sandboxing hides (ProtectKernelTunables= hides /proc/kallsyms
// so, InaccessiblePaths= hides sockets so): without them such a unit fails
// with 226/NAMESPACE. The script makes them as PID 1 does, binding the
// socket node that Go made in the sandbox directory (its third argument).
const managerScript = `set -e
if grep -qv ':/$' /proc/self/cgroup; then echo "units/sandbox: not at the root of a new cgroup namespace" >&2; exit 1; fi
mount --make-rprivate /
systemd=$1 console=$2 sock=$3; shift 3
if [ -e /dev/console ]; then mount --bind "$console" /dev/console; fi
if [ -e /dev/kmsg ]; then mount --bind /dev/null /dev/kmsg; fi
mount -t tmpfs -o mode=0755 tmpfs /run/systemd
mkdir /run/systemd/system
mkdir -m 0755 /run/systemd/inaccessible
(cd /run/systemd/inaccessible && : > reg && chmod 0000 reg && mkdir -m 0000 dir && mkfifo -m 0000 fifo && mknod -m 0000 chr c 0 0 && mknod -m 0000 blk b 0 0 && : > sock && mount --bind "$sock" sock)
while [ "$#" -ge 3 ]; do mkdir -p "$1"; mount -t "$2" -o "$3" "$2" "$1"; shift 3; done
exec "$systemd" --user --log-target=console --log-level=info`

// launch starts the manager. The launcher's process becomes the manager's
// through execs (unshare runs without --fork), so s.proc is systemd.
func (s *Sandbox) launch(p prereqs, name string, log io.Writer, wrap []string) error {
	c, err := openConsole(s.managerLog, log)
	if err != nil {
		return err
	}
	s.console = c
	procs := s.cgroups.ProcsFiles()
	args := []string{"-c", launchScript, name + "-launch", strconv.Itoa(len(procs))}
	args = append(args, procs...)
	args = append(args, wrap...)
	args = append(args, p.unshare, "-m", "-C", "/bin/sh", "-c", managerScript, name+"-manager", p.systemd, c.pts.Name(), filepath.Join(s.Dir, inaccessibleSock))
	for _, mt := range p.layout.Mounts {
		args = append(args, mt.Target, mt.FSType, mt.Options)
	}
	out, err := os.OpenFile(s.launcherLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own copy

	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = managerEnv(s.Vars())
	cmd.Dir = s.Home
	cmd.Stdout, cmd.Stderr = out, out
	// If the starting process dies before Stop, the manager gets SIGTERM,
	// which makes a user manager stop its units and exit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}

	started := make(chan error, 1)
	// This goroutine starts the manager and reaps it; it ends when the
	// manager exits (Stop makes sure it does). Pdeathsig fires when the
	// starting *thread* ends, so the goroutine keeps its thread locked for
	// the manager's whole life.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(s.exited)
			return
		}
		s.proc = cmd.Process
		started <- nil
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("run launcher: %w", err)
	}
	return nil
}

// waitReady polls until the private socket exists and the bus has the
// manager's name, then waits for the startup jobs to finish.
func (s *Sandbox) waitReady(ctx context.Context) error {
	private := filepath.Join(s.RuntimeDir, "systemd", "private")
	var lastErr error
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("manager exited during startup: %v", s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("manager not ready: %w (last check: %v)", ctx.Err(), lastErr)
		default:
		}
		if _, err := os.Stat(private); err != nil {
			lastErr = err
		} else if ok, err := busHasManager(ctx, s.BusAddress); err != nil {
			lastErr = err
		} else if !ok {
			lastErr = errors.New("org.freedesktop.systemd1 has no owner on the session bus yet")
		} else {
			break
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	// Startup jobs (default.target) may still run; callers start from a
	// settled manager. is-system-running exits non-zero when degraded,
	// which is fine here: only the wait matters.
	out, err := s.Systemctl(ctx, "is-system-running", "--wait")
	if err != nil && out == "" {
		return err
	}
	return nil
}

// busHasManager asks the bus at addr whether org.freedesktop.systemd1 has
// an owner. Connecting also activates the bus (dbus.socket), which makes
// the manager join it.
func busHasManager(ctx context.Context, addr string) (bool, error) {
	conn, err := dbus.Dial(addr, dbus.WithContext(ctx))
	if err != nil {
		return false, fmt.Errorf("dial session bus: %w", err)
	}
	defer conn.Close()
	if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		return false, fmt.Errorf("authenticate to session bus: %w", err)
	}
	if err := conn.Hello(); err != nil {
		return false, fmt.Errorf("hello to session bus: %w", err)
	}
	var has bool
	err = conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, "org.freedesktop.systemd1").Store(&has)
	if err != nil {
		return false, fmt.Errorf("NameHasOwner: %w", err)
	}
	return has, nil
}
