package doctor

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/capacity"
	"github.com/legion-dev/legion/controller/team"
)

// capacityCheckName names the capacity check of a team.
func capacityCheckName(team string) string { return "capacity of team " + team }

// checkCapacity: can an agent of team t ever start here, and can one now?
// The size the controller expects an agent to take (its agents' learnt
// peak in the team's capacity.json, else agent.memory_max, else 1 GiB, as
// the controller reckons it) must fit in the machine's memory (MemTotal)
// and in the team's slice (memory_max), or no agent starts or the kernel
// kills the first one: a failure. One that does not fit in what is
// available now waits for room: a warning. meminfo is /proc/meminfo's
// path; stateHome is $XDG_STATE_HOME/legion.
func checkCapacity(t config.Team, stateHome, meminfo string) Check {
	c := Check{Name: capacityCheckName(t.Name), Team: t.Name}
	size, from := uint64(capacity.DefaultAgentSize), "the default, no agent of the team has finished yet"
	peaks, err := capacity.ReadPeaks(filepath.Join(team.StateDir(t, stateHome), capacity.PeaksFile))
	learnt, ok := peaks.Expected()
	switch {
	case err == nil && ok && learnt > 0:
		size, from = learnt, "the highest peak of its last agents"
		if m := t.Agent.MemoryMax; m > 0 && learnt > m {
			size, from = m, "agent.memory_max"
		}
	case t.Agent.MemoryMax > 0:
		size, from = t.Agent.MemoryMax, "agent.memory_max"
	}
	data, rerr := os.ReadFile(meminfo)
	total, terr := capacity.MemTotal(meminfo, data)
	avail, aerr := capacity.MemAvailable(meminfo, data)
	if rerr != nil || terr != nil || aerr != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("the machine's memory cannot be read (%v): the controller will not hold dispatches back for memory", firstErr(rerr, terr, aerr))
		c.Fix = "check that " + meminfo + " is readable (a Linux /proc)"
		return c
	}
	sized := fmt.Sprintf("an agent is expected to take %s (%s)", bytesText(size), from)
	limits := ""
	if t.SessionLimit > 0 {
		limits += fmt.Sprintf("; session_limit %d", t.SessionLimit)
	}
	if t.MachineSessionLimit > 0 {
		limits += fmt.Sprintf("; [helper] session_limit %d", t.MachineSessionLimit)
	}
	switch {
	case size > total:
		c.Status, c.Detail = Fail, fmt.Sprintf("%s, more than the machine's memory, %s: no agent of the team can start", sized, bytesText(total))
		c.Fix = "lower agent.memory_max, or run the team on a machine with more memory"
	case t.MemoryMax > 0 && size > t.MemoryMax:
		c.Status, c.Detail = Fail, fmt.Sprintf("%s, more than the team's slice holds (memory_max %s): the kernel kills its agents", sized, bytesText(t.MemoryMax))
		c.Fix = "raise memory_max, or lower agent.memory_max"
	case size > avail:
		c.Status, c.Detail = Warn, fmt.Sprintf("%s; %s of %s is available now: new agents wait for room%s", sized, bytesText(avail), bytesText(total), limits)
		c.Fix = "free memory (stop other programs or agents), or lower agent.memory_max; `legion state` says what waits"
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("%s; %s of %s available%s", sized, bytesText(avail), bytesText(total), limits)
	}
	return c
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// bytesText is n bytes as people read them: "1.5 GiB", "512 MiB".
func bytesText(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
