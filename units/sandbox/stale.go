package sandbox

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sweepStale removes what sandboxes named name left in base and in the
// cgroup hierarchies when the process that started them died before Stop.
// It is best effort and kills nothing; it leaves alone:
//   - names not of the form NAME-PID-RANDOM, or whose PID is a live process
//     (this one included): their owner may still Stop them;
//   - cgroup trees that still hold a process: whatever runs there is not
//     ours to end;
//   - directories whose cgroups were not all removed, whose manager socket
//     still answers, or that root does not own.
func sweepStale(base, name string, l cgroupLayout) {
	prefix := name + "-"
	busy := map[string]bool{} // sandbox names whose cgroups stay
	for _, h := range l.hierarchies {
		entries, err := os.ReadDir(h.parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !staleName(e.Name(), prefix) {
				continue
			}
			tree := cgroupDirs{filepath.Join(h.parent, e.Name())}
			if found, err := tree.members(); err != nil || len(found) > 0 {
				busy[e.Name()] = true
				continue
			}
			if err := removeTree(tree[0], time.Now()); err != nil {
				busy[e.Name()] = true
			}
		}
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !staleName(e.Name(), prefix) || busy[e.Name()] {
			continue
		}
		dir := filepath.Join(base, e.Name())
		if !ownedByUs(dir) || managerAnswers(dir) {
			continue
		}
		_ = os.RemoveAll(dir) // best effort: a leftover stays for the next sweep
	}
}

// staleName reports whether name, made as prefix<pid>-<random digits>, was
// made by a process that is gone.
func staleName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	pidText, random, ok := strings.Cut(rest, "-")
	if !ok || !allDigits(pidText) || !allDigits(random) {
		return false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return !processExists(pid)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// processExists reports whether pid names a live process (signal 0 only
// checks; it sends nothing).
func processExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// ownedByUs reports whether dir belongs to this process's user: a
// directory someone else made in a shared parent is not a sandbox of ours.
func ownedByUs(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// managerAnswers reports whether a manager still listens on the sandbox
// dir's private socket.
func managerAnswers(dir string) bool {
	conn, err := net.DialTimeout("unix", filepath.Join(dir, "run", "systemd", "private"), time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
