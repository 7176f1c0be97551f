package doctor

import (
	"context"
	"strings"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units"
)

// CheckLimits is the name of the check of resource limits.
const CheckLimits = "resource limits"

// checkLimits: does the kernel enforce the memory and CPU limits of
// legion.toml for the user manager (memory_max, cpu_quota of a team's
// slice; agent.memory_max, agent.cpu_weight of each agent)? systemd
// accepts them either way and applies them only with cgroup2's memory and
// cpu controllers in the manager's cgroup. Not enforced is a warning, more
// pointed when a team sets a limit: one runaway agent can then take the
// machine's memory, and nobody is OOM-killed alone.
func checkLimits(ctx context.Context, cfg *config.Config) Check {
	c := Check{Name: CheckLimits}
	m, err := units.Connect(ctx)
	if err != nil {
		c.Status, c.Detail, c.Fix = Warn, "cannot tell: "+err.Error(), "see the "+CheckManager+" check"
		return c
	}
	defer m.Close()
	ctl, err := m.Controllers(ctx)
	if err != nil {
		c.Status, c.Detail, c.Fix = Warn, "cannot tell: "+err.Error(), "see `systemctl --user status`"
		return c
	}
	if ctl.Memory && ctl.CPU {
		c.Status, c.Detail = OK, "enforced: the user manager has cgroup2's memory and cpu controllers (memory_max, cpu_quota, agent.memory_max, agent.cpu_weight apply)"
		return c
	}
	c.Status = Warn
	set := limitsSet(cfg)
	if len(set) > 0 {
		c.Detail = "not enforced here, though legion.toml sets " + strings.Join(set, ", ") + ": " + ctl.Why
	} else {
		c.Detail = "memory_max, cpu_quota, agent.memory_max and agent.cpu_weight would not be enforced here: " + ctl.Why
	}
	c.Fix = "until they are, an agent is not stopped at its memory_max: watch `legion sessions status NAME`; on a machine you control, boot with cgroup2 (systemd.unified_cgroup_hierarchy=1 on the kernel command line)"
	return c
}

// limitsSet names the limit keys some team sets, as "teams.NAME.KEY".
func limitsSet(cfg *config.Config) []string {
	if cfg == nil {
		return nil
	}
	var set []string
	for _, t := range cfg.Teams {
		for _, k := range []struct {
			key string
			on  bool
		}{
			{"memory_max", t.MemoryMax > 0},
			{"cpu_quota", t.CPUQuotaPercent > 0},
			{"agent.memory_max", t.Agent.MemoryMax > 0},
			{"agent.cpu_weight", t.Agent.CPUWeight > 0},
		} {
			if k.on {
				set = append(set, "teams."+tomlKey(t.Name)+"."+k.key)
			}
		}
	}
	return set
}
