package doctor

import (
	"slices"
	"strings"

	"github.com/legion-dev/legion/units/hostprobe"
)

// CheckSandboxing is the name of the check of what the user manager can
// apply of the directives Legion writes.
const CheckSandboxing = "unit sandboxing"

// checkSandboxing reports the host probe (units/hostprobe): which of the
// directives of Legion's units this user manager cannot apply, so that
// `legion install` leaves them out, with why and the fix. The resource
// limits and the journal have checks of their own.
func checkSandboxing(rep hostprobe.Report) Check {
	c := Check{Name: CheckSandboxing}
	if rep.Err != nil {
		c.Status, c.Detail, c.Fix = Warn, "not probed: "+rep.Err.Error(), "see the "+CheckManager+" check"
		return c
	}
	var left, fixes []string
	for _, r := range rep.Failed() {
		if r.Kept {
			continue
		}
		left = append(left, strings.Join(r.Keys, ", ")+" ("+r.Name+": "+r.Why+")")
		if !slices.Contains(fixes, r.Fix) {
			fixes = append(fixes, r.Fix)
		}
	}
	if len(left) == 0 {
		var names []string
		for _, r := range rep.Results {
			if !r.Kept {
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
