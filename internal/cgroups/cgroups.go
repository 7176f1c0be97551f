// Package cgroups gives a process tree cgroups of its own below the
// calling process's, in every hierarchy that tracks it (name=systemd, pids,
// memory and unified on a hybrid or legacy host; the one cgroup2 hierarchy
// otherwise), lists the processes in them, kills those by PID and removes
// the cgroups, children first. units/sandbox (a private user manager) and
// units/booted (a booted container) use it: it is test code, linked only
// by tests and a legion built with the demo tag (internal/layout).
//
// It signals only processes it finds in the cgroups it is given, each
// pinned by a pidfd before the signal, and it never touches a cgroup
// outside them.
package cgroups

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

// Hierarchy is one cgroup hierarchy in which a process tree gets a cgroup of
// its own. Inside a new cgroup namespace the hierarchy can be mounted again
// at the same place (Layout.Mounts), so the tree sees its cgroup as the root.
type Hierarchy struct {
	MountPoint string // e.g. /sys/fs/cgroup/systemd, the same on the host and inside
	FSType     string // "cgroup" or "cgroup2"
	Options    string // mount options: "name=systemd", "memory", "rw" for cgroup2
	Parent     string // the starting process's own cgroup in this hierarchy, on the host
}

// Mount is one mount that remounts a hierarchy inside a new mount and cgroup namespace.
type Mount struct{ Target, FSType, Options string }

// Layout is what the host has mounted under /sys/fs/cgroup.
type Layout struct {
	Hierarchies []Hierarchy
	Mounts      []Mount // in order: the tmpfs (hybrid/legacy only), then each hierarchy
}

// v1Wanted are the v1 hierarchies a process tree gets a cgroup in, when mounted:
// name=systemd is what systemd tracks processes with on a hybrid or legacy
// host; pids and memory let it apply TasksMax= and MemoryMax=. Other
// controllers stay hidden from it.
var v1Wanted = []struct{ dir, controller string }{
	{"systemd", "name=systemd"},
	{"pids", "pids"},
	{"memory", "memory"},
}

// Detect reads the host's cgroup layout (unified, hybrid or legacy)
// and the calling process's own cgroups from /proc/self/cgroup.
func Detect() (Layout, error) {
	own, err := ownCgroups()
	if err != nil {
		return Layout{}, err
	}
	magic, err := fsMagic(cgroupRoot)
	if err != nil {
		return Layout{}, err
	}
	var l Layout
	switch magic {
	case unix.CGROUP2_SUPER_MAGIC: // unified only
		path, ok := own[""]
		if !ok {
			return Layout{}, errors.New("cgroup2 is mounted at /sys/fs/cgroup but /proc/self/cgroup has no 0:: line")
		}
		l.Hierarchies = append(l.Hierarchies, Hierarchy{cgroupRoot, "cgroup2", "rw", filepath.Join(cgroupRoot, path)})
		l.Mounts = append(l.Mounts, Mount{cgroupRoot, "cgroup2", "rw"})
		return l, nil
	case unix.TMPFS_MAGIC: // hybrid or legacy: one mount per hierarchy below
		l.Mounts = append(l.Mounts, Mount{cgroupRoot, "tmpfs", "mode=0755"})
	default:
		return Layout{}, fmt.Errorf("%s is neither cgroup2 nor a tmpfs of cgroup Hierarchies (filesystem magic %#x)", cgroupRoot, magic)
	}
	for _, w := range v1Wanted {
		dir := filepath.Join(cgroupRoot, w.dir)
		if m, err := fsMagic(dir); err != nil || m != unix.CGROUP_SUPER_MAGIC {
			if w.dir == "systemd" {
				return Layout{}, fmt.Errorf("no name=systemd hierarchy mounted at %s", dir)
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
			return Layout{}, fmt.Errorf("%s is mounted but /proc/self/cgroup has no %s line", dir, w.controller)
		}
		l.Hierarchies = append(l.Hierarchies, Hierarchy{dir, "cgroup", opts, filepath.Join(dir, path)})
		l.Mounts = append(l.Mounts, Mount{dir, "cgroup", opts})
	}
	if path, ok := own[""]; ok {
		dir := filepath.Join(cgroupRoot, "unified")
		if m, err := fsMagic(dir); err == nil && m == unix.CGROUP2_SUPER_MAGIC {
			l.Hierarchies = append(l.Hierarchies, Hierarchy{dir, "cgroup2", "rw", filepath.Join(dir, path)})
			l.Mounts = append(l.Mounts, Mount{dir, "cgroup2", "rw"})
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

// Dirs are one process tree's cgroups, one per hierarchy, on the host.
type Dirs []string

// Dirs names a cgroup called name below the calling process's own in each
// hierarchy (nothing is made yet: see Create).
func (l Layout) Dirs(name string) Dirs {
	d := make(Dirs, len(l.Hierarchies))
	for i, h := range l.Hierarchies {
		d[i] = filepath.Join(h.Parent, name)
	}
	return d
}

// Create makes every cgroup; on failure it removes those it made. A cgroup
// file system that refuses new cgroups (read-only, as in many containers)
// gives an error wrapping ErrNotWritable.
func (d Dirs) Create() error {
	for i, dir := range d {
		if err := os.Mkdir(dir, 0o755); err != nil {
			for _, made := range d[:i] {
				_ = os.Remove(made) // best effort undo; the error below is what matters
			}
			if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				return fmt.Errorf("%w: %w", ErrNotWritable, err)
			}
			return fmt.Errorf("create cgroup: %w", err)
		}
	}
	return nil
}

// ProcsFiles are the cgroup.procs files a launcher writes its PID into.
func (d Dirs) ProcsFiles() []string {
	files := make([]string, len(d))
	for i, dir := range d {
		files[i] = filepath.Join(dir, "cgroup.procs")
	}
	return files
}

// Member is a process found in a cgroup.procs file.
type Member struct {
	PID   int
	Procs string // the cgroup.procs file that listed it
}

// Members lists every process in the cgroups and the cgroups below them.
func (d Dirs) Members() ([]Member, error) {
	var found []Member
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
			pids, err := ReadPIDs(procs)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			for _, pid := range pids {
				if !seen[pid] {
					seen[pid] = true
					found = append(found, Member{pid, procs})
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

// ReadPIDs reads the PIDs listed in a cgroup.procs file.
func ReadPIDs(procs string) ([]int, error) {
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

// KillAll sends SIGKILL to every process left in the cgroups until they are
// empty or the deadline passes. The caller must have started every
// process that can be in them (a launcher that moved itself in).
func (d Dirs) KillAll(deadline time.Time) error {
	for {
		found, err := d.Members()
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			pids := make([]int, len(found))
			for i, m := range found {
				pids[i] = m.PID
			}
			return fmt.Errorf("processes %v still in cgroups %v", pids, []string(d))
		}
		for _, m := range found {
			if m.PID == os.Getpid() {
				return fmt.Errorf("this process itself is in cgroup %s", filepath.Dir(m.Procs))
			}
			if err := killMember(m); err != nil {
				return err
			}
		}
		time.Sleep(20 * time.Millisecond) // poll interval while the kernel reaps
	}
}

// killMember sends SIGKILL to m.PID only if that PID is still in m's
// cgroup once pinned: the pidfd names one process for good, so a process
// that exited, and whose PID went to a process outside the cgroup, is
// never signalled.
func killMember(m Member) error {
	fd, err := unix.PidfdOpen(m.PID, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return nil // gone already
	case errors.Is(err, unix.ENOSYS): // kernel before 5.3: no pinning
		if err := unix.Kill(m.PID, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("kill process %d: %w", m.PID, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("open pidfd of process %d: %w", m.PID, err)
	}
	defer unix.Close(fd)
	pids, err := ReadPIDs(m.Procs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if !slices.Contains(pids, m.PID) {
		return nil // left the cgroup (exited): the next round looks again
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill process %d: %w", m.PID, err)
	}
	return nil
}

// Remove deletes the cgroups and every cgroup made below them,
// children first. An emptied memory cgroup can stay busy for a moment, so
// it retries until the deadline.
func (d Dirs) Remove(deadline time.Time) error {
	var errs []error
	for _, root := range d {
		if err := RemoveTree(root, deadline); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveTree removes the cgroup root and every cgroup below it, children
// first, retrying a busy one until deadline.
func RemoveTree(root string, deadline time.Time) error {
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

// ErrNotWritable is what Create returns (wrapped) when the cgroup file
// system refuses new cgroups (read-only, as in many containers).
var ErrNotWritable = errors.New("cgroup hierarchy not writable")

// StaleName reports whether name, made as prefix<pid>-<random digits>, was
// made by a process that is gone: a leftover of a process that died before
// its cleanup, which a later process of the same kind may remove.
func StaleName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	pidText, random, ok := strings.Cut(rest, "-")
	if !ok || !AllDigits(pidText) || !AllDigits(random) {
		return false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return !ProcessExists(pid)
}

// RemoveStale removes, in each hierarchy of l, the cgroup trees below the
// calling process's own whose names are stale (StaleName with prefix) and
// hold no process, and returns the stale names whose trees stay (they
// still hold a process, or could not be read or removed): their
// directories elsewhere are not to be removed either. It kills nothing.
func RemoveStale(l Layout, prefix string) (busy map[string]bool) {
	busy = map[string]bool{}
	for _, h := range l.Hierarchies {
		entries, err := os.ReadDir(h.Parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !StaleName(e.Name(), prefix) {
				continue
			}
			tree := Dirs{filepath.Join(h.Parent, e.Name())}
			if found, err := tree.Members(); err != nil || len(found) > 0 {
				busy[e.Name()] = true
				continue
			}
			if err := RemoveTree(tree[0], time.Now()); err != nil {
				busy[e.Name()] = true
			}
		}
	}
	return busy
}

// AllDigits reports whether s is one or more decimal digits.
func AllDigits(s string) bool {
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

// ProcessExists reports whether pid names a live process (signal 0 only
// checks; it sends nothing).
func ProcessExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
