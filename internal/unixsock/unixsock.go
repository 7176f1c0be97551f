// Package unixsock listens on a private unix stream socket and tells who is
// at the other end. The helper (legion.sock) and each PTY worker (its
// session's socket) listen through it, so both replace a stale socket and
// refuse a live one the same way, and both check peers by SO_PEERCRED.
//
// It owns the socket file and the peer check only. It never speaks a
// protocol, never removes a socket that still answers, never removes any
// other kind of file, and imports nothing of Legion's but privdir, so the
// PTY worker binary stays small.
package unixsock

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/internal/privdir"
)

// probeTimeout bounds the connect that tells a live socket from a stale one.
const probeTimeout = time.Second

// ErrInUse is returned (wrapped) by Listen when a process still accepts
// connections on the socket path, or may (its backlog is full): the socket
// is not taken over.
var ErrInUse = errors.New("a process is listening on this socket")

// ErrPeerNotAllowed is returned (wrapped) by Peer when the process at the
// other end runs as a UID that is not allowed.
var ErrPeerNotAllowed = errors.New("peer uid not allowed")

// Listen creates a unix stream socket at path. Its directory is made
// private first (privdir.Ensure: 0700, this user's, not a symlink), the
// socket is 0600 and it is removed when the listener is closed.
//
// A socket file already at path is probed by connecting to it. Only one
// that refuses the connection (ECONNREFUSED: nobody listens, what a
// crashed process leaves) is removed and replaced. One that accepts, or
// that fails the probe in any other way (a full backlog is EAGAIN), is
// left alone and reported as ErrInUse or the probe's error. Any other kind
// of file at path is left alone and reported.
func Listen(path string) (*net.UnixListener, error) {
	if err := privdir.Ensure(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen on %s: a %s is in the way; remove it if it is not needed", path, typeName(fi.Mode()))
		}
		c, derr := net.DialTimeout("unix", path, probeTimeout)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("listen on %s: %w", path, ErrInUse)
		}
		if errors.Is(derr, syscall.EAGAIN) {
			return nil, fmt.Errorf("listen on %s: %w (its backlog is full)", path, ErrInUse)
		}
		if !errors.Is(derr, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("listen on %s: probe the existing socket: %w", path, derr)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen on %s: remove stale socket: %w", path, err)
		}
	}
	// The directory is 0700, so nobody else can reach the socket in the
	// moment before the chmod.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen on %s: set mode 0600: %w", path, err)
	}
	return l, nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m.Type() == 0:
		return "regular file"
	case m&fs.ModeDir != 0:
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	default:
		return "file of mode " + m.Type().String()
	}
}

// Cred is who connected: the UID and PID of the peer process when it
// called connect(2) (SO_PEERCRED).
type Cred struct {
	UID uint32
	PID int
}

// Peer returns the credentials of the process at the other end of c and
// checks its UID: a peer whose UID is not among allowed is an error
// wrapping ErrPeerNotAllowed, with the Cred still returned to name it.
// With no UID allowed, every peer is refused.
func Peer(c *net.UnixConn, allowed ...uint32) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("read peer credentials: %w", err)
	}
	var uc *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		uc, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, fmt.Errorf("read peer credentials: %w", err)
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("read peer credentials: SO_PEERCRED: %w", serr)
	}
	cred := Cred{UID: uc.Uid, PID: int(uc.Pid)}
	if !slices.Contains(allowed, cred.UID) {
		return cred, fmt.Errorf("uid %d (pid %d): %w", cred.UID, cred.PID, ErrPeerNotAllowed)
	}
	return cred, nil
}

// Cgroup is the cgroup of process pid as /proc/PID/cgroup names it: the
// name=systemd hierarchy's path on a hybrid system, else the unified
// one's ("0::"), relative to the reader's cgroup namespace.
func Cgroup(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", fmt.Errorf("read the cgroup of pid %d: %w", pid, err)
	}
	var unified string
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "1:name=systemd:"); ok {
			return p, nil
		}
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			unified = p
		}
	}
	if unified == "" {
		return "", fmt.Errorf("pid %d: no systemd or unified cgroup in /proc/%d/cgroup", pid, pid)
	}
	return unified, nil
}

// WorkerUnit is the unit of a Legion worker that cgroup is, or is below:
// a service legion-<short>-<issue>-<mode>.service in the team's slice
// legion-<short>.slice, with the mode; "" when it is none.
func WorkerUnit(cgroup string) (unit, mode string) {
	parts := strings.Split(strings.Trim(cgroup, "/"), "/")
	for i := len(parts) - 1; i >= 1; i-- {
		rest, ok := strings.CutPrefix(parts[i], "legion-")
		if !ok || !strings.HasSuffix(rest, ".service") || len(rest) < 9 || rest[8] != '-' {
			continue
		}
		short := rest[:8]
		if parts[i-1] != "legion-"+short+".slice" {
			continue
		}
		fields := strings.Split(strings.TrimSuffix(rest, ".service"), "-")
		if len(fields) != 3 || fields[1] == "" || fields[2] == "" {
			continue
		}
		return parts[i], fields[2]
	}
	return "", ""
}
