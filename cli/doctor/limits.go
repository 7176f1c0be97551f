package doctor

import (
	"strings"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/units/hostprobe"
)

// CheckLimits is the name of the check of resource limits.
const CheckLimits = "resource limits"

// checkLimits: does the kernel enforce the memory and CPU limits of
// legion.toml for the user manager (memory_max, cpu_quota of a team's
// slice; agent.memory_max, agent.cpu_weight of each agent)? systemd
// accepts them either way and applies them only where the manager has the
// cgroup controller. The host probe tried them (a unit with MemoryMax= and
// CPUQuota= read its own cgroup's limits). Not enforced is a warning, more
// pointed when a team sets a limit: one runaway agent can then take the
// machine's memory, and nobody is OOM-killed alone.
func checkLimits(rep hostprobe.Report, cfg *config.Config) Check {
	c := Check{Name: CheckLimits}
	if rep.Err != nil {
		c.Status, c.Detail, c.Fix = Warn, "cannot tell: not probed: "+rep.Err.Error(), "see the "+CheckManager+" check"
		return c
	}
	var missing []hostprobe.Result
	for _, r := range rep.Results {
		if r.Check == hostprobe.CheckMemory || r.Check == hostprobe.CheckCPU {
			if !r.OK {
				missing = append(missing, r)
			}
		}
	}
	if len(missing) == 0 {
		c.Status, c.Detail = OK, "enforced: a unit with MemoryMax= and CPUQuota= had them in its cgroup (memory_max, cpu_quota, agent.memory_max, agent.cpu_weight apply)"
		return c
	}
	var why []string
	for _, r := range missing {
		why = append(why, r.Name+" ("+strings.Join(r.Keys, ", ")+"): "+r.Why)
	}
	c.Status = Warn
	if set := limitsSet(cfg); len(set) > 0 {
		c.Detail = "not enforced here, though legion.toml sets " + strings.Join(set, ", ") + ": " + strings.Join(why, "; ")
	} else {
		c.Detail = "not enforced here: " + strings.Join(why, "; ")
	}
	c.Fix = "until they are, an agent is not stopped at its limits: watch `legion sessions status NAME`; " + missing[0].Fix
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
