package booted

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/internal/cgroups"
)

// Timeouts are generous: a loaded machine is slow, and nothing waits for
// them unless something is broken.
const (
	holderTimeout   = 30 * time.Second  // until the holder has mounted the overlay
	bootTimeout     = 120 * time.Second // until systemd inside says running
	poweroffTimeout = 60 * time.Second  // for nspawn to end after SIGTERM
	killTimeout     = 10 * time.Second  // for killed processes to die, cgroups to go
)

// DefaultName is the Name used when Options.Name is empty.
const DefaultName = "legion-booted"

// Options says where a system's directory goes and what it is called.
type Options struct {
	// Dir is the parent of the system's directory, made (0700) if
	// missing. Empty means os.TempDir().
	Dir string
	// Name prefixes the directory, machine and cgroups (NAME-PID-RANDOM):
	// letters, digits and '-', at most 32 bytes, starting with a letter
	// and not ending in '-'. Empty means DefaultName. Boot removes
	// leftovers of dead systems of the same Name in the same Dir.
	Name string
}

// System is a booted container: the host's root as PID 1 of
// systemd-nspawn over a throwaway overlay.
type System struct {
	Dir     string // the system's directory on the host; Stop removes it
	Machine string // the machine's name and hostname: Dir's base name

	p        prereqs
	fsDir    string       // Dir/fs: a tmpfs in the holder's mount namespace
	cgroups  cgroups.Dirs // the system's cgroups, one per hierarchy
	console  string       // Dir/console.log: what nspawn and the container print
	holder   *child       // the holder of the mount namespace
	boot     *child       // nspawn of the current boot; nil while powered off
	boots    int          // boots so far: boot N runs in cgroup boot-N
	init     int          // PID (on the host) of the container's PID 1
	sessions int          // OpenSession calls so far, for unit names

	mu      sync.Mutex // serialises Reboot and Stop
	stopped bool
}

var namePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,31}$`)

// Boot makes the overlay and boots the container, and returns once systemd
// inside says it is running (or degraded). Boot needs root and
// systemd-nspawn: when the machine lacks something, the error wraps a
// *MissingError (errors.As) and nothing is left behind. When the container
// does not come up, the error quotes the end of its console, and everything
// Boot made is removed again.
//
// The system outlives ctx: ctx bounds only the boot. The caller must call
// Stop; if the caller's process dies first, see the package doc.
func Boot(ctx context.Context, o Options) (*System, error) {
	name := o.Name
	if name == "" {
		name = DefaultName
	}
	if !namePattern.MatchString(name) || strings.HasSuffix(name, "-") {
		return nil, fmt.Errorf("booted system name %q: want letters, digits and '-', at most 32 bytes, starting with a letter and not ending in '-'", name)
	}
	p, err := checkPrereqs(ctx, os.Geteuid())
	if err != nil {
		return nil, fmt.Errorf("boot a system: %w", err)
	}
	base := o.Dir
	if base == "" {
		base = os.TempDir()
	} else if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("boot a system: make parent dir: %w", err)
	}
	sweepStale(base, name, p.layout)
	dir, err := os.MkdirTemp(base, name+"-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("boot a system: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	s := &System{
		Dir:     dir,
		Machine: filepath.Base(dir),
		p:       p,
		fsDir:   filepath.Join(dir, "fs"),
		console: filepath.Join(dir, "console.log"),
	}
	if err := s.setUp(ctx); err != nil {
		err = fmt.Errorf("boot system %s: %w", s.Machine, err)
		if tail := s.ConsoleTail(40); tail != "" {
			err = fmt.Errorf("%w\nconsole, last lines:\n%s", err, tail)
		}
		if serr := s.Stop(ctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after the failed boot: %w", serr))
		}
		return nil, err
	}
	return s, nil
}

func (s *System) setUp(ctx context.Context) error {
	if err := os.Mkdir(s.fsDir, 0o700); err != nil {
		return err
	}
	dirs := s.p.layout.Dirs(s.Machine)
	if err := dirs.Create(); err != nil {
		return err
	}
	s.cgroups = dirs
	if err := s.startHolder(ctx); err != nil {
		return err
	}
	if err := s.writeTarget(); err != nil {
		return err
	}
	return s.bootOnce(ctx)
}

// bootTarget is the container's default target: the system parts a user's
// session needs (journald and the rest of sysinit.target, D-Bus, logind,
// systemd-user-sessions, which lets ordinary users log in), and not the
// host's own services (a database took 2.7 s of a 3.7 s boot).
const bootTarget = `# Written by units/booted: the default target of a booted test system.
[Unit]
Description=Booted test system (units/booted)
Requires=basic.target
Wants=dbus.service systemd-logind.service systemd-user-sessions.service
After=basic.target dbus.service systemd-logind.service systemd-user-sessions.service
AllowIsolate=yes
`

// writeTarget makes bootTarget the container's default target, in the
// overlay.
func (s *System) writeTarget() error {
	dir := s.Path("/etc/systemd/system")
	if err := os.WriteFile(filepath.Join(dir, "legion-booted.target"), []byte(bootTarget), 0o644); err != nil {
		return fmt.Errorf("write the default target: %w", err)
	}
	link := filepath.Join(dir, "default.target")
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("write the default target: %w", err)
	}
	if err := os.Symlink("legion-booted.target", link); err != nil {
		return fmt.Errorf("write the default target: %w", err)
	}
	return nil
}

// launchScript runs as the launched program's future PID: it moves itself
// into the cgroups (N files follow N), then execs the rest of its argv.
const launchScript = `n=$1; shift
while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 1; shift; n=$((n-1)); done
exec "$@"`

// holderScript runs in the new mount namespace: a tmpfs on /run, a tmpfs
// on $1 and the overlay on $1/root; it says "ready" and then only holds
// the namespace.
const holderScript = `set -e
fs=$1
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=0700 tmpfs "$fs"
mkdir -m 0755 "$fs/upper" "$fs/root"
mkdir -m 0700 "$fs/work"
mount -t overlay -o "lowerdir=/,upperdir=$fs/upper,workdir=$fs/work" overlay "$fs/root"
echo ready
exec sleep infinity`

func (s *System) startHolder(ctx context.Context) error {
	args := []string{"-c", launchScript, s.Machine + "-holder", strconv.Itoa(len(s.cgroups))}
	args = append(args, s.cgroups.ProcsFiles()...)
	args = append(args, s.p.unshare, "-m", "--propagation", "private", "/bin/sh", "-c", holderScript, s.Machine+"-mounts", s.fsDir)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = minimalEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	h, err := startChild(cmd, sigKill)
	if err != nil {
		return fmt.Errorf("start the mount namespace's holder: %w", err)
	}
	s.holder = h
	ready := make(chan error, 1)
	go func() { // ends when the holder says ready or its stdout closes
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("holder said %q", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, stdout) // until the holder exits
	}()
	ctx, cancel := context.WithTimeout(ctx, holderTimeout)
	defer cancel()
	select {
	case err := <-ready:
		if err != nil {
			<-h.exited
			return fmt.Errorf("mount the overlay: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return nil
	case <-ctx.Done(): // stderr is still being written: Stop kills the holder
		return fmt.Errorf("mount the overlay: %w", ctx.Err())
	}
}

// bootOnce starts nspawn in a new cgroup boot-N and waits until the
// system inside is running.
func (s *System) bootOnce(ctx context.Context) error {
	s.boots++
	dirs := s.bootCgroups()
	if err := dirs.Create(); err != nil {
		return err
	}
	log, err := os.OpenFile(s.console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close() // nspawn has its own copy
	fmt.Fprintf(log, "\n=== units/booted: boot %d of %s\n", s.boots, s.Machine)
	args := []string{"-c", launchScript, s.Machine + "-boot", strconv.Itoa(len(dirs))}
	args = append(args, dirs.ProcsFiles()...)
	args = append(args, s.p.nsenter, "-t", strconv.Itoa(s.holder.cmd.Process.Pid), "-m", "--",
		s.p.nspawn, "--boot", "--quiet", "-D", filepath.Join(s.fsDir, "root"), "-M", s.Machine,
		"--register=no", "--keep-unit", "--link-journal=no", "--private-network", "--console=read-only",
		// nspawn's own seccomp filter refuses Landlock, which a host has
		// (the sandbox policy confines agents with it).
		"--system-call-filter=landlock_create_ruleset landlock_add_rule landlock_restrict_self")
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = minimalEnv()
	cmd.Stdout, cmd.Stderr = log, log
	b, err := startChild(cmd, sigTerm)
	if err != nil {
		return fmt.Errorf("start systemd-nspawn: %w", err)
	}
	s.boot = b
	ctx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	return s.waitRunning(ctx, dirs)
}

func (s *System) bootCgroups() cgroups.Dirs {
	d := make(cgroups.Dirs, len(s.cgroups))
	for i, dir := range s.cgroups {
		d[i] = filepath.Join(dir, "boot-"+strconv.Itoa(s.boots))
	}
	return d
}

// waitRunning finds the container's PID 1 in the boot's cgroups and waits
// until `systemctl is-system-running --wait` inside says running or
// degraded (it fails until PID 1's bus is up).
func (s *System) waitRunning(ctx context.Context, dirs cgroups.Dirs) error {
	var last error
	for {
		select {
		case <-s.boot.exited:
			return fmt.Errorf("systemd-nspawn exited during boot: %v", s.boot.err)
		case <-ctx.Done():
			return fmt.Errorf("system not running: %w (last check: %v)", ctx.Err(), last)
		default:
		}
		if s.init == 0 {
			s.init, last = findInit(dirs)
		}
		if s.init != 0 {
			out, err := s.Run(ctx, "systemctl", "is-system-running", "--wait")
			switch state := strings.TrimSpace(out); state {
			case "running", "degraded":
				return nil
			default:
				last = fmt.Errorf("is-system-running: %q: %v", state, err)
			}
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// findInit returns the host PID of the process in dirs that is PID 1 of
// its own PID namespace: the container's systemd.
func findInit(dirs cgroups.Dirs) (int, error) {
	found, err := dirs.Members()
	if err != nil {
		return 0, err
	}
	for _, m := range found {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(m.PID), "status"))
		if err != nil {
			continue // gone
		}
		for line := range strings.Lines(string(b)) {
			if ns, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if f := strings.Fields(ns); len(f) > 1 && f[len(f)-1] == "1" {
					return m.PID, nil
				}
			}
		}
	}
	return 0, errors.New("no PID 1 of a new PID namespace in the boot's cgroups yet")
}

// minimalEnv is the environment of every process started on or in the
// system: a PATH and a locale, nothing of the caller's (which may hold
// secrets, and whose HOME and XDG_* are not the container's).
func minimalEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root"}
}

// Run runs argv as root inside the container (all its namespaces, the
// container's PATH, HOME=/root) and returns its stdout. The error quotes
// its stderr. ctx bounds the run.
func (s *System) Run(ctx context.Context, argv ...string) (string, error) {
	if s.init == 0 {
		return "", fmt.Errorf("run %s in %s: the system is not booted", strings.Join(argv, " "), s.Machine)
	}
	args := append([]string{"-t", strconv.Itoa(s.init), "-a", "--"}, argv...)
	cmd := exec.CommandContext(ctx, s.p.nsenter, args...)
	cmd.Env = minimalEnv()
	cmd.Dir = "/"
	// When ctx ends, nsenter is killed, but what it ran inside (in the
	// container's PID namespace) may still hold the output pipes: it ends
	// with the container. Run returns regardless.
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("run %s in %s: %w: %s", strings.Join(argv, " "), s.Machine, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Login runs argv as user in a real logind login session (PAM service
// "login") and returns its stdout: the user's manager, XDG_RUNTIME_DIR and
// session bus are there as after a login on a terminal, and the command's
// end is the session's end, a logout. argv runs through `bash -l` in the
// user's home. The error quotes its stderr and says how it ended.
func (s *System) Login(ctx context.Context, user string, argv ...string) (string, error) {
	// WorkingDirectory=~ with PAMName fails with 200/CHDIR: the shell
	// changes directory instead.
	// Without a terminal pam_systemd would make it a "background"
	// session; the class and type make it a user's, as on a terminal.
	args := []string{"systemd-run", "--wait", "--pipe", "--collect", "--quiet", "--service-type=exec",
		"-E", "XDG_SESSION_CLASS=user", "-E", "XDG_SESSION_TYPE=tty",
		"-p", "PAMName=login", "-p", "User=" + user, "/bin/bash", "-lc", `cd ~ && exec "$@"`, "login"}
	out, err := s.Run(ctx, append(args, argv...)...)
	if err != nil {
		return out, fmt.Errorf("as %s in a login session: %w", user, err)
	}
	return out, nil
}

// AddUser makes an ordinary user with a home and bash as login shell.
func (s *System) AddUser(ctx context.Context, user string) error {
	_, err := s.Run(ctx, "useradd", "--create-home", "--shell", "/bin/bash", user)
	return err
}

// SetLinger turns lingering on or off for user (`loginctl enable-linger`):
// with it, the user's manager starts at boot and stays after logout.
func (s *System) SetLinger(ctx context.Context, user string, on bool) error {
	verb := "disable-linger"
	if on {
		verb = "enable-linger"
	}
	_, err := s.Run(ctx, "loginctl", verb, user)
	return err
}

// Path returns the host's path of the container's file p (absolute):
// through the holder's root, into the overlay. Writes land in the
// overlay's upper layer, never on the host's disk. Valid until Stop.
func (s *System) Path(p string) string {
	return filepath.Join("/proc", strconv.Itoa(s.holder.cmd.Process.Pid), "root", s.fsDir, "root", p)
}

// Install copies the host's file src to dst in the container, mode 0755.
func (s *System) Install(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("install %s into %s: %w", src, s.Machine, err)
	}
	target := s.Path(dst)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("install %s into %s: %w", src, s.Machine, err)
	}
	if err := os.WriteFile(target, data, 0o755); err != nil {
		return fmt.Errorf("install %s into %s: %w", src, s.Machine, err)
	}
	return os.Chmod(target, 0o755) // an existing file keeps its mode otherwise
}

// InitPID is the host's PID of the container's PID 1 in the current boot,
// 0 while powered off.
func (s *System) InitPID() int { return s.init }

// Boots is how many times the system has booted (1 after Boot).
func (s *System) Boots() int { return s.boots }

// Cgroups are the system's cgroups on the host, one per hierarchy (Stop
// removes them).
func (s *System) Cgroups() []string { return append([]string(nil), s.cgroups...) }

// Console returns what nspawn and the container printed on its console,
// every boot.
func (s *System) Console() string {
	b, err := os.ReadFile(s.console)
	if err != nil {
		return ""
	}
	return string(b)
}

// ConsoleTail is the last n lines of Console.
func (s *System) ConsoleTail(n int) string {
	lines := strings.Split(strings.TrimRight(s.Console(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Session is a login session held open in the background (OpenSession),
// as a user who stays logged in on a terminal.
type Session struct {
	s    *System
	unit string // the system service whose PAM session it is
}

// OpenSession logs user in and keeps the session open until Close: a
// service of the container's system manager that runs `sleep infinity` in
// a login session (PAM service "login", class user, type tty). It returns
// once the session is open.
func (s *System) OpenSession(ctx context.Context, user string) (*Session, error) {
	s.sessions++
	unit := fmt.Sprintf("booted-session-%s-%d.service", user, s.sessions)
	// Type=simple: with PAMName, Type=exec never sees the exec without
	// --wait (systemd 252), and the start times out.
	_, err := s.Run(ctx, "systemd-run", "--quiet", "--collect", "--service-type=simple", "--unit="+unit,
		"-E", "XDG_SESSION_CLASS=user", "-E", "XDG_SESSION_TYPE=tty",
		"-p", "PAMName=login", "-p", "User="+user, "/bin/sleep", "infinity")
	if err != nil {
		return nil, fmt.Errorf("open a login session of %s: %w", user, err)
	}
	// The session is open once pam_systemd has moved the process into
	// its session scope.
	script := `pid=$(systemctl show -p MainPID --value "$1") && [ "$pid" != 0 ] && grep -q '/session-[0-9]*\.scope$' /proc/$pid/cgroup`
	for {
		if _, err := s.Run(ctx, "sh", "-c", script, "check", unit); err == nil {
			return &Session{s: s, unit: unit}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("open a login session of %s: %s has no session scope: %w", user, unit, ctx.Err())
		case <-time.After(50 * time.Millisecond): // poll interval
		}
	}
}

// Close ends the session: a logout.
func (se *Session) Close(ctx context.Context) error {
	if _, err := se.s.Run(ctx, "systemctl", "stop", se.unit); err != nil {
		return fmt.Errorf("log out (%s): %w", se.unit, err)
	}
	return nil
}
