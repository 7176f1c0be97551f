package units

import (
	"context"
	"math"
	"time"

	godbus "github.com/godbus/dbus/v5"
)

// Unset is what systemd reports for a resource figure it does not have
// (MemoryCurrent= with no memory accounting) and for a limit that is not
// set (MemoryMax=infinity, CPUWeight= unset): UINT64_MAX.
const Unset = math.MaxUint64

// Resources is what the manager says about a service's use of memory and
// CPU and its limits (systemd.resource-control(5)). A figure of Unset
// means systemd reports none: see MemoryAccounting and CPUAccounting, and
// the controllers the manager has (Controllers).
type Resources struct {
	MemoryCurrent uint64        // bytes in the unit's cgroup, Unset when not accounted
	CPUUsage      time.Duration // CPU time of the unit's cgroup; CPUUsageValid false when not accounted
	CPUUsageValid bool
	MemoryMax     uint64 // MemoryMax=, Unset for infinity
	CPUWeight     uint64 // CPUWeight=, Unset when not set (the kernel's default, 100)

	MemoryAccounting bool // MemoryAccounting= of the unit
	CPUAccounting    bool // CPUAccounting= of the unit
}

// Resources reads the resource figures and limits of the service name. A
// unit that is not loaded is an error wrapping ErrNoSuchUnit.
func (m *Manager) Resources(ctx context.Context, name string) (Resources, error) {
	var r Resources
	err := m.do(ctx, func(c *conns) error {
		var path godbus.ObjectPath
		if err := c.raw.Object(sdDest, sdPath).CallWithContext(ctx, sdManagerIface+".GetUnit", 0, name).Store(&path); err != nil {
			return err
		}
		props, err := getAll(ctx, c.raw.Object(sdDest, path), sdServiceIface)
		if err != nil {
			return err
		}
		var cpu uint64
		if err := storeProps(props, map[string]any{
			"MemoryCurrent":    &r.MemoryCurrent,
			"CPUUsageNSec":     &cpu,
			"MemoryMax":        &r.MemoryMax,
			"CPUWeight":        &r.CPUWeight,
			"MemoryAccounting": &r.MemoryAccounting,
			"CPUAccounting":    &r.CPUAccounting,
		}); err != nil {
			return err
		}
		if cpu != Unset {
			r.CPUUsage, r.CPUUsageValid = time.Duration(cpu), true
		}
		return nil
	})
	if err != nil {
		return Resources{}, unitError("read resources of", name, err)
	}
	return r, nil
}
