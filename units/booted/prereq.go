package booted

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/legion-dev/legion/internal/cgroups"
)

// MissingError says that the machine lacks something a booted system
// needs. Boot returns it (wrapped) before it has changed anything; callers
// that can do without detect it with errors.As (tests skip on it).
type MissingError struct {
	// What names the prerequisite and how to get it.
	What string
}

func (e *MissingError) Error() string { return "prerequisite missing: " + e.What }

// prereqs is what Boot found on the machine: absolute paths of the tools
// it runs on the host, and the cgroup layout.
type prereqs struct {
	nspawn, nsenter, unshare string
	layout                   cgroups.Layout
}

// installHint is how to get systemd-nspawn without upgrading systemd.
const installHint = "apt-get install --no-install-recommends systemd-container=$(dpkg-query -W -f='${Version}' systemd), which scripts/check-deps runs as root"

// Check reports whether this machine can boot a system, as Boot would
// find it: nil, or an error wrapping a *MissingError.
func Check(ctx context.Context) error {
	_, err := checkPrereqs(ctx, os.Geteuid())
	return err
}

// checkPrereqs checks, in order, everything a booted system needs for a
// process with effective user ID euid, and returns a *MissingError for the
// first thing missing.
func checkPrereqs(ctx context.Context, euid int) (prereqs, error) {
	var p prereqs
	if euid != 0 {
		return p, &MissingError{fmt.Sprintf("running as root: booting a container needs mount namespaces, cgroups and systemd-nspawn (this process runs as uid %d)", euid)}
	}
	for _, tool := range []struct {
		name string
		dst  *string
	}{{"systemd-nspawn", &p.nspawn}, {"nsenter", &p.nsenter}, {"unshare", &p.unshare}, {"mount", nil}, {"systemctl", nil}} {
		path, err := exec.LookPath(tool.name)
		if err != nil {
			if tool.name == "systemd-nspawn" {
				return p, &MissingError{"systemd-nspawn in PATH (" + installHint + ")"}
			}
			return p, &MissingError{tool.name + " in PATH"}
		}
		if tool.dst != nil {
			*tool.dst = path
		}
	}
	// The container runs the host's systemd with the host's nspawn: a
	// systemd-container of another version than systemd is a half-upgraded
	// host.
	nv, err := firstLine(ctx, p.nspawn, "--version")
	if err != nil {
		return p, &MissingError{"a working systemd-nspawn: " + err.Error()}
	}
	sv, err := firstLine(ctx, "systemctl", "--version")
	if err != nil {
		return p, &MissingError{"a working systemctl: " + err.Error()}
	}
	if nv != sv {
		return p, &MissingError{fmt.Sprintf("systemd-nspawn of the installed systemd's version (nspawn says %q, systemctl %q; %s)", nv, sv, installHint)}
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil || !bytes.Contains(fs, []byte("\toverlay\n")) {
		return p, &MissingError{"overlayfs in the kernel (/proc/filesystems has no overlay; modprobe overlay)"}
	}
	layout, err := cgroups.Detect()
	if err != nil {
		return p, &MissingError{"a cgroup layout systemd can use: " + err.Error()}
	}
	p.layout = layout
	return p, nil
}

// firstLine runs a command and returns the first line of its stdout.
func firstLine(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}
