package bootedtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/legion-dev/legion/units/booted"
)

// Leftovers lists what a stopped system left on the host: its directory,
// any of its cgroups, mounts in this process's mount namespace naming its
// directory, and processes whose command line or cgroup names its
// machine. Empty means nothing.
func Leftovers(s *booted.System) []string {
	var left []string
	if _, err := os.Lstat(s.Dir); !errors.Is(err, fs.ErrNotExist) {
		left = append(left, fmt.Sprintf("directory %s (stat: %v)", s.Dir, err))
	}
	for _, cg := range s.Cgroups() {
		if _, err := os.Lstat(cg); !errors.Is(err, fs.ErrNotExist) {
			left = append(left, fmt.Sprintf("cgroup %s (stat: %v)", cg, err))
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err != nil {
		left = append(left, "unreadable /proc/self/mountinfo: "+err.Error())
	} else {
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, s.Dir) || strings.Contains(line, s.Machine) {
				left = append(left, "mount: "+strings.TrimSpace(line))
			}
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return append(left, "unreadable /proc: "+err.Error())
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		for _, f := range []string{"cmdline", "cgroup"} {
			b, err := os.ReadFile(filepath.Join("/proc", p.Name(), f))
			if err == nil && strings.Contains(string(b), s.Machine) {
				left = append(left, fmt.Sprintf("process %s (its %s names %s): %s", p.Name(), f, s.Machine, strings.ReplaceAll(string(b), "\x00", " ")))
				break
			}
		}
	}
	return left
}
