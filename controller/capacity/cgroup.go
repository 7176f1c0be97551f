package capacity

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CgroupRoot is where the cgroup hierarchies are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// memoryFiles name a hierarchy's memory figures: cgroup2's, or those of
// cgroup v1's memory controller.
type memoryFiles struct {
	limit, current, peak string
}

var (
	v2Files = memoryFiles{limit: "memory.max", current: "memory.current", peak: "memory.peak"}
	v1Files = memoryFiles{limit: "memory.limit_in_bytes", current: "memory.usage_in_bytes", peak: "memory.max_usage_in_bytes"}
)

// unlimitedV1 is where cgroup v1's "no limit" starts: the kernel reports
// it as a page counter's maximum, 9223372036854771712 on 4 KiB pages.
const unlimitedV1 = 1 << 62

// Slice is the cgroup of a team's slice, legion-<short>.slice, in the
// hierarchy that has the memory controller. The zero Slice is none: the
// slice is not running, or no hierarchy accounts memory here.
type Slice struct {
	Dir   string // the slice's cgroup directory
	short string
	files memoryFiles
}

// FindSlice finds the cgroup of the slice of the team whose short ID is
// short, as this process sees the hierarchies mounted at root:
// legion.slice/legion-<short>.slice below the user manager's cgroup,
// which is an ancestor of this process's own cgroup when it runs under
// that manager (the controller runs in that very slice; the dashboard in
// app.slice) and otherwise /user.slice/user-UID.slice/user@UID.service.
// procCgroup is /proc/self/cgroup's text. The zero Slice and no error
// mean there is no such cgroup: the slice is not running (no unit of the
// team is), or memory is accounted in no hierarchy here.
func FindSlice(root string, procCgroup []byte, short string, uid int) (Slice, error) {
	base, own, files, ok := memoryHierarchy(root, procCgroup)
	if !ok {
		return Slice{}, nil
	}
	rel := filepath.Join("legion.slice", "legion-"+short+".slice")
	var tried []string
	for p := filepath.Clean("/" + own); ; p = filepath.Dir(p) {
		tried = append(tried, p)
		if p == "/" {
			break
		}
	}
	tried = append(tried, fmt.Sprintf("/user.slice/user-%d.slice/user@%d.service", uid, uid))
	for _, p := range tried {
		dir := filepath.Join(base, p, rel)
		if _, err := os.Stat(filepath.Join(dir, files.current)); err == nil {
			return Slice{Dir: dir, short: short, files: files}, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return Slice{}, fmt.Errorf("find the cgroup of legion-%s.slice: %w", short, err)
		}
	}
	return Slice{}, nil
}

// memoryHierarchy is the mount point of the hierarchy with the memory
// controller below root, this process's cgroup in it, and its memory
// files: cgroup2 mounted at root, or else cgroup v1's memory hierarchy at
// root/memory (a hybrid or legacy host). ok is false when there is none.
func memoryHierarchy(root string, procCgroup []byte) (base, own string, files memoryFiles, ok bool) {
	var st unix.Statfs_t
	v2 := unix.Statfs(root, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case v2 && f[0] == "0" && f[1] == "":
			return root, f[2], v2Files, true
		case !v2 && hasController(f[1], "memory"):
			return filepath.Join(root, "memory"), f[2], v1Files, true
		}
	}
	return "", "", memoryFiles{}, false
}

func hasController(list, c string) bool {
	for _, n := range strings.Split(list, ",") {
		if n == c {
			return true
		}
	}
	return false
}

// Room is what the slice has left under its memory limit; limited is
// false when it has none (MemoryMax=infinity).
func (s Slice) Room() (left, limit uint64, limited bool, err error) {
	limit, unlimited, err := s.readLimit()
	if err != nil || unlimited {
		return 0, 0, false, err
	}
	cur, err := readBytes(filepath.Join(s.Dir, s.files.current))
	if err != nil {
		return 0, 0, false, err
	}
	if cur >= limit {
		return 0, limit, true, nil
	}
	return limit - cur, limit, true, nil
}

func (s Slice) readLimit() (limit uint64, unlimited bool, err error) {
	path := filepath.Join(s.Dir, s.files.limit)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false, fmt.Errorf("read the slice's memory limit: %w", err)
	}
	if strings.TrimSpace(string(data)) == "max" {
		return 0, true, nil
	}
	n, err := parseBytes(path, data)
	if err != nil {
		return 0, false, err
	}
	return n, n >= unlimitedV1, nil
}

// WorkerPeaks are the peak memory of each of the team's worker units
// running in the slice (legion-<short>-*.service: not the controller),
// by unit name: memory.peak (Linux 5.19 and later) or, in cgroup v1,
// memory.max_usage_in_bytes; the current use where the kernel keeps no
// peak. A unit that ends while it is read is left out.
func (s Slice) WorkerPeaks() (map[string]uint64, error) {
	if s.Dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("list the team's worker cgroups: %w", err)
	}
	out := map[string]uint64{}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "legion-"+s.short+"-") || !strings.HasSuffix(name, ".service") {
			continue
		}
		n, err := readBytes(filepath.Join(s.Dir, name, s.files.peak))
		if errors.Is(err, fs.ErrNotExist) {
			n, err = readBytes(filepath.Join(s.Dir, name, s.files.current))
		}
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENODEV):
			continue // it ended meanwhile
		case err != nil:
			return nil, err
		}
		out[name] = n
	}
	return out, nil
}

func readBytes(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseBytes(path, data)
}

// parseBytes reads a cgroup memory file's one number of bytes.
func parseBytes(path string, data []byte) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %q is not a number of bytes", path, strings.TrimSpace(string(data)))
	}
	return n, nil
}
