package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	godbus "github.com/godbus/dbus/v5"

	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/unitname"
)

// installHint is how to install a program on the common distributions.
func installHint(pkg string) string {
	return fmt.Sprintf("install %[1]s (Debian, Ubuntu: apt install %[1]s; Fedora: dnf install %[1]s; Arch: pacman -S %[1]s)", pkg)
}

// checkManager: can Legion reach the systemd user manager? Everything
// Legion runs is a unit of it.
func checkManager(ctx context.Context) Check {
	c := Check{Name: CheckManager}
	m, err := units.Connect(ctx)
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		if errors.Is(err, units.ErrNoManager) {
			c.Fix = "log in through a systemd session (a console or ssh login starts user@UID.service), " +
				"or run `loginctl enable-linger $USER` to start the manager without one; in a container " +
				"without systemd as PID 1 there is no user manager"
		} else {
			c.Fix = "see `systemctl --user status` and `journalctl --user -b`"
		}
		return c
	}
	if err := m.Close(); err != nil {
		c.Status, c.Detail = Warn, "reachable, but closing the connection failed: "+err.Error()
		c.Fix = "see `journalctl --user -b`"
		return c
	}
	c.Status, c.Detail = OK, "reachable"
	return c
}

// Linger is the lingering check alone, with o's defaults: what `legion
// install` reports after installing.
func Linger(ctx context.Context, o Options) Check {
	o = o.withDefaults()
	return withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkLinger(ctx, o) })
}

// checkLinger: is lingering on, so the manager (and Legion's units) run
// without a login session, survive logout and start at boot? Lingering is
// logind's: it starts user@UID.service at boot for every user with a file
// in its lingering directory, and keeps it after their last session.
// Without logind (no system bus, or no org.freedesktop.login1 on it: a
// container without systemd as PID 1) nothing does either, and the state
// is unknown. With logind, the file is read, as logind itself does
// (User.Linger of its D-Bus API reads the same file), which needs no
// D-Bus call per user and no user logind already tracks.
func checkLinger(ctx context.Context, o Options) Check {
	if ok, why := logindRunning(ctx, o.SystemBus); !ok {
		return Check{Name: CheckLinger, Status: Warn,
			Detail: "no logind: lingering unknown (" + why + "); Legion's units run only as long as whatever started this user manager keeps it",
			Fix: "on a machine booted with systemd, `loginctl enable-linger " + cmp.Or(o.User, "$USER") +
				"` starts the user manager at boot and keeps Legion's units running after logout"}
	}
	return lingerFile(o.LingerDir, o.User)
}

// logindName is systemd-logind's name on the system bus.
const logindName = "org.freedesktop.login1"

// logindRunning reports whether systemd-logind owns its name on the
// system bus at addr; why says, when it does not, what was found instead.
func logindRunning(ctx context.Context, addr string) (ok bool, why string) {
	conn, err := godbus.Dial(addr, godbus.WithContext(ctx))
	if err != nil {
		return false, fmt.Sprintf("no system bus at %s: %v", addr, err)
	}
	defer conn.Close()
	if err := conn.Auth(nil); err != nil {
		return false, fmt.Sprintf("system bus at %s: %v", addr, err)
	}
	if err := conn.Hello(); err != nil {
		return false, fmt.Sprintf("system bus at %s: %v", addr, err)
	}
	var has bool
	if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, logindName).Store(&has); err != nil {
		return false, fmt.Sprintf("ask the system bus at %s for %s: %v", addr, logindName, err)
	}
	if !has {
		return false, logindName + " is not on the system bus"
	}
	return true, ""
}

// lingerFile: lingering of user as logind's lingering directory dir says.
func lingerFile(dir, user string) Check {
	c := Check{Name: CheckLinger}
	if user == "" {
		c.Status, c.Detail = Warn, "cannot tell: the current user has no name"
		c.Fix = "run `loginctl show-user $(id -u) -p Linger`"
		return c
	}
	_, err := os.Stat(filepath.Join(dir, user))
	switch {
	case err == nil:
		c.Status, c.Detail = OK, fmt.Sprintf("enabled for %s: Legion's units keep running without a login session", user)
	case errors.Is(err, fs.ErrNotExist):
		c.Status = Warn
		c.Detail = fmt.Sprintf("not enabled for %s: Legion's units (every agent) stop when the last session of %s ends, and teams start only at login, not at boot", user, user)
		c.Fix = "loginctl enable-linger " + user
	default:
		c.Status, c.Detail = Warn, fmt.Sprintf("cannot tell: %v", err)
		c.Fix = "run `loginctl show-user " + user + " -p Linger`"
	}
	return c
}

// checkBus: is there a session bus? Legion reaches the manager through its
// private socket first, so a missing bus is only a warning; systemctl
// --user and journalctl --user work better with one.
func checkBus(ctx context.Context, runtimeDir string) Check {
	c := Check{Name: CheckBus}
	addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS")
	if addr == "" {
		addr = "unix:path=" + filepath.Join(runtimeDir, "bus")
	}
	conn, err := godbus.Dial(addr, godbus.WithContext(ctx))
	if err == nil {
		err = conn.Auth(nil)
		if err == nil {
			err = conn.Hello()
		}
		if cerr := conn.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		c.Status = Warn
		c.Detail = fmt.Sprintf("no session bus at %s: %v", addr, err)
		c.Fix = "install dbus-user-session (Debian, Ubuntu) or dbus-broker and log in again; Legion " +
			"itself reaches the manager through its private socket"
		return c
	}
	c.Status, c.Detail = OK, "connected to "+addr
	return c
}

// checkWorker: is legion-pty-worker, the program every session's unit
// runs, where legion looks for it, and does it run?
func checkWorker(ctx context.Context, find func() (string, error), version string) Check {
	const reinstall = "make install (from a source tree), or reinstall the legion package"
	c := Check{Name: CheckWorker}
	path, err := find()
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, err.Error(), reinstall
		return c
	}
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("%s --version: %v", path, err), reinstall
		return c
	}
	got := strings.TrimSpace(string(out))
	c.Status, c.Detail = OK, path+" ("+got+")"
	if want := "legion-pty-worker " + version; version != "" && got != want {
		c.Status, c.Detail, c.Fix = Warn, c.Detail+"; legion is "+version, "install both from the same build: "+reinstall
	}
	return c
}

// installedLegion returns the legion program that the installed
// legion.service in unitDir runs (the program of its ExecStart=, which
// starts the workers), or fallback when there is no such unit file or it
// names no program.
func installedLegion(unitDir, fallback string) string {
	data, err := os.ReadFile(filepath.Join(unitDir, unitname.HelperUnit))
	if err != nil {
		return fallback
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "ExecStart="); ok {
			if prog, err := units.ExecProgram(v); err == nil && filepath.IsAbs(prog) {
				return prog
			}
		}
	}
	return fallback
}

// checkTool: is a program Legion runs in PATH?
func checkTool(name, prog, why string) Check {
	c := Check{Name: name}
	path, err := exec.LookPath(prog)
	if err != nil {
		c.Status = Fail
		c.Detail = fmt.Sprintf("%s not found in PATH (%s); %s", prog, os.Getenv("PATH"), why)
		c.Fix = installHint(prog)
		return c
	}
	c.Status, c.Detail = OK, path
	return c
}
