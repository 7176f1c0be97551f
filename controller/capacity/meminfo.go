package capacity

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MeminfoPath is the kernel's memory report (proc_meminfo(5)).
const MeminfoPath = "/proc/meminfo"

// MemAvailable is the MemAvailable line of /proc/meminfo's text data, in
// bytes: the kernel's estimate of what can be allocated without swapping.
// path names the file in errors.
func MemAvailable(path string, data []byte) (uint64, error) {
	return memField(path, data, "MemAvailable")
}

// MemTotal is the MemTotal line of /proc/meminfo's text data, in bytes:
// the machine's usable memory.
func MemTotal(path string, data []byte) (uint64, error) { return memField(path, data, "MemTotal") }

// memField is /proc/meminfo's line key, in bytes.
func memField(path string, data []byte, key string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), key+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("read %s: %s is %q: expected a number of kB", path, key, strings.TrimSpace(rest))
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || n > 1<<53 {
			return 0, fmt.Errorf("read %s: %s is %q: expected a number of kB", path, key, strings.TrimSpace(rest))
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("read %s: no %s line (Linux 3.14 or later has one)", path, key)
}

// readMemAvailable is MemAvailable of the file at path.
func readMemAvailable(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read the available memory: %w", err)
	}
	return MemAvailable(path, data)
}
