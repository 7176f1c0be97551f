package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const cgroupRoot = "/sys/fs/cgroup"

// hierarchy is one cgroup hierarchy in which a manager gets a cgroup of its
// own. Inside the manager's namespaces the hierarchy is mounted again at the
// same place, so the manager sees its cgroup as the root.
type hierarchy struct {
	mountPoint string // e.g. /sys/fs/cgroup/systemd, the same on the host and inside
	fsType     string // "cgroup" or "cgroup2"
	options    string // mount options: "name=systemd", "memory", "rw" for cgroup2
	parent     string // the starting process's own cgroup in this hierarchy, on the host
}

// mount is one mount done inside the manager's mount namespace.
type mount struct{ target, fsType, options string }

// cgroupLayout is what the host has mounted under /sys/fs/cgroup.
type cgroupLayout struct {
	hierarchies []hierarchy
	mounts      []mount // in order: the tmpfs (hybrid/legacy only), then each hierarchy
}

// v1Wanted are the v1 hierarchies a manager gets a cgroup in, when mounted:
// name=systemd is what systemd tracks processes with on a hybrid or legacy
// host; pids and memory let it apply TasksMax= and MemoryMax=. Other
// controllers stay hidden from the manager.
var v1Wanted = []struct{ dir, controller string }{
	{"systemd", "name=systemd"},
	{"pids", "pids"},
	{"memory", "memory"},
}

// detectCgroups reads the host's cgroup layout (unified, hybrid or legacy)
// and the calling process's own cgroups from /proc/self/cgroup.
func detectCgroups() (cgroupLayout, error) {
	own, err := ownCgroups()
	if err != nil {
		return cgroupLayout{}, err
	}
	magic, err := fsMagic(cgroupRoot)
	if err != nil {
		return cgroupLayout{}, err
	}
	var l cgroupLayout
	switch magic {
	case unix.CGROUP2_SUPER_MAGIC: // unified only
		path, ok := own[""]
		if !ok {
			return cgroupLayout{}, errors.New("cgroup2 is mounted at /sys/fs/cgroup but /proc/self/cgroup has no 0:: line")
		}
		l.hierarchies = append(l.hierarchies, hierarchy{cgroupRoot, "cgroup2", "rw", filepath.Join(cgroupRoot, path)})
		l.mounts = append(l.mounts, mount{cgroupRoot, "cgroup2", "rw"})
		return l, nil
	case unix.TMPFS_MAGIC: // hybrid or legacy: one mount per hierarchy below
		l.mounts = append(l.mounts, mount{cgroupRoot, "tmpfs", "mode=0755"})
	default:
		return cgroupLayout{}, fmt.Errorf("%s is neither cgroup2 nor a tmpfs of cgroup hierarchies (filesystem magic %#x)", cgroupRoot, magic)
	}
	for _, w := range v1Wanted {
		dir := filepath.Join(cgroupRoot, w.dir)
		if m, err := fsMagic(dir); err != nil || m != unix.CGROUP_SUPER_MAGIC {
			if w.dir == "systemd" {
				return cgroupLayout{}, fmt.Errorf("no name=systemd hierarchy mounted at %s", dir)
			}
			continue
		}
		// The controller list as the kernel reports it ("cpu,cpuacct" when
		// co-mounted) is also the -o list that mounts that hierarchy.
		var opts, path string
		for ctrls, p := range own {
			if slices.Contains(strings.Split(ctrls, ","), w.controller) {
				opts, path = ctrls, p
			}
		}
		if opts == "" {
			return cgroupLayout{}, fmt.Errorf("%s is mounted but /proc/self/cgroup has no %s line", dir, w.controller)
		}
		l.hierarchies = append(l.hierarchies, hierarchy{dir, "cgroup", opts, filepath.Join(dir, path)})
		l.mounts = append(l.mounts, mount{dir, "cgroup", opts})
	}
	if path, ok := own[""]; ok {
		dir := filepath.Join(cgroupRoot, "unified")
		if m, err := fsMagic(dir); err == nil && m == unix.CGROUP2_SUPER_MAGIC {
			l.hierarchies = append(l.hierarchies, hierarchy{dir, "cgroup2", "rw", filepath.Join(dir, path)})
			l.mounts = append(l.mounts, mount{dir, "cgroup2", "rw"})
		}
	}
	return l, nil
}

// ownCgroups maps each hierarchy's controller list ("" for cgroup2) to the
// calling process's cgroup path in it.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read own cgroups: %w", err)
	}
	defer f.Close()
	own := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "4:memory:/some/path" or "0::/some/path"
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("read own cgroups: /proc/self/cgroup line %q: want ID:CONTROLLERS:PATH", sc.Text())
		}
		own[parts[1]] = parts[2]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read own cgroups: %w", err)
	}
	return own, nil
}

func fsMagic(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Type), nil
}

// cgroupDirs are one sandbox's cgroups, one per hierarchy, on the host.
type cgroupDirs []string

func (l cgroupLayout) dirs(name string) cgroupDirs {
	d := make(cgroupDirs, len(l.hierarchies))
	for i, h := range l.hierarchies {
		d[i] = filepath.Join(h.parent, name)
	}
	return d
}

// create makes every cgroup; on failure it removes those it made. A cgroup
// file system that refuses new cgroups (read-only, as in many containers)
// is a *MissingError.
func (d cgroupDirs) create() error {
	for i, dir := range d {
		if err := os.Mkdir(dir, 0o755); err != nil {
			for _, made := range d[:i] {
				_ = os.Remove(made) // best effort undo; the error below is what matters
			}
			if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				return &MissingError{"a writable cgroup hierarchy: " + err.Error()}
			}
			return fmt.Errorf("create cgroup: %w", err)
		}
	}
	return nil
}

// procsFiles are the cgroup.procs files the launcher writes its PID into.
func (d cgroupDirs) procsFiles() []string {
	files := make([]string, len(d))
	for i, dir := range d {
		files[i] = filepath.Join(dir, "cgroup.procs")
	}
	return files
}

// member is a process found in a cgroup.procs file.
type member struct {
	pid   int
	procs string // the cgroup.procs file that listed it
}

// members lists every process in the cgroups and the cgroups below them.
func (d cgroupDirs) members() ([]member, error) {
	var found []member
	seen := map[int]bool{}
	for _, root := range d {
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed while walking, or never made
				}
				return err
			}
			if !e.IsDir() {
				return nil
			}
			procs := filepath.Join(path, "cgroup.procs")
			pids, err := readPIDs(procs)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			for _, pid := range pids {
				if !seen[pid] {
					seen[pid] = true
					found = append(found, member{pid, procs})
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list processes in cgroup %s: %w", root, err)
		}
	}
	return found, nil
}

func readPIDs(procs string) ([]int, error) {
	b, err := os.ReadFile(procs)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", procs, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// killAll sends SIGKILL to every process left in the cgroups until they are
// empty or the deadline passes. Every one of them descends from the
// launcher this package started.
func (d cgroupDirs) killAll(deadline time.Time) error {
	for {
		found, err := d.members()
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			pids := make([]int, len(found))
			for i, m := range found {
				pids[i] = m.pid
			}
			return fmt.Errorf("processes %v still in cgroups %v", pids, []string(d))
		}
		for _, m := range found {
			if m.pid == os.Getpid() {
				return fmt.Errorf("this process itself is in cgroup %s", filepath.Dir(m.procs))
			}
			if err := killMember(m); err != nil {
				return err
			}
		}
		time.Sleep(20 * time.Millisecond) // poll interval while the kernel reaps
	}
}

// killMember sends SIGKILL to m.pid only if that PID is still in m's
// cgroup once pinned: the pidfd names one process for good, so a process
// that exited, and whose PID went to a process outside the cgroup, is
// never signalled.
func killMember(m member) error {
	fd, err := unix.PidfdOpen(m.pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return nil // gone already
	case errors.Is(err, unix.ENOSYS): // kernel before 5.3: no pinning
		if err := unix.Kill(m.pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("kill process %d: %w", m.pid, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("open pidfd of process %d: %w", m.pid, err)
	}
	defer unix.Close(fd)
	pids, err := readPIDs(m.procs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if !slices.Contains(pids, m.pid) {
		return nil // left the cgroup (exited): the next round looks again
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill process %d: %w", m.pid, err)
	}
	return nil
}

// remove deletes the cgroups and every cgroup the manager made below them,
// children first. An emptied memory cgroup can stay busy for a moment, so
// it retries until the deadline.
func (d cgroupDirs) remove(deadline time.Time) error {
	var errs []error
	for _, root := range d {
		if err := removeTree(root, deadline); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeTree(root string, deadline time.Time) error {
	for {
		var dirs []string
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("remove cgroup %s: %w", root, err)
		}
		var last error
		for _, dir := range slices.Backward(dirs) { // pre-order reversed: children first
			if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				last = err
			}
		}
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", root, last)
		}
		time.Sleep(20 * time.Millisecond) // poll interval for a busy cgroup
	}
}
