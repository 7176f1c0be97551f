package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/internal/desktopnotify"
)

// notifyCheckName names the notifications check of a team.
func notifyCheckName(team string) string { return "notifications of team " + team }

// checkNotify: can the controller of team t (which configures some
// channel in [teams.<name>.notify]) announce a wait? Each channel is set up
// as the controller sets it up (notify.Channels): a webhook needs its
// signing secret, in the user manager's environment (which the controller
// gets) or in a 0600 file; an ntfy token named must be there too. The
// desktop needs a session bus the controller can reach: the manager's
// DBUS_SESSION_BUS_ADDRESS, or the bus socket in its XDG_RUNTIME_DIR;
// without one it is a warning (the messages are skipped there). Nothing
// is sent: `legion notify test` does.
func checkNotify(configPath string, t config.Team, w workerEnv) Check {
	c := Check{Name: notifyCheckName(t.Name), Team: t.Name}
	if w.err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("the user manager's environment, which the controller gets, cannot be read: %v", w.err)
		c.Fix = fmt.Sprintf("see the check %q", CheckManager)
		return c
	}
	chans, err := notify.Channels(t, w.get, &desktopnotify.Desktop{}, nil)
	var names []string
	for _, ch := range chans {
		names = append(names, ch.Name())
	}
	if err != nil {
		c.Status, c.Detail = Fail, strings.TrimPrefix(err.Error(), "team "+t.Name+": ")
		if len(names) > 0 {
			c.Detail += " (set up: " + strings.Join(names, ", ") + ")"
		}
		c.Fix = fmt.Sprintf("give each channel its secret as [teams.%s.notify] in %s names it: a variable of the user manager's environment "+
			"(a file of %s, then `systemctl --user daemon-reload`) or a file only you can read (chmod 600); then `legion notify test %s`",
			t.Name, configPath, w.environmentDir(), t.Name)
		return c
	}
	if t.Notify.Desktop && !sessionBus(w) {
		c.Status, c.Detail = Warn, strings.Join(names, ", ")+"; no session bus in the user manager's environment (DBUS_SESSION_BUS_ADDRESS, or $XDG_RUNTIME_DIR/bus): desktop messages are skipped"
		c.Fix = "log in to a desktop session (its bus is the user manager's), or drop notify.desktop and use ntfy or a webhook"
		return c
	}
	c.Status, c.Detail = OK, strings.Join(names, ", ")+fmt.Sprintf(" (`legion notify test %s` sends a sample)", t.Name)
	return c
}

// sessionBus reports whether the manager's environment names a session
// bus the controller can reach.
func sessionBus(w workerEnv) bool {
	if w.get("DBUS_SESSION_BUS_ADDRESS") != "" {
		return true
	}
	rt := w.get("XDG_RUNTIME_DIR")
	if rt == "" {
		return false
	}
	st, err := os.Stat(filepath.Join(rt, "bus"))
	return err == nil && st.Mode().Type() == os.ModeSocket
}
