package units

import (
	"context"
	"fmt"

	godbus "github.com/godbus/dbus/v5"
)

// Environment returns the manager's environment block ("K=V", the
// Environment property of org.freedesktop.systemd1.Manager, what
// `systemctl --user show-environment` prints): what every unit it starts
// from now on gets, below the unit's own Environment=. It holds what
// environment.d(5) files set at the manager's start or last daemon-reload,
// overridden by `systemctl --user set-environment`. Legion's workers find
// their agent program in its PATH, not in the PATH of the shell that ran
// `legion dispatch`.
func (m *Manager) Environment(ctx context.Context) ([]string, error) {
	var env []string
	err := m.do(ctx, func(c *conns) error {
		var v godbus.Variant
		err := c.raw.Object(sdDest, sdPath).CallWithContext(ctx, dbusPropsIface+".Get", 0, sdManagerIface, "Environment").Store(&v)
		if err != nil {
			return err
		}
		return v.Store(&env)
	})
	if err != nil {
		return nil, fmt.Errorf("read the user manager's environment: %w", err)
	}
	return env, nil
}
