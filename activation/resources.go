package activation

import (
	"context"
	"errors"
	"strings"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/units"
)

// resources reads the memory and CPU figures and limits of a session's
// worker unit for sessions.status. It never fails the status: what cannot
// be read is null, with the reason in NotAccounted.
func (h *Helper) resources(ctx context.Context, unit string, state api.State) *api.Resources {
	r, err := h.mgr.Resources(ctx, unit)
	if err != nil {
		why := "the worker unit is not loaded (the session ended)"
		if !errors.Is(err, units.ErrNoSuchUnit) {
			why = "cannot read the unit: " + err.Error()
		}
		return &api.Resources{NotAccounted: why}
	}
	out := &api.Resources{}
	if r.MemoryMax != units.Unset {
		out.MemoryMax = &r.MemoryMax
	}
	if r.CPUWeight != units.Unset {
		out.CPUWeight = &r.CPUWeight
	}
	if r.MemoryCurrent != units.Unset {
		out.MemoryBytes = &r.MemoryCurrent
	}
	if r.CPUUsageValid {
		n := uint64(r.CPUUsage)
		out.CPUNSec = &n
	}
	var why []string
	switch {
	case out.MemoryBytes != nil && out.CPUNSec != nil:
		return out
	case state == api.StateExited || state == api.StateFailed:
		why = append(why, "the unit is not running")
	default:
		if out.MemoryBytes == nil && !r.MemoryAccounting {
			why = append(why, "memory: MemoryAccounting=no for the unit")
		}
		if out.CPUNSec == nil && !r.CPUAccounting {
			why = append(why, "CPU: CPUAccounting=no for the unit")
		}
		if c, err := h.mgr.Controllers(ctx); err == nil && c.Why != "" {
			why = append(why, c.Why)
		}
		if len(why) == 0 {
			why = append(why, "systemd reports no figure for the unit's cgroup")
		}
	}
	out.NotAccounted = strings.Join(why, "; ")
	return out
}
