package units

import (
	"context"
	"fmt"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// Watch follows the unit's state. The channel receives the current State
// at once, then a fresh State after each change systemd signals for the
// unit: its Unit or Service properties (ActiveState, NRestarts, MainPID,
// StatusText, ...), a job of it ending, the unit being loaded or unloaded.
// Equal consecutive states are sent once, and changes that arrive while a
// State waits to be read by the receiver are coalesced: the receiver sees
// the latest state, not necessarily every step in between, and never
// misses the last one.
//
// The channel is closed when ctx ends, or earlier when the connection to
// the manager is lost or a read fails (then ctx.Err() is nil: call Watch
// again). Watch listens on a connection of its own, which its goroutine
// closes as it exits, right before closing the channel. A receiver that
// stops reading must cancel ctx.
func (m *Manager) Watch(ctx context.Context, name string) (<-chan State, error) {
	if _, err := m.current(); err != nil {
		return nil, fmt.Errorf("watch unit %s: %w", name, err)
	}
	conn, err := m.tr.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch unit %s: connect via %s: %w", name, m.tr.via, err)
	}
	path := unitObjectPath(name)
	// Buffered so the reader goroutine is rarely behind; godbus never
	// blocks on a full channel (it queues), so nothing here can stall the
	// connection.
	signals := make(chan *godbus.Signal, 64)
	conn.Signal(signals)
	if m.tr.hello {
		// On a bus, systemd signals only to subscribed clients and the bus
		// delivers only what a match rule asks for. On the private socket
		// every signal arrives anyway (and AddMatch does not exist).
		if err := subscribe(ctx, conn, path); err != nil {
			conn.Close()
			return nil, fmt.Errorf("watch unit %s: %w", name, err)
		}
	}
	// Read the first state only now that changes are being listened for,
	// so none falls between the two.
	first, err := m.State(ctx, name)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("watch unit %s: %w", name, err)
	}
	out := make(chan State)
	go m.follow(ctx, conn, signals, name, path, first, out)
	return out, nil
}

func subscribe(ctx context.Context, conn *godbus.Conn, path godbus.ObjectPath) error {
	rules := [][]godbus.MatchOption{
		{godbus.WithMatchObjectPath(path), godbus.WithMatchInterface(dbusPropsIface), godbus.WithMatchMember("PropertiesChanged")},
		{godbus.WithMatchObjectPath(sdPath), godbus.WithMatchInterface(sdManagerIface)},
	}
	for _, r := range rules {
		if err := conn.AddMatchSignalContext(ctx, r...); err != nil {
			return fmt.Errorf("add match rule: %w", err)
		}
	}
	if err := conn.Object(sdDest, sdPath).CallWithContext(ctx, sdManagerIface+".Subscribe", 0).Err; err != nil {
		return fmt.Errorf("subscribe to manager signals: %w", err)
	}
	return nil
}

// follow is Watch's goroutine. It exits when ctx ends, when the signal
// channel closes (the connection is gone) or when a read fails; it closes
// conn and then out.
func (m *Manager) follow(ctx context.Context, conn *godbus.Conn, signals <-chan *godbus.Signal, name string, path godbus.ObjectPath, cur State, out chan<- State) {
	defer close(out)
	defer conn.Close()
	unsent := true
	for {
		var send chan<- State // nil (disabled) while there is nothing new
		if unsent {
			send = out
		}
		select {
		case <-ctx.Done():
			return
		case send <- cur:
			unsent = false
		case sig, ok := <-signals:
			if !ok {
				return
			}
			if !concerns(sig, name, path) {
				continue
			}
			// One read covers everything already queued.
			for drained := false; !drained; {
				select {
				case _, ok := <-signals:
					if !ok {
						return
					}
				default:
					drained = true
				}
			}
			st, err := m.State(ctx, name)
			if err != nil {
				return
			}
			if st != cur {
				cur, unsent = st, true
			}
		}
	}
}

// concerns reports whether sig is about the unit.
func concerns(sig *godbus.Signal, name string, path godbus.ObjectPath) bool {
	switch sig.Name {
	case propertiesSignal:
		if sig.Path != path || len(sig.Body) == 0 {
			return false
		}
		iface, _ := sig.Body[0].(string)
		return iface == sdUnitIface || iface == sdServiceIface
	case sdManagerIface + ".UnitNew", sdManagerIface + ".UnitRemoved":
		// (name, path)
		return len(sig.Body) > 0 && sig.Body[0] == name
	case sdManagerIface + ".JobRemoved":
		// (id, job path, unit name, result)
		return len(sig.Body) > 2 && sig.Body[2] == name
	}
	return false
}

// unitObjectPath is the D-Bus object path systemd gives the unit.
func unitObjectPath(name string) godbus.ObjectPath {
	return godbus.ObjectPath("/org/freedesktop/systemd1/unit/" + sddbus.PathBusEscape(name))
}
