package units

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	godbus "github.com/godbus/dbus/v5"
)

// unitPathPrefix is the object path of every unit but for its escaped
// name.
const unitPathPrefix = "/org/freedesktop/systemd1/unit/"

// Changes follows every unit whose name starts with prefix (for Legion's
// workers, "legion-") on the Manager's connection: one subscription to
// the manager, however many units there are. The channel receives the
// names of the units that changed since the last receive, sorted: their
// Unit or Service properties changed, a job of theirs ended, or they were
// loaded or unloaded. Names that change while a batch waits to be read
// are added to it, so a slow receiver gets fewer, larger batches and
// never misses a unit; read each unit's State to see what changed.
//
// The channel is closed when ctx ends, or earlier when the connection to
// the manager is lost (then ctx.Err() is nil: call Changes again, which
// reconnects, and read every unit, since changes in between were not
// seen). A receiver that stops reading must cancel ctx.
func (m *Manager) Changes(ctx context.Context, prefix string) (<-chan []string, error) {
	// Buffered so the reader goroutine is rarely behind; godbus queues
	// rather than blocks when it is full, so a slow receiver never holds
	// up the connection's calls.
	signals := make(chan *godbus.Signal, 256)
	c, err := m.current()
	for err == nil {
		c.raw.Signal(signals)
		// godbus ignores a channel added to a closed connection: it would
		// never be closed (followChanges also watches the connection).
		if c.raw.Connected() {
			break
		}
		c, err = m.reconnect(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("follow units %s*: %w", prefix, err)
	}
	if m.tr.hello {
		// On a bus, systemd signals only to subscribed clients and the bus
		// delivers only what a match rule asks for. On the private socket
		// every signal arrives anyway.
		if err := subscribeAll(ctx, c.raw); err != nil {
			c.raw.RemoveSignal(signals)
			return nil, fmt.Errorf("follow units %s*: %w", prefix, err)
		}
	}
	out := make(chan []string)
	go followChanges(ctx, c.raw, signals, prefix, out)
	return out, nil
}

func subscribeAll(ctx context.Context, conn *godbus.Conn) error {
	rules := [][]godbus.MatchOption{
		{godbus.WithMatchPathNamespace(godbus.ObjectPath(strings.TrimSuffix(unitPathPrefix, "/"))), godbus.WithMatchInterface(dbusPropsIface), godbus.WithMatchMember("PropertiesChanged")},
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

// followChanges is Changes' goroutine. It exits when ctx ends (and takes
// signals off conn), or when the connection is gone: the signal channel
// closes, or (if the channel was added as the connection closed, and
// godbus ignored it) the connection's context ends. Then it closes out.
func followChanges(ctx context.Context, conn *godbus.Conn, signals chan *godbus.Signal, prefix string, out chan<- []string) {
	defer close(out)
	defer conn.RemoveSignal(signals)
	pending := map[string]bool{}
	for {
		var send chan<- []string // nil (disabled) while there is nothing new
		var batch []string
		if len(pending) > 0 {
			send = out
			for n := range pending {
				batch = append(batch, n)
			}
			slices.Sort(batch)
		}
		select {
		case <-ctx.Done():
			return
		case <-conn.Context().Done():
			return
		case send <- batch:
			clear(pending)
		case sig, ok := <-signals:
			if !ok {
				return
			}
			if name := changedUnit(sig); name != "" && strings.HasPrefix(name, prefix) {
				pending[name] = true
			}
		}
	}
}

// changedUnit is the name of the unit sig is about, or "" when it is about
// none (or not a change).
func changedUnit(sig *godbus.Signal) string {
	switch sig.Name {
	case propertiesSignal:
		path := string(sig.Path)
		if !strings.HasPrefix(path, unitPathPrefix) || len(sig.Body) == 0 {
			return ""
		}
		if iface, _ := sig.Body[0].(string); iface != sdUnitIface && iface != sdServiceIface {
			return ""
		}
		return pathUnescape(path[len(unitPathPrefix):])
	case sdManagerIface + ".UnitNew", sdManagerIface + ".UnitRemoved":
		// (name, path)
		if len(sig.Body) > 0 {
			name, _ := sig.Body[0].(string)
			return name
		}
	case sdManagerIface + ".JobRemoved":
		// (id, job path, unit name, result)
		if len(sig.Body) > 2 {
			name, _ := sig.Body[2].(string)
			return name
		}
	}
	return ""
}

// pathUnescape undoes sd-bus's object path escaping of a unit name
// ("_2d" is '-'), the inverse of go-systemd's PathBusEscape.
func pathUnescape(s string) string {
	if s == "_" {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && i+2 < len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(c))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
