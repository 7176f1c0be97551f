package unixsock

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// shortDir is a temporary directory with a short path: a socket path must
// fit in 108 bytes, which t.TempDir's may not.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "us")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func perm(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// acceptAll accepts and closes connections until l is closed.
func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

func TestListenMakesAPrivateSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "run", "s.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen(%s) = %v", path, err)
	}
	if m := perm(t, filepath.Dir(path)); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("socket directory mode = %v; want a directory, 0700", m)
	}
	if m := perm(t, path); m.Type() != os.ModeSocket || m.Perm() != 0o600 {
		t.Errorf("socket mode = %v; want a socket, 0600", m)
	}
	l.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Close: %v; want it removed", err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	// A socket file nobody listens on: what a crashed process leaves.
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket = %v; want it replaced", err)
	}
	defer l.Close()
	go acceptAll(l)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	c.Close()
}

func TestListenRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go acceptAll(l)
	if _, err := Listen(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Listen(%s) = %v; want ErrInUse", path, err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the first listener's socket after a refused Listen: %v; want it still served", err)
	}
	c.Close()
}

// TestListenRefusesBusySocket: a live listener whose backlog is full makes
// connect fail with EAGAIN, not ECONNREFUSED. Its socket is not stale and
// must not be taken over (the PTY worker's own copy of Listen removed it,
// leaving the live worker unreachable).
func TestListenRefusesBusySocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	// Fill the backlog: connections nobody accepts, until one is refused
	// with EAGAIN.
	full := false
	for range 64 {
		c, err := net.Dial("unix", path)
		if err == nil {
			defer c.Close()
			continue
		}
		if !errors.Is(err, syscall.EAGAIN) {
			t.Fatalf("fill the backlog of %s: %v; want EAGAIN once it is full", path, err)
		}
		full = true
		break
	}
	if !full {
		t.Fatalf("the backlog of %s never filled", path)
	}
	before := perm(t, path)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("Listen over a busy socket = %v; want ErrInUse", err)
	}
	var after unix.Stat_t
	if err := unix.Stat(path, &after); err != nil || after.Ino != st.Ino {
		t.Errorf("busy socket after Listen: inode %d -> %d (%v); want it left in place (mode %v)", st.Ino, after.Ino, err, before)
	}
}

func TestListenLeavesOtherFiles(t *testing.T) {
	dir := shortDir(t)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{file, sub} {
		if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "in the way") || !strings.Contains(err.Error(), path) {
			t.Errorf("Listen(%s) = %v; want an error naming it in the way", path, err)
		}
	}
	if b, err := os.ReadFile(file); string(b) != "mine" {
		t.Errorf("file after Listen = %q, %v; want it untouched", b, err)
	}
	if m := perm(t, sub); !m.IsDir() {
		t.Errorf("directory after Listen has mode %v; want it untouched", m)
	}
}

func TestListenRefusesSymlinkedDirectory(t *testing.T) {
	dir := shortDir(t)
	target := filepath.Join(dir, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(link, "s.sock")
	if l, err := Listen(path); err == nil {
		l.Close()
		t.Fatalf("Listen(%s) through a symlinked directory succeeded; want it refused", path)
	}
}

func TestPeer(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	me := uint32(os.Getuid())
	if cred, err := Peer(sc, me); err != nil || cred.UID != me || cred.PID != os.Getpid() {
		t.Errorf("Peer(allowed %d) = %+v, %v; want uid %d pid %d", me, cred, err, me, os.Getpid())
	}
	if _, err := Peer(sc); !errors.Is(err, ErrPeerNotAllowed) {
		t.Errorf("Peer(none allowed) = %v; want ErrPeerNotAllowed", err)
	}
	if cred, err := Peer(sc, me+1, me); err != nil || cred.UID != me {
		t.Errorf("Peer(allowed %d, %d) = %+v, %v; want uid %d allowed", me+1, me, cred, err, me)
	}
	cred, err := Peer(sc, me+1)
	if !errors.Is(err, ErrPeerNotAllowed) || cred.UID != me {
		t.Errorf("Peer(allowed %d) = %+v, %v; want uid %d and ErrPeerNotAllowed", me+1, cred, err, me)
	}
}

// dialEnv names the socket TestPeerChild dials when the test binary is run
// as a child with another UID.
const dialEnv = "UNIXSOCK_TEST_DIAL"

// TestPeerChild is not a test of its own: run by TestPeerOtherUID as
// another user, it connects and holds the connection until the server
// closes it.
func TestPeerChild(t *testing.T) {
	path := os.Getenv(dialEnv)
	if path == "" {
		t.Skip("only run as TestPeerOtherUID's child")
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, c)
}

// TestPeerOtherUID: a process of another user (the test binary run as
// nobody) is seen with its own UID and PID and refused.
func TestPeerOtherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a child as another user")
	}
	const nobody = 65534
	// Everything the child touches must be open to it: this test does not
	// use Listen, whose 0700 directory would keep the child out.
	dir := shortDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "unixsock.test")
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^TestPeerChild$")
	cmd.Env = []string{dialEnv + "=" + path}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out := new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	cred, perr := Peer(sc, uint32(os.Getuid()))
	sc.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child as uid %d: %v\n%s", nobody, err, out)
	}
	if !errors.Is(perr, ErrPeerNotAllowed) || cred.UID != nobody || cred.PID != cmd.Process.Pid {
		t.Errorf("Peer(allowed %d) of the child = %+v, %v; want uid %d pid %d and ErrPeerNotAllowed", os.Getuid(), cred, perr, nobody, cmd.Process.Pid)
	}
}

func TestWorkerUnit(t *testing.T) {
	for _, c := range []struct{ cgroup, unit, mode string }{
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/legion-0123abcd.slice/legion-0123abcd-DEMO\\x2d1-implement.service", "legion-0123abcd-DEMO\\x2d1-implement.service", "implement"},
		{"/legion-0123abcd.slice/legion-0123abcd-x-spawn.service", "legion-0123abcd-x-spawn.service", "spawn"},
		{"/app.slice/legion.service", "", ""},
		{"/app.slice/legion-0123abcd-DEMO-1-plan.service", "", ""}, // not in the team's slice
		{"/legion-0123abcd.slice/legion@web.service", "", ""},
		{"/legion-ffffffff.slice/legion-0123abcd-x-plan.service", "", ""}, // another team's slice
		{"/", "", ""},
	} {
		unit, mode := WorkerUnit(c.cgroup)
		if unit != c.unit || mode != c.mode {
			t.Errorf("WorkerUnit(%q) = %q, %q; want %q, %q", c.cgroup, unit, mode, c.unit, c.mode)
		}
	}
}

func TestCgroupSelf(t *testing.T) {
	cg, err := Cgroup(os.Getpid())
	if err != nil || !strings.HasPrefix(cg, "/") {
		t.Fatalf("Cgroup(self) = %q, %v; want a path", cg, err)
	}
}
