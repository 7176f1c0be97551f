package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/legion-dev/legion/internal/cgroups"
)

// MissingError says that the machine lacks something a sandbox needs.
// Start returns it (wrapped) before it has changed anything; callers that
// can do without a sandbox detect it with errors.As (tests skip on it).
type MissingError struct {
	// What names the prerequisite and why it is needed, e.g. "running as
	// root: ..." or "unshare in PATH".
	What string
}

func (e *MissingError) Error() string { return "prerequisite missing: " + e.What }

// prereqs is what Start found on the machine.
type prereqs struct {
	unshare, systemd, dbusDaemon, systemctl string
	layout                                  cgroups.Layout
}

// capSysAdmin is CAP_SYS_ADMIN's bit in /proc/self/status CapEff.
const capSysAdmin = 21

// checkPrereqs checks, in order, everything a sandbox needs for a process
// running with effective user ID euid, and returns a *MissingError for the
// first thing missing.
func checkPrereqs(euid int) (prereqs, error) {
	var p prereqs
	if euid != 0 {
		return p, &MissingError{fmt.Sprintf("running as root: a private systemd user manager needs mount and cgroup namespaces (this process runs as uid %d)", euid)}
	}
	if ok, err := hasCapability(capSysAdmin); err != nil {
		return p, &MissingError{"readable capabilities: " + err.Error()}
	} else if !ok {
		return p, &MissingError{"CAP_SYS_ADMIN in the effective capabilities (root without it, as in an unprivileged container, cannot make mount namespaces)"}
	}
	for _, tool := range []struct {
		name string
		dst  *string
	}{{"unshare", &p.unshare}, {"dbus-daemon", &p.dbusDaemon}, {"systemctl", &p.systemctl}, {"mount", nil}} {
		path, err := exec.LookPath(tool.name)
		if err != nil {
			return p, &MissingError{tool.name + " in PATH"}
		}
		if tool.dst != nil {
			*tool.dst = path
		}
	}
	// The path goes into a unit file unquoted.
	if strings.ContainsAny(p.dbusDaemon, " \t\"'\\%$") {
		return p, &MissingError{"a dbus-daemon path without spaces, quotes, % or $ (got " + p.dbusDaemon + ")"}
	}
	for _, path := range []string{"/usr/lib/systemd/systemd", "/lib/systemd/systemd"} {
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			p.systemd = path
			break
		}
	}
	if p.systemd == "" {
		return p, &MissingError{"systemd installed (no /usr/lib/systemd/systemd)"}
	}
	if fi, err := os.Stat("/run/systemd"); err != nil || !fi.IsDir() {
		return p, &MissingError{"a /run/systemd directory (the manager gets a tmpfs there)"}
	}
	layout, err := cgroups.Detect()
	if err != nil {
		return p, &MissingError{"a cgroup layout systemd can use: " + err.Error()}
	}
	p.layout = layout
	return p, nil
}

// hasCapability reports whether capability bit is in this process's
// effective set.
func hasCapability(bit uint) (bool, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if hex, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				return false, fmt.Errorf("/proc/self/status CapEff %q: %w", hex, err)
			}
			return caps&(1<<bit) != 0, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("/proc/self/status has no CapEff line")
}
