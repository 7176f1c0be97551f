package sandbox

import (
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
	startTimeout   = 60 * time.Second // until the manager is ready
	exitTimeout    = 30 * time.Second // for `systemctl --user exit` to end the manager
	killTimeout    = 10 * time.Second // for killed processes to die, cgroups to go
	commandTimeout = 60 * time.Second // one systemctl run inside Stop
)

// DefaultName is the Name used when Options.Name is empty.
const DefaultName = "legion-sandbox"

// Options says where a sandbox goes and what it is called.
type Options struct {
	// Dir is the parent of the sandbox directory, made (0700) if missing.
	// Empty means os.TempDir(), or /tmp when that is longer than 40 bytes
	// (the manager's socket path must stay below 108 bytes).
	Dir string
	// Name prefixes the sandbox directory and cgroups (NAME-PID-RANDOM),
	// e.g. "legion-demo": letters, digits, '.', '_' and '-', at most 32
	// bytes, starting with a letter or digit and not ending in '-'.
	// Empty means DefaultName. Start removes leftovers of dead sandboxes
	// of the same Name in the same Dir.
	Name string
	// Log, if not nil, gets a copy of what the manager logs (and what its
	// units print), written from one goroutine, never after Stop returns.
	// A write error stops the copy to Log only.
	Log io.Writer
	// Wrap, when set, is a program with its arguments that the manager is
	// started under: it is run with the rest of the launch command line
	// appended and must exec it, keeping its PID. Tests run the manager
	// under units/sdtest/denyuserns so.
	Wrap []string
}

// Sandbox is a running private systemd user manager.
type Sandbox struct {
	Dir        string   // the sandbox directory, 0700; Stop removes it
	RuntimeDir string   // XDG_RUNTIME_DIR: Dir/run, mode 0700
	BusAddress string   // DBUS_SESSION_BUS_ADDRESS: unix:path=RuntimeDir/bus
	Home       string   // HOME: Dir/home; XDG_CONFIG_HOME etc. are below it
	Env        []string // os.Environ() at Start with the Vars replaced, ready for exec.Cmd.Env

	systemctl   string       // absolute path of systemctl
	cgroups     cgroups.Dirs // nil until created
	launcherLog string       // the launcher's and the manager's stdout and stderr
	managerLog  string       // what the manager logs to its console
	console     *console     // nil until opened and after Stop closed it
	proc        *os.Process
	exited      chan struct{} // closed once the manager process is reaped
	waitErr     error         // the manager's exit status, set before exited closes

	stopMu  sync.Mutex // serialises Stop
	stopped bool       // a Stop succeeded: nothing is left

	logMu    sync.Mutex
	finalLog *string // Log's text once Stop removed the files
}

var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$`) })

// Start starts a private systemd user manager and returns once it is
// ready. It changes nothing in the calling process's environment: use
// Sandbox.Env or Sandbox.Vars for the processes that should talk to the
// manager.
//
// Start needs root. When the machine lacks something (root, CAP_SYS_ADMIN,
// unshare, dbus-daemon, systemctl, systemd itself, a usable cgroup layout)
// the error wraps a *MissingError naming it (errors.As), and nothing is
// left behind. When the manager does not come up, the error quotes the last
// lines of its log, and everything Start made is removed again.
//
// The manager outlives ctx: ctx bounds only the start (at most 60 s). The
// caller must call Stop; if the caller's process dies first, see the package
// doc for what happens.
func Start(ctx context.Context, o Options) (*Sandbox, error) {
	s, err := start(ctx, o, func() (prereqs, error) { return checkPrereqs(os.Geteuid()) })
	if err != nil {
		return nil, fmt.Errorf("start private systemd user manager: %w", err)
	}
	return s, nil
}

// start is Start with the machine check as a parameter, so that tests can
// give it a systemd that fails.
func start(ctx context.Context, o Options, check func() (prereqs, error)) (*Sandbox, error) {
	name := o.Name
	if name == "" {
		name = DefaultName
	}
	if !namePattern().MatchString(name) || strings.HasSuffix(name, "-") {
		return nil, fmt.Errorf("sandbox name %q: want letters, digits, '.', '_' and '-', at most 32 bytes, not starting with a punctuation mark or ending in '-'", name)
	}
	p, err := check()
	if err != nil {
		return nil, err
	}
	base := o.Dir
	if base == "" {
		base = os.TempDir()
		if len(base) > 40 {
			base = "/tmp"
		}
	} else if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("make sandbox parent dir: %w", err)
	}
	sweepStale(base, name, p.layout)

	dir, err := os.MkdirTemp(base, name+"-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("make sandbox dir: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	s := &Sandbox{
		Dir:         dir,
		RuntimeDir:  filepath.Join(dir, "run"),
		Home:        filepath.Join(dir, "home"),
		systemctl:   p.systemctl,
		launcherLog: filepath.Join(dir, "launcher.log"),
		managerLog:  filepath.Join(dir, "manager.log"),
		exited:      make(chan struct{}),
	}
	s.BusAddress = "unix:path=" + filepath.Join(s.RuntimeDir, "bus")
	s.Env = replaceEnv(os.Environ(), s.Vars())

	if err := s.setUp(ctx, p, name, o); err != nil {
		// Quote the log before Stop removes it.
		if tail := s.logTail(60); tail != "" {
			err = fmt.Errorf("manager in %s: %w\nmanager log, last lines:\n%s", dir, err, tail)
		} else {
			err = fmt.Errorf("manager in %s: %w", dir, err)
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), exitTimeout+2*killTimeout)
		defer cancel()
		if serr := s.Stop(stopCtx); serr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after the failed start: %w", serr))
		}
		return nil, err
	}
	return s, nil
}

// setUp does the steps of Start after the directory is made.
func (s *Sandbox) setUp(ctx context.Context, p prereqs, name string, o Options) error {
	if private := filepath.Join(s.RuntimeDir, "systemd", "private"); len(private) > 100 {
		return fmt.Errorf("socket path %s is too long for a unix socket: use a shorter Dir (or TMPDIR)", private)
	}
	if err := s.writeFiles(p.dbusDaemon); err != nil {
		return err
	}
	dirs := p.layout.Dirs(filepath.Base(s.Dir))
	if err := dirs.Create(); err != nil {
		if errors.Is(err, cgroups.ErrNotWritable) {
			return &MissingError{"a writable cgroup hierarchy: " + err.Error()}
		}
		return err
	}
	s.cgroups = dirs
	if err := s.launch(p, name, o.Log, o.Wrap); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return s.waitReady(ctx)
}

// PID is the manager's process ID, 0 before it was launched. Its mount
// namespace is the sandbox's own (see the package doc): a test that
// mounts something for the manager's units to see enters it (nsenter -t
// PID -m) and reaches the mount itself through /proc/PID/root.
func (s *Sandbox) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid
}

// Vars returns the sandbox's environment variables as KEY=VALUE:
// XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS, HOME, XDG_CONFIG_HOME,
// XDG_STATE_HOME, XDG_DATA_HOME and XDG_CACHE_HOME. The slice is the
// caller's.
func (s *Sandbox) Vars() []string {
	return []string{
		"XDG_RUNTIME_DIR=" + s.RuntimeDir,
		"DBUS_SESSION_BUS_ADDRESS=" + s.BusAddress,
		"HOME=" + s.Home,
		"XDG_CONFIG_HOME=" + filepath.Join(s.Home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(s.Home, ".local", "state"),
		"XDG_DATA_HOME=" + filepath.Join(s.Home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(s.Home, ".cache"),
	}
}

// replaceEnv returns env without the keys of vars, followed by vars.
func replaceEnv(env, vars []string) []string {
	keys := map[string]bool{}
	for _, kv := range vars {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(env)+len(vars))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, vars...)
}

// managerEnv is the manager's whole environment, which its units inherit:
// the sandbox plus PATH, locale and user name, and nothing else of the
// caller's (which may hold secrets).
func managerEnv(vars []string) []string {
	env := append([]string(nil), vars...)
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "USER", "LOGNAME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Systemctl runs `systemctl --user --no-pager ARGS...` against this manager
// and returns its stdout. The error quotes systemctl's stderr. ctx bounds
// the run.
func (s *Sandbox) Systemctl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.systemctl, append([]string{"--user", "--no-pager"}, args...)...)
	cmd.Env = s.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("systemctl --user %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
