package hostprobe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Observe looks for check's effect on the calling process, which runs in a
// probe unit: whether it holds, and what was seen. An error means it could
// not look.
func Observe(check Check, arg string) (bool, string, error) {
	switch check {
	case CheckStarted:
		return true, "started", nil
	case CheckMount:
		return false, "", fmt.Errorf("%s is looked for by awk(1), not legion", CheckMount)
	case CheckUserNS:
		m, err := os.ReadFile("/proc/self/uid_map")
		if err != nil {
			return false, "", err
		}
		f := strings.Fields(string(m))
		// The initial namespace maps all of 0..2^32-2 to itself.
		initial := len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
		return !initial, "uid_map " + strings.Join(f, " "), nil
	case CheckReadOnlyUsr:
		var st unix.Statfs_t
		if err := unix.Statfs("/usr", &st); err != nil {
			return false, "", fmt.Errorf("statfs /usr: %w", err)
		}
		ro := st.Flags&unix.ST_RDONLY != 0
		return ro, fmt.Sprintf("/usr read-only: %v", ro), nil
	case CheckSeccomp:
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return false, "", err
		}
		nnp, sc := statusField(status, "NoNewPrivs"), statusField(status, "Seccomp")
		return nnp == "1" && sc == "2", "NoNewPrivs " + nnp + ", Seccomp " + sc, nil
	case CheckMemory:
		return cgroupValue(arg, "memory.max", "memory", "memory.limit_in_bytes")
	case CheckCPU:
		return cgroupValue(arg, "cpu.max", "cpu", "cpu.cfs_quota_us")
	case CheckTasks:
		return cgroupValue(arg, "pids.max", "pids", "pids.max")
	case CheckJournal:
		var st unix.Stat_t
		if err := unix.Fstat(1, &st); err != nil {
			return false, "", fmt.Errorf("stat stdout: %w", err)
		}
		sock := st.Mode&unix.S_IFMT == unix.S_IFSOCK
		return sock, fmt.Sprintf("stdout a socket: %v", sock), nil
	}
	return false, "", fmt.Errorf("unknown check %q: want one of %s", check, strings.Join(checkNames(), ", "))
}

func checkNames() []string {
	return []string{string(CheckStarted), string(CheckUserNS), string(CheckReadOnlyUsr), string(CheckSeccomp),
		string(CheckMemory), string(CheckCPU), string(CheckTasks), string(CheckJournal)}
}

// statusField is the value of key in /proc/self/status.
func statusField(status []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// cgroupValue: is the first field of the process's own cgroup's file (v2)
// or of the v1 controller's file want?
func cgroupValue(want, v2File, v1Controller, v1File string) (bool, string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false, "", err
	}
	var path string
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			path = filepath.Join("/sys/fs/cgroup", parts[2], v2File)
		} else if containsWord(parts[1], v1Controller) {
			path = filepath.Join("/sys/fs/cgroup", parts[1], parts[2], v1File)
			break // a v1 hierarchy with the controller wins over the unified one of a hybrid host
		}
	}
	if path == "" {
		return false, "no cgroup found in /proc/self/cgroup", nil
	}
	v, err := os.ReadFile(path)
	if err != nil {
		// The controller is not enabled for this cgroup: no such file.
		return false, fmt.Sprintf("%s: %v", path, err), nil
	}
	got := strings.Fields(string(v))
	ok := len(got) > 0 && got[0] == want
	if !ok {
		if _, err := strconv.ParseUint(want, 10, 64); err != nil {
			return false, "", fmt.Errorf("want %q: not a number", want)
		}
	}
	return ok, fmt.Sprintf("%s: %s", path, strings.TrimSpace(string(v))), nil
}

func containsWord(list, w string) bool {
	for f := range strings.SplitSeq(list, ",") {
		if f == w {
			return true
		}
	}
	return false
}

// EffectFlag is the first argument that makes the legion binary run
// EffectMain: the program of a probe unit.
const EffectFlag = "--probe-effect"

// EffectMain is the program of a probe unit (legion --probe-effect CHECK
// [ARG]): it prints what it saw and returns the exit status, ExitHolds,
// ExitAbsent or ExitError.
func EffectMain(args []string, stdout *os.File) int {
	if len(args) < 1 || len(args) > 2 {
		fmt.Fprintf(stdout, "usage: legion %s CHECK [ARG]; CHECK is one of %s\n", EffectFlag, strings.Join(checkNames(), ", "))
		return ExitError
	}
	arg := ""
	if len(args) == 2 {
		arg = args[1]
	}
	ok, seen, err := Observe(Check(args[0]), arg)
	if err != nil {
		fmt.Fprintf(stdout, "legion probe %s: %v\n", args[0], err)
		return ExitError
	}
	fmt.Fprintf(stdout, "legion probe %s: %s\n", args[0], seen)
	if !ok {
		return ExitAbsent
	}
	return ExitHolds
}
