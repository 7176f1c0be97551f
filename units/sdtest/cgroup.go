package sdtest

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
	parent     string // the test process's own cgroup in this hierarchy, on the host
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
// controllers stay hidden from the manager, which is fine for tests.
var v1Wanted = []struct{ dir, controller string }{
	{"systemd", "name=systemd"},
	{"pids", "pids"},
	{"memory", "memory"},
}

// detectCgroups reads the host's cgroup layout (unified, hybrid or legacy)
// and the test process's own cgroups from /proc/self/cgroup.
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
// test process's cgroup path in it.
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

// cgroupDirs are the manager's cgroups, one per hierarchy, on the host.
type cgroupDirs []string

func (l cgroupLayout) dirs(name string) cgroupDirs {
	d := make(cgroupDirs, len(l.hierarchies))
	for i, h := range l.hierarchies {
		d[i] = filepath.Join(h.parent, name)
	}
	return d
}

// create makes every cgroup; on failure it removes those it made.
func (d cgroupDirs) create() error {
	for i, dir := range d {
		if err := os.Mkdir(dir, 0o755); err != nil {
			for _, made := range d[:i] {
				_ = os.Remove(made) // best effort undo; the error below is what matters
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

// pids lists every process in the cgroups and their descendants.
func (d cgroupDirs) pids() ([]int, error) {
	var pids []int
	for _, root := range d {
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed while walking
				}
				return err
			}
			if !e.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					return fmt.Errorf("%s/cgroup.procs: %w", path, err)
				}
				if !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list processes in cgroup %s: %w", root, err)
		}
	}
	return pids, nil
}

// killAll sends SIGKILL to every process left in the cgroups until they are
// empty or the deadline passes. Every one of them descends from the
// launcher this package started.
func (d cgroupDirs) killAll(deadline time.Time) error {
	for {
		pids, err := d.pids()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in cgroups %v", pids, []string(d))
		}
		for _, pid := range pids {
			if pid == os.Getpid() {
				return fmt.Errorf("the test process itself is in cgroup %v", []string(d))
			}
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("kill process %d: %w", pid, err)
			}
		}
		time.Sleep(20 * time.Millisecond) // poll interval while the kernel reaps
	}
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

// sweepStaleCgroups removes empty cgroups left by earlier test processes
// that died before their cleanup ran (killed by a timeout, say). Cgroups
// that still hold processes are left alone: those processes are not ours.
func (l cgroupLayout) sweepStaleCgroups() {
	for _, h := range l.hierarchies {
		entries, err := os.ReadDir(h.parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() && staleName(e.Name(), namePrefix) {
				// Best effort: a non-empty or busy cgroup stays.
				_ = removeTree(filepath.Join(h.parent, e.Name()), time.Now())
			}
		}
	}
}

// namePrefix starts every directory and cgroup name this package makes:
// legion-sd-<pid of the test process>-<random>.
const namePrefix = "legion-sd-"

// staleName reports whether name, made as prefix<pid>-<random>, was made by
// a test process that is gone.
func staleName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return !processExists(pid)
}

// processExists reports whether pid names a live process (signal 0 only
// checks; it sends nothing).
func processExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
