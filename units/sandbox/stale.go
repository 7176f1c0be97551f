package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/legion-dev/legion/internal/cgroups"
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
func sweepStale(base, name string, l cgroups.Layout) {
	prefix := name + "-"
	busy := cgroups.RemoveStale(l, prefix) // sandbox names whose cgroups stay
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !cgroups.StaleName(e.Name(), prefix) || busy[e.Name()] {
			continue
		}
		dir := filepath.Join(base, e.Name())
		if !ownedByUs(dir) || managerAnswers(dir) {
			continue
		}
		_ = os.RemoveAll(dir) // best effort: a leftover stays for the next sweep
	}
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
