package units

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Controllers says whether the user manager can apply memory and CPU
// limits to its units: MemoryMax= and the OOM kill that reports result
// oom-kill need cgroup2's memory controller in the manager's cgroup, and
// CPUWeight= its cpu controller. systemd accepts those settings either way
// and applies them only where it can.
type Controllers struct {
	Memory bool // MemoryMax= is enforced, MemoryCurrent= accounted
	CPU    bool // CPUWeight= is enforced
	// Why says, when either is false, why: the cgroup layout and what the
	// manager's cgroup has. Empty when both are true.
	Why string
}

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Controllers finds the manager's own cgroup (that of its init.scope's
// process, the manager itself) and reads which controllers it has. It
// reads /proc and /sys/fs/cgroup as the caller sees them, which is how the
// manager sees them when the caller runs under it or beside it.
func (m *Manager) Controllers(ctx context.Context) (Controllers, error) {
	pid, err := m.managerPID(ctx)
	if err != nil {
		return Controllers{}, err
	}
	return controllersOf(pid)
}

// managerPID is the PID of the user manager: the process of its
// init.scope.
func (m *Manager) managerPID(ctx context.Context) (uint32, error) {
	var procs []struct {
		Cgroup  string
		PID     uint32
		Cmdline string
	}
	err := m.do(ctx, func(c *conns) error {
		return c.raw.Object(sdDest, sdPath).CallWithContext(ctx, sdManagerIface+".GetUnitProcesses", 0, "init.scope").Store(&procs)
	})
	if err != nil {
		return 0, fmt.Errorf("find the user manager's process (processes of init.scope): %w", err)
	}
	if len(procs) == 0 {
		return 0, errors.New("find the user manager's process: init.scope has none")
	}
	return procs[0].PID, nil
}

// controllersOf reads the cgroup of process pid and the controllers it has.
func controllersOf(pid uint32) (Controllers, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &fs); err != nil {
		return Controllers{}, fmt.Errorf("read the cgroup layout: statfs %s: %w", cgroupRoot, err)
	}
	procFile := fmt.Sprintf("/proc/%d/cgroup", pid)
	data, err := os.ReadFile(procFile)
	if err != nil {
		return Controllers{}, fmt.Errorf("read the user manager's cgroup: %w", err)
	}
	return controllersIn(cgroupRoot, fs.Type == unix.CGROUP2_SUPER_MAGIC, procFile, data)
}

// controllersIn is controllersOf for the hierarchies mounted at root
// (cgroup2 there, or else a tmpfs of v1 hierarchies) and the manager's
// /proc/PID/cgroup text procCgroup, read from procFile.
func controllersIn(root string, cgroup2 bool, procFile string, procCgroup []byte) (Controllers, error) {
	if !cgroup2 {
		why := "cgroups here are cgroup v1 (legacy)"
		if _, err := os.Stat(filepath.Join(root, "unified")); err == nil {
			why = "cgroups here are hybrid"
		}
		if _, err := os.Stat(filepath.Join(root, "memory")); err == nil {
			why += ": the memory controller is bound to cgroup v1 (" + filepath.Join(root, "memory") + ")"
		}
		return Controllers{Why: why + ", which systemd does not delegate to a user manager: it enforces MemoryMax= and CPUWeight= of user units only on cgroup2 (boot with systemd.unified_cgroup_hierarchy=1)"}, nil
	}
	var own string
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			own = p
		}
	}
	if own == "" {
		return Controllers{}, fmt.Errorf("read the user manager's cgroup: no cgroup2 line (0::) in %s", procFile)
	}
	// The manager runs in its init.scope; its own cgroup, whose
	// controllers its units can have, is the parent.
	dir := filepath.Join(root, filepath.Dir(own))
	list, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return Controllers{}, fmt.Errorf("read the user manager's controllers: %w", err)
	}
	have := strings.Fields(string(list))
	c := Controllers{Memory: slices.Contains(have, "memory"), CPU: slices.Contains(have, "cpu")}
	var missing []string
	if !c.Memory {
		missing = append(missing, "memory (MemoryMax=)")
	}
	if !c.CPU {
		missing = append(missing, "cpu (CPUWeight=)")
	}
	if len(missing) > 0 {
		c.Why = fmt.Sprintf("the user manager's cgroup %s has no %s controller (it has: %q): delegate it to user@.service (Delegate= in a drop-in of the system's user@.service)", dir, strings.Join(missing, " or "), strings.TrimSpace(string(list)))
	}
	return c, nil
}
