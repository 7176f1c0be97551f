package units

import (
	"context"
	"fmt"
	"strings"

	godbus "github.com/godbus/dbus/v5"
)

// Values of State.ActiveState (org.freedesktop.systemd1.Unit ActiveState;
// systemd.unit(5) "UNIT STATES").
const (
	StateActive       = "active"
	StateReloading    = "reloading"
	StateInactive     = "inactive"
	StateFailed       = "failed"
	StateActivating   = "activating"
	StateDeactivating = "deactivating"
)

// Values of State.SubState for services that Legion tells apart.
const (
	// SubAutoRestart: the service ended and waits out RestartSec= before
	// systemd starts it again (its ActiveState is activating).
	SubAutoRestart = "auto-restart"
	// SubStopWatchdog: the service is being stopped because its watchdog
	// (WatchdogSec=) was not fed (its ActiveState is deactivating).
	SubStopWatchdog = "stop-watchdog"
	// SubDead: not running.
	SubDead = "dead"
)

// LoadNotFound is the LoadState of a unit the manager has not loaded.
const LoadNotFound = "not-found"

// State is what the manager says about a unit. The field values are
// systemd's (see `systemctl --user show`).
type State struct {
	Name string

	// LoadState is "loaded", "not-found" (no such unit: never started,
	// or a transient unit garbage-collected after it ended), "masked",
	// "error", "bad-setting".
	LoadState string
	// ActiveState is "active", "activating", "deactivating", "reloading",
	// "inactive" or "failed".
	ActiveState string
	// SubState is the unit type's own state: for services "running",
	// "auto-restart", "dead", "failed", ...
	SubState string

	// The rest is read for services only.

	// Result is how the last run ended: "success", "exit-code", "signal",
	// "core-dump", "watchdog", "timeout", "start-limit-hit", ...
	Result string
	// NRestarts counts automatic restarts (Restart=) since the unit was
	// last started by hand.
	NRestarts uint32
	// MainPID is the main process, 0 when there is none.
	MainPID uint32
	// StatusText is the last STATUS= the service sent with sd_notify.
	StatusText string
	// ExecMainCode and ExecMainStatus are how the main process last
	// ended, as waitid(2) reports it: ExecMainCode is a CLD_* code
	// (CLDExited for an exit, and then ExecMainStatus is its exit status;
	// for a signal, the signal's number); both 0 before it ever ended.
	ExecMainCode   int32
	ExecMainStatus int32
}

// CLDExited is ExecMainCode's value for a main process that exited (as
// opposed to one killed by a signal): CLD_EXITED of <signal.h>.
const CLDExited = 1

// ExitedWith reports whether the unit's main process last ended with an
// exit of status code (not by a signal).
func (s State) ExitedWith(code int32) bool {
	return s.ExecMainCode == CLDExited && s.ExecMainStatus == code
}

// Exists reports whether the manager has the unit loaded. A unit that
// does not exist reads LoadState "not-found", ActiveState "inactive": it is
// not running, whatever else was true of an earlier unit of that name.
func (s State) Exists() bool { return s.LoadState != "" && s.LoadState != LoadNotFound }

// Failed reports whether the unit is in the failed state.
func (s State) Failed() bool { return s.ActiveState == StateFailed }

// Gone reports whether the unit is not loaded or has stopped (inactive):
// nothing of it runs, and nothing failed.
func (s State) Gone() bool { return !s.Exists() || s.ActiveState == StateInactive }

// Stopped reports whether nothing of the unit runs and systemd will not
// start it again on its own: it is gone, or failed.
func (s State) Stopped() bool { return s.Gone() || s.Failed() }

// AutoRestart reports whether the unit ended and waits out RestartSec=
// before systemd starts it again (activating/auto-restart).
func (s State) AutoRestart() bool {
	return s.ActiveState == StateActivating && s.SubState == SubAutoRestart
}

func (s State) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s/%s", s.Name, s.LoadState, s.ActiveState, s.SubState)
	if s.Result != "" {
		fmt.Fprintf(&b, " result=%s", s.Result)
	}
	if s.NRestarts != 0 {
		fmt.Fprintf(&b, " restarts=%d", s.NRestarts)
	}
	if s.MainPID != 0 {
		fmt.Fprintf(&b, " pid=%d", s.MainPID)
	}
	if s.StatusText != "" {
		fmt.Fprintf(&b, " status=%q", s.StatusText)
	}
	if s.ExecMainCode == CLDExited {
		fmt.Fprintf(&b, " exit=%d", s.ExecMainStatus)
	}
	return b.String()
}

// NotFound is the state of a unit the manager does not have loaded, as
// `systemctl show` reports it.
func NotFound(name string) State {
	return State{Name: name, LoadState: LoadNotFound, ActiveState: StateInactive, SubState: SubDead}
}

// State reads the unit's state. A unit that is not loaded is not an error:
// its State has Exists() false. State asks for the unit with GetUnit, which
// never loads it (reading properties by object path would load a stub).
func (m *Manager) State(ctx context.Context, name string) (State, error) {
	var st State
	err := m.do(ctx, func(c *conns) error {
		var err error
		st, err = readState(ctx, c.raw, name)
		return err
	})
	if err != nil {
		return State{}, fmt.Errorf("read state of unit %s: %w", name, err)
	}
	return st, nil
}

func readState(ctx context.Context, conn *godbus.Conn, name string) (State, error) {
	var path godbus.ObjectPath
	err := conn.Object(sdDest, sdPath).CallWithContext(ctx, sdManagerIface+".GetUnit", 0, name).Store(&path)
	if dbusErrorName(err) == errNameNoSuch {
		return NotFound(name), nil
	}
	if err != nil {
		return State{}, err
	}
	obj := conn.Object(sdDest, path)
	props, err := getAll(ctx, obj, sdUnitIface)
	if err != nil {
		return State{}, err
	}
	st := State{Name: name}
	if err := storeProps(props, map[string]any{
		"LoadState":   &st.LoadState,
		"ActiveState": &st.ActiveState,
		"SubState":    &st.SubState,
	}); err != nil {
		return State{}, err
	}
	if !st.Exists() {
		// Loaded as a stub by someone else's lookup: same as not loaded.
		return NotFound(name), nil
	}
	if !strings.HasSuffix(name, ".service") {
		return st, nil
	}
	props, err = getAll(ctx, obj, sdServiceIface)
	if err != nil {
		return State{}, err
	}
	if err := storeProps(props, map[string]any{
		"Result":     &st.Result,
		"NRestarts":  &st.NRestarts,
		"MainPID":    &st.MainPID,
		"StatusText": &st.StatusText,
		// systemd.exec(5)'s $EXIT_CODE/$EXIT_STATUS, for a unit that
		// stays loaded after its main process ended.
		"ExecMainCode":   &st.ExecMainCode,
		"ExecMainStatus": &st.ExecMainStatus,
	}); err != nil {
		return State{}, err
	}
	return st, nil
}

func getAll(ctx context.Context, obj godbus.BusObject, iface string) (map[string]godbus.Variant, error) {
	var props map[string]godbus.Variant
	if err := obj.CallWithContext(ctx, dbusPropsIface+".GetAll", 0, iface).Store(&props); err != nil {
		return nil, fmt.Errorf("get %s properties: %w", iface, err)
	}
	return props, nil
}

// storeProps copies the named properties into the pointers, checking types.
func storeProps(props map[string]godbus.Variant, dst map[string]any) error {
	for name, ptr := range dst {
		v, ok := props[name]
		if !ok {
			return fmt.Errorf("property %s missing", name)
		}
		if err := godbus.Store([]any{v.Value()}, ptr); err != nil {
			return fmt.Errorf("property %s: %w", name, err)
		}
	}
	return nil
}
