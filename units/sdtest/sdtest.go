// Package sdtest starts a private, real systemd user manager for a test, on
// machines where PID 1 is not systemd (containers, CI) as well as on
// ordinary ones. Each manager has its own runtime dir, home, D-Bus session
// bus, and mount and cgroup namespaces, so several test processes can run
// managers at the same time without seeing each other's units.
//
// The package owns the sandbox directory it makes, the manager process and
// every process in the manager's cgroups, and those cgroups. It must never
// touch the real user's manager, home or runtime dir, and never signal a
// process it did not start.
//
// How a manager is set up (see also notes/systemd-sandbox.md):
//
//   - a fresh directory D under os.TempDir() (short: socket paths must stay
//     under 108 bytes) with D/run (0700) as XDG_RUNTIME_DIR and D/home as
//     HOME, the XDG_*_HOME dirs below it;
//   - a cgroup named like D in each mounted hierarchy (name=systemd, pids,
//     memory, unified; or the one cgroup2 hierarchy), below the test
//     process's own cgroup;
//   - a launcher shell writes its PID into those cgroups, then execs
//     `unshare -m -C`, which mounts a tmpfs on /run/systemd (systemd's
//     "booted with systemd" test wants /run/systemd/system) and remounts the
//     hierarchies so the manager sees its cgroup as the root, and execs
//     `systemd --user`;
//   - the session bus is the manager's own: D/run/systemd/user holds a
//     dbus.socket listening on D/run/bus and the dbus.service it activates.
//     (A dbus-daemon started beside the manager does not work: systemd 252
//     joins the API bus only when its own dbus.socket and dbus.service
//     units are running, and a dbus.socket unit replaces the socket file.)
//   - the manager logs to /dev/console only, and there is no journal: inside
//     the namespace a pty of the test's is /dev/console, copied into
//     D/manager.log, and D/home/.config/systemd/user.conf sends the output
//     of units there too (Manager.Log; failed tests print its tail);
//   - ready when D/run/systemd/private exists and the bus says
//     org.freedesktop.systemd1 has an owner, and startup jobs are done.
//
// Cleanup runs `systemctl --user exit`, waits, SIGKILLs what is left in the
// cgroups, removes the cgroups children first, and removes D. If the test
// process dies first, the manager gets SIGTERM (Pdeathsig) and exits, and
// the next test process to call Start removes the empty cgroups and the
// directories of test processes that are gone.
package sdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// Timeouts are generous: a loaded CI machine is slow, and a test never
// waits for them unless something is broken.
const (
	startTimeout   = 60 * time.Second // until the manager is ready
	exitTimeout    = 30 * time.Second // for `systemctl --user exit` to end the manager
	killTimeout    = 10 * time.Second // for leftover processes to die, cgroups to go
	commandTimeout = 60 * time.Second // one systemctl run
)

// Manager is a running private systemd user manager. Its fields describe
// the sandbox; Start has already put them into the test's environment.
type Manager struct {
	Dir        string   // the sandbox directory; removed at cleanup
	RuntimeDir string   // XDG_RUNTIME_DIR: Dir/run, mode 0700
	BusAddress string   // DBUS_SESSION_BUS_ADDRESS: unix:path=RuntimeDir/bus
	Home       string   // HOME: Dir/home; XDG_CONFIG_HOME etc. are below it
	Env        []string // the test's environment with the sandbox variables set, ready for exec.Cmd.Env

	cgroups     cgroupDirs
	logPath     string        // the launcher's and the manager's stdout and stderr
	consolePath string        // what the manager logs to its console, copied from the pty
	console     *os.File      // the pty's terminal end, the manager's /dev/console; nil once closed
	copied      chan struct{} // closed when everything written to the console is in consolePath
	pid         int           // the manager's PID; 0 before launch
	exited      chan struct{} // closed once the manager process is reaped
	waitErr     error         // the manager's exit status, set before exited closes
	ready       bool          // Start succeeded
	closeOnce   sync.Once
}

// sweep removes leftovers of earlier test processes once per process.
var sweep sync.Once

// Start starts a private systemd user manager and sets XDG_RUNTIME_DIR,
// DBUS_SESSION_BUS_ADDRESS, HOME, XDG_CONFIG_HOME, XDG_STATE_HOME,
// XDG_DATA_HOME and XDG_CACHE_HOME to the sandbox with t.Setenv, so a test
// that calls it must not use t.Parallel. t.Cleanup stops the manager and
// removes everything Start made. Start skips the test (fails it with
// CI=true) when not root or when a prerequisite is missing, and fails it,
// quoting the manager's log, when the manager does not come up.
func Start(t testing.TB) *Manager {
	t.Helper()
	p := prerequisites(t)

	sweep.Do(func() {
		p.layout.sweepStaleCgroups()
		sweepStaleDirs(p.base, namePrefix)
	})

	dir, err := os.MkdirTemp(p.base, namePrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		t.Fatalf("start private systemd user manager: %v", err)
	}
	m := &Manager{
		Dir:         dir,
		RuntimeDir:  filepath.Join(dir, "run"),
		Home:        filepath.Join(dir, "home"),
		logPath:     filepath.Join(dir, "launcher.log"),
		consolePath: filepath.Join(dir, "manager.log"),
		exited:      make(chan struct{}),
		copied:      make(chan struct{}),
	}
	m.BusAddress = "unix:path=" + filepath.Join(m.RuntimeDir, "bus")
	t.Cleanup(func() { m.close(t) })

	if private := filepath.Join(m.RuntimeDir, "systemd", "private"); len(private) > 100 {
		t.Fatalf("start private systemd user manager: socket path %s is too long for a unix socket: set TMPDIR to a short directory", private)
	}
	if err := m.writeFiles(p.dbusDaemon); err != nil {
		t.Fatalf("start private systemd user manager: %v", err)
	}
	cgroups := p.layout.dirs(filepath.Base(dir))
	if err := cgroups.create(); err != nil {
		t.Fatalf("start private systemd user manager: %v", err)
	}
	m.cgroups = cgroups

	sandbox := m.sandboxEnv()
	for _, kv := range sandbox {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	m.Env = os.Environ()

	if err := m.launch(p, sandbox); err != nil {
		t.Fatalf("start private systemd user manager: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := m.waitReady(ctx); err != nil {
		t.Fatalf("start private systemd user manager in %s: %v\nmanager log, last lines:\n%s", m.Dir, err, m.logTail(60))
	}
	m.ready = true
	return m
}

// sandboxEnv is what Start sets in the test's environment; the manager runs
// with only these and a few harmless variables from the test's.
func (m *Manager) sandboxEnv() []string {
	return []string{
		"XDG_RUNTIME_DIR=" + m.RuntimeDir,
		"DBUS_SESSION_BUS_ADDRESS=" + m.BusAddress,
		"HOME=" + m.Home,
		"XDG_CONFIG_HOME=" + filepath.Join(m.Home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(m.Home, ".local", "state"),
		"XDG_DATA_HOME=" + filepath.Join(m.Home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(m.Home, ".cache"),
	}
}

// managerEnv is the manager's whole environment, which its units inherit:
// the sandbox plus PATH, locale and user name, and nothing else of the
// test's (which may hold secrets).
func managerEnv(sandbox []string) []string {
	env := append([]string(nil), sandbox...)
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "USER", "LOGNAME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

const dbusSocketUnit = `[Unit]
Description=D-Bus session bus socket of a test manager (written by sdtest)

[Socket]
ListenStream=%t/bus
SocketMode=0600
`

const dbusServiceUnit = `[Unit]
Description=D-Bus session bus of a test manager (written by sdtest)
Requires=dbus.socket

[Service]
ExecStart=%s --session --address=systemd: --nofork --nopidfile --systemd-activation
`

// managerConf sends the output of units that do not say otherwise to the
// manager's console, and so into Log: there is no journal to take it.
const managerConf = `# Written by sdtest: unit output goes to the test's log.
[Manager]
DefaultStandardOutput=tty
DefaultStandardError=inherit
`

// writeFiles makes the sandbox's directories, the manager's configuration
// and the bus units.
func (m *Manager) writeFiles(dbusDaemon string) error {
	units := filepath.Join(m.RuntimeDir, "systemd", "user")
	for _, d := range []string{m.RuntimeDir, m.Home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	for _, kv := range m.sandboxEnv() {
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
	confDir := filepath.Join(m.Home, ".config", "systemd")
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
	return os.Symlink("../dbus.socket", filepath.Join(units, "sockets.target.wants", "dbus.socket"))
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
// journal here: the test's pty is bind-mounted over /dev/console (and
// /dev/null over /dev/kmsg), in this namespace only, so nothing reaches the
// machine's console or kernel log.
const managerScript = `set -e
if grep -qv ':/$' /proc/self/cgroup; then echo "sdtest: not at the root of a new cgroup namespace" >&2; exit 1; fi
mount --make-rprivate /
systemd=$1 console=$2; shift 2
if [ -e /dev/console ]; then mount --bind "$console" /dev/console; fi
if [ -e /dev/kmsg ]; then mount --bind /dev/null /dev/kmsg; fi
mount -t tmpfs -o mode=0755 tmpfs /run/systemd
mkdir /run/systemd/system
while [ "$#" -ge 3 ]; do mkdir -p "$1"; mount -t "$2" -o "$3" "$2" "$1"; shift 3; done
exec "$systemd" --user --log-target=console --log-level=info`

// launch starts the manager. The manager's process is the launcher's, so
// m.pid is systemd's PID once the execs are done.
func (m *Manager) launch(p prereqs, sandbox []string) error {
	if err := m.openConsole(); err != nil {
		return err
	}
	procs := m.cgroups.procsFiles()
	args := []string{"-c", launchScript, "sdtest-launch", strconv.Itoa(len(procs))}
	args = append(args, procs...)
	args = append(args, p.unshare, "-m", "-C", "/bin/sh", "-c", managerScript, "sdtest-manager", p.systemd, m.console.Name())
	for _, mt := range p.layout.mounts {
		args = append(args, mt.target, mt.fsType, mt.options)
	}
	log, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own copy

	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = managerEnv(sandbox)
	cmd.Dir = m.Home
	cmd.Stdout, cmd.Stderr = log, log
	// If the test process dies before its cleanup, the manager gets SIGTERM,
	// which makes a user manager stop its units and exit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}

	started := make(chan error, 1)
	// This goroutine starts the manager and reaps it; it ends when the
	// manager exits (close makes sure it does). Pdeathsig fires when the
	// starting *thread* ends, so the goroutine keeps its thread locked for
	// the manager's whole life.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(m.exited)
			return
		}
		m.pid = cmd.Process.Pid
		started <- nil
		m.waitErr = cmd.Wait()
		close(m.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("run launcher: %w", err)
	}
	return nil
}

// waitReady polls until the private socket exists and the bus has the
// manager's name, then waits for the startup jobs to finish.
func (m *Manager) waitReady(ctx context.Context) error {
	private := filepath.Join(m.RuntimeDir, "systemd", "private")
	var lastErr error
	for {
		select {
		case <-m.exited:
			return fmt.Errorf("manager exited during startup: %v", m.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v (last check: %v)", startTimeout, lastErr)
		default:
		}
		if _, err := os.Stat(private); err != nil {
			lastErr = err
		} else if ok, err := busHasManager(ctx, m.BusAddress); err != nil {
			lastErr = err
		} else if !ok {
			lastErr = errors.New("org.freedesktop.systemd1 has no owner on the session bus yet")
		} else {
			break
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	// Startup jobs (default.target) may still run; tests start from a
	// settled manager. is-system-running exits non-zero when degraded,
	// which is fine here: only the wait matters.
	out, err := systemctl(ctx, m.Env, "is-system-running", "--wait")
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

// Systemctl runs `systemctl --user --no-pager ARGS...` against this manager
// and returns its stdout. The error quotes systemctl's stderr.
func (m *Manager) Systemctl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	return systemctl(ctx, m.Env, args...)
}

func systemctl(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "systemctl", append([]string{"--user", "--no-pager"}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("systemctl --user %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Log returns what the manager has logged so far at level info (unit
// starts, exits, failures), after anything the launcher printed. There is
// no journal in the sandbox.
func (m *Manager) Log() string {
	var b strings.Builder
	for _, path := range []string{m.logPath, m.consolePath} {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(&b, "(read %s: %v)\n", path, err)
		}
		b.Write(data)
	}
	return b.String()
}

func (m *Manager) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(m.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// close stops the manager and removes everything Start made. It runs once,
// from t.Cleanup, and copes with a Start that failed half way.
func (m *Manager) close(t testing.TB) {
	m.closeOnce.Do(func() {
		if t.Failed() && m.ready { // a failed start quoted the log already
			t.Logf("private systemd user manager in %s, log (last lines):\n%s", m.Dir, m.logTail(100))
		}
		if err := m.stop(); err != nil {
			t.Errorf("clean up private systemd user manager in %s: %v\nmanager log, last lines:\n%s", m.Dir, err, m.logTail(30))
		}
		if err := os.RemoveAll(m.Dir); err != nil {
			t.Errorf("clean up private systemd user manager: %v", err)
		}
	})
}

func (m *Manager) stop() error {
	var errs []error
	if m.pid != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), exitTimeout)
		defer cancel()
		select {
		case <-m.exited:
		default:
			if _, err := systemctl(ctx, m.Env, "exit"); err != nil {
				// Not reachable (a failed start, say): a user manager exits
				// on SIGTERM too.
				if err := syscall.Kill(m.pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
					errs = append(errs, fmt.Errorf("stop manager %d: %w", m.pid, err))
				}
			}
		}
		select {
		case <-m.exited:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("manager %d did not exit within %v; killing it", m.pid, exitTimeout))
			if err := syscall.Kill(m.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("kill manager %d: %w", m.pid, err))
			}
			<-m.exited // SIGKILL cannot be ignored
		}
	}
	if m.cgroups != nil {
		deadline := time.Now().Add(killTimeout)
		if err := m.cgroups.killAll(deadline); err != nil {
			errs = append(errs, err)
		}
		if err := m.cgroups.remove(deadline); err != nil {
			errs = append(errs, err)
		}
	}
	if m.console != nil {
		// No process of the manager is left to hold the terminal open, so
		// with ours closed the copier drains what is buffered and ends.
		m.console.Close()
		m.console = nil
		select {
		case <-m.copied:
		case <-time.After(killTimeout):
			errs = append(errs, errors.New("the manager's console is still held open by some process"))
		}
	}
	return errors.Join(errs...)
}

// sweepStaleDirs removes directories below base named prefix<pid>-... whose
// test process is gone (it died before its cleanup ran).
func sweepStaleDirs(base, prefix string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && staleName(e.Name(), prefix) {
			_ = os.RemoveAll(filepath.Join(base, e.Name())) // best effort
		}
	}
}
