package sdtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Require skips the test when ok is false, saying that what is missing; with
// CI=true in the environment it fails the test instead, so a broken setup
// never passes as green. what names the prerequisite, e.g. "running as root".
func Require(t testing.TB, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("prerequisite missing: %s (CI=true, so this fails instead of skipping)", what)
	}
	t.Skipf("prerequisite missing: %s (skipping; with CI=true this fails)", what)
}

// prereqs is what Start needs from the machine.
type prereqs struct {
	base       string // where sandboxes go: os.TempDir(), or /tmp when that is too long
	unshare    string
	systemd    string
	dbusDaemon string
	layout     cgroupLayout
}

// prerequisites checks, in order, everything Start needs, and skips (or
// with CI=true fails) the test at the first thing missing.
func prerequisites(t testing.TB) prereqs {
	t.Helper()
	Require(t, "running as root (a private systemd user manager needs mount and cgroup namespaces)", os.Geteuid() == 0)
	var p prereqs
	for _, tool := range []struct {
		name string
		dst  *string
	}{{"unshare", &p.unshare}, {"dbus-daemon", &p.dbusDaemon}, {"systemctl", nil}, {"mount", nil}} {
		path, err := exec.LookPath(tool.name)
		Require(t, tool.name+" in PATH", err == nil)
		if tool.dst != nil {
			*tool.dst = path
		}
	}
	// The path goes into a unit file unquoted.
	Require(t, "a dbus-daemon path without spaces, quotes, % or $ (got "+p.dbusDaemon+")",
		!strings.ContainsAny(p.dbusDaemon, " \t\"'\\%$"))
	for _, path := range []string{"/usr/lib/systemd/systemd", "/lib/systemd/systemd"} {
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			p.systemd = path
			break
		}
	}
	Require(t, "systemd installed (/usr/lib/systemd/systemd)", p.systemd != "")
	fi, err := os.Stat("/run/systemd")
	Require(t, "a /run/systemd directory (the manager gets a tmpfs there)", err == nil && fi.IsDir())
	layout, err := detectCgroups()
	what := "a cgroup layout systemd can use"
	if err != nil {
		what += ": " + err.Error()
	}
	Require(t, what, err == nil)
	p.layout = layout

	p.base = os.TempDir()
	if len(p.base) > 40 { // keep D/run/systemd/private well below 108 bytes
		p.base = "/tmp"
	}
	return p
}
