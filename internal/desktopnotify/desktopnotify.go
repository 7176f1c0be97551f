// Package desktopnotify shows notifications on the user's desktop: it
// calls org.freedesktop.Notifications.Notify on the user's session bus
// (https://specifications.freedesktop.org/notification-spec/latest/), as a
// notify.Channel. The controller's packages link no D-Bus; cmd/legion
// hands this channel to them.
//
// It owns one short connection to the session bus per message and
// nothing else. It never starts a bus (no dbus-launch autolaunch: an
// absent bus is notify.ErrUnavailable, skipped), never talks to the
// system bus or systemd, and never waits for a person to act on a
// notification.
package desktopnotify

import (
	"context"
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/legion-dev/legion/controller/notify"
)

// The notification service's names (the spec's).
const (
	Name      = "org.freedesktop.Notifications"
	Path      = "/org/freedesktop/Notifications"
	Interface = "org.freedesktop.Notifications"
)

// sendTimeout bounds one message: a bus or a notification server that
// hangs fails the send, which is retried.
const sendTimeout = 30 * time.Second

// Desktop is the desktop channel.
type Desktop struct {
	// Address is the session bus's D-Bus address; "" is the process's:
	// $DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus when that
	// socket exists.
	Address string
}

// Name is "desktop".
func (d *Desktop) Name() string { return "desktop" }

// address is the session bus to use, or "" when there is none.
func (d *Desktop) address() string {
	if d.Address != "" {
		return d.Address
	}
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" {
		return a
	}
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
		p := filepath.Join(rt, "bus")
		if st, err := os.Stat(p); err == nil && st.Mode().Type() == os.ModeSocket {
			return "unix:path=" + p
		}
	}
	return ""
}

// Send shows m: its title as the summary, its text and link as the body
// (escaped where the server takes markup), and answers with the
// notification's id. No session bus, a bus that does not answer, or no
// notification service on it is notify.ErrUnavailable.
func (d *Desktop) Send(ctx context.Context, m notify.Message) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	addr := d.address()
	if addr == "" {
		return "", fmt.Errorf("desktop: no session bus ($DBUS_SESSION_BUS_ADDRESS unset, no $XDG_RUNTIME_DIR/bus): %w", notify.ErrUnavailable)
	}
	conn, err := dbus.Connect(addr, dbus.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("desktop: connect to the session bus: %v: %w", err, notify.ErrUnavailable)
	}
	defer conn.Close()
	obj := conn.Object(Name, Path)
	var caps []string
	if err := obj.CallWithContext(ctx, Interface+".GetCapabilities", 0).Store(&caps); err != nil {
		return "", unavailable(err)
	}
	body := m.Text()
	if c := m.Click(); c != "" {
		body += "\n\n" + c
	}
	if slices.Contains(caps, "body-markup") {
		body = html.EscapeString(body)
		if c := m.Click(); c != "" && slices.Contains(caps, "body-hyperlinks") {
			body = html.EscapeString(m.Text()) + "\n\n<a href=\"" + html.EscapeString(c) + "\">" + html.EscapeString(c) + "</a>"
		}
	}
	hints := map[string]dbus.Variant{
		"urgency":  dbus.MakeVariant(byte(1)), // normal
		"category": dbus.MakeVariant("im.received"),
	}
	var id uint32
	call := obj.CallWithContext(ctx, Interface+".Notify", 0,
		"Legion", uint32(0), "", m.Title(), body, []string{}, hints, int32(-1))
	if err := call.Store(&id); err != nil {
		return "", unavailable(err)
	}
	return fmt.Sprintf("shown, id %d", id), nil
}

// unavailable is err, as notify.ErrUnavailable when the bus has no
// notification service (nothing owns the name, none can be activated).
func unavailable(err error) error {
	var de dbus.Error
	if errors.As(err, &de) && (de.Name == "org.freedesktop.DBus.Error.ServiceUnknown" ||
		de.Name == "org.freedesktop.DBus.Error.NameHasNoOwner") {
		return fmt.Errorf("desktop: no notification service on the session bus (%s): %w", de.Name, notify.ErrUnavailable)
	}
	return fmt.Errorf("desktop: %w", err)
}
