package activation

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	sdactivation "github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/internal/privdir"
)

// errHelperRunning is returned (wrapped) by listen when another helper
// already answers on the socket path.
var errHelperRunning = errors.New("another helper is already listening")

// activationListeners returns the listeners systemd passed (LISTEN_FDS);
// nil when the process was not socket-activated. The environment variables
// are unset so children never see them.
func activationListeners(log *slog.Logger) ([]net.Listener, error) {
	if os.Getenv("LISTEN_FDS") == "" {
		return nil, nil
	}
	byName, err := sdactivation.ListenersWithNames()
	if err != nil {
		return nil, fmt.Errorf("socket activation listeners: %w", err)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var ls []net.Listener
	for _, n := range names {
		for _, l := range byName[n] {
			if l == nil {
				continue
			}
			if _, ok := l.(*net.UnixListener); !ok {
				l.Close()
				return nil, fmt.Errorf("socket activation: listener %q is %s, want a unix stream socket (ListenStream= a path)", n, l.Addr().Network())
			}
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("socket activation: LISTEN_FDS is set but no unix stream socket was passed")
	}
	log.Debug("socket-activated", "fd_names", names)
	return ls, nil
}

// listen creates the helper's own listener at path, for a helper started
// by hand: the directory is created 0700 (and must be ours), the socket is
// 0600 and removed on close. A socket file that still answers is never
// taken over (errHelperRunning); one that refuses connections is stale and
// replaced; any other file at path is left alone and reported.
func listen(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	if err := privdir.Ensure(dir); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen on %s: a %s is in the way; remove it if it is not needed", path, fi.Mode().Type())
		}
		c, derr := net.DialTimeout("unix", path, time.Second)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("listen on %s: %w (stop it, or use its socket)", path, errHelperRunning)
		}
		if !errors.Is(derr, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("listen on %s: probe existing socket: %w", path, derr)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	// The directory is 0700, so nobody else can reach the socket in the
	// moment before the chmod.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	l.SetUnlinkOnClose(true)
	return l, nil
}

// peerCred returns the UID and PID of the process at the other end of c
// (SO_PEERCRED: the credentials at connect time).
func peerCred(c *net.UnixConn) (uid, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, 0, err
	}
	if serr != nil {
		return -1, 0, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return int(cred.Uid), int(cred.Pid), nil
}
