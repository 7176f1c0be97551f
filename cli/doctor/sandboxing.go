package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/legion-dev/legion/ptyworker/confine"
	"github.com/legion-dev/legion/units/hostprobe"
)

// CheckSandboxing is the name of the check of what the user manager can
// apply of the directives Legion writes.
const CheckSandboxing = "unit sandboxing"

// checkSandboxing reports the host probe (units/hostprobe): which of the
// directives of Legion's units this user manager cannot apply, so that
// `legion install` leaves them out, with why and the fix; used are the
// keys of the units install writes (nil: all), and a group none of whose
// keys is used is not named. Below Landlock ABI 9 a missing
// InaccessiblePaths= is named with what it lets a sandboxed agent reach.
// The resource limits and the journal have checks of their own.
func checkSandboxing(rep hostprobe.Report, used map[string]bool) Check {
	c := Check{Name: CheckSandboxing}
	if rep.Err != nil {
		c.Status, c.Detail, c.Fix = Warn, "not probed: "+rep.Err.Error(), "see the "+CheckManager+" check"
		return c
	}
	var left, fixes []string
	for _, r := range rep.Failed() {
		keys := r.UsedKeys(used)
		if r.Kept || len(keys) == 0 {
			continue
		}
		left = append(left, strings.Join(keys, ", ")+" ("+r.Name+": "+r.Why+")")
		if !slices.Contains(fixes, r.Fix) {
			fixes = append(fixes, r.Fix)
		}
	}
	// Landlock confines connections to pathname unix sockets from ABI 9;
	// below, the workers' InaccessiblePaths= keeps the session bus and the
	// user manager out of a sandboxed agent's reach.
	if st := confine.Probe(); st.Holds && st.ABI < 9 && slices.ContainsFunc(rep.Failed(), func(r hostprobe.Result) bool { return slices.Contains(r.Keys, "InaccessiblePaths") }) {
		left = append(left, fmt.Sprintf("so an agent under the sandbox policy can reach your D-Bus session bus and the user manager (systemd-run --user runs anything outside the sandbox): Landlock ABI %d confines unix socket connections only from ABI 9", st.ABI))
	}
	if len(left) == 0 {
		var names []string
		for _, r := range rep.Results {
			if !r.Kept && len(r.UsedKeys(used)) > 0 {
				names = append(names, r.Name)
			}
		}
		c.Status, c.Detail = OK, "the user manager applies every directive of Legion's units ("+strings.Join(names, ", ")+")"
		return c
	}
	c.Status = Warn
	c.Detail = "`legion install` leaves out what this user manager cannot apply: " + strings.Join(left, "; ")
	c.Fix = strings.Join(fixes, "; ")
	return c
}
