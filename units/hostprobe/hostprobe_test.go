package hostprobe_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/legion-dev/legion/units/hostprobe"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestProbeAllowed: under a private user manager on this host (user
// namespaces allowed), every directive group holds. The resource limits
// and the journal are what this host has (a private manager has no
// journald; the sandbox delegates the memory and pids hierarchies but not
// cpu): they are logged, and none of them is left out of a unit.
func TestProbeAllowed(t *testing.T) {
	bin := sdtest.LegionBinary(t)
	sdtest.Start(t)
	rep := hostprobe.Probe(t.Context(), hostprobe.Options{Bin: bin})
	if rep.Err != nil {
		t.Fatal(rep.Err)
	}
	if len(rep.Results) != len(hostprobe.Groups()) {
		t.Fatalf("%d results for %d groups", len(rep.Results), len(hostprobe.Groups()))
	}
	for _, r := range rep.Results {
		t.Logf("%s: ok %v %s", r.Name, r.OK, r.Why)
		if !r.OK && !r.Kept {
			t.Errorf("%s: not supported under a manager that has it: %s", r.Name, r.Why)
		}
		if !r.OK && r.Why == "" {
			t.Errorf("%s: not supported, with no reason", r.Name)
		}
	}
	if u := rep.Unsupported(); len(u) != 0 {
		t.Errorf("Unsupported() = %v; want none", u)
	}
}

// TestProbeDeniedUserNamespaces: with user namespaces denied to the
// manager (Ubuntu 24.04's AppArmor restriction, simulated with a seccomp
// filter), PrivateUsers is unsupported because its unit failed with
// 217/USER, and the groups that need a user namespace are tried without
// one: this root manager applies them anyway, so they hold.
func TestProbeDeniedUserNamespaces(t *testing.T) {
	bin := sdtest.LegionBinary(t)
	sdtest.StartWith(t, sdtest.Options{DenyUserNamespaces: true})
	rep := hostprobe.Probe(t.Context(), hostprobe.Options{Bin: bin})
	if rep.Err != nil {
		t.Fatal(rep.Err)
	}
	u := rep.Unsupported()
	keys := make([]string, 0, len(u))
	for k := range u {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"PrivateUsers"}) {
		t.Fatalf("unsupported %v; want only PrivateUsers", u)
	}
	if why := u["PrivateUsers"]; !strings.Contains(why, "217/USER") {
		t.Errorf("PrivateUsers: why %q; want it to name 217/USER", why)
	}
	for _, r := range rep.Failed() {
		if r.Name == "user namespaces" && !strings.Contains(r.Fix, "apparmor_restrict_unprivileged_userns") {
			t.Errorf("the fix %q does not name the sysctl", r.Fix)
		}
	}
}

// TestObserve: the checks run in this test process (outside any probe
// unit), each answers without an error, "started" holds, and an unknown
// check is an error naming the known ones.
func TestObserve(t *testing.T) {
	for _, c := range []hostprobe.Check{hostprobe.CheckStarted, hostprobe.CheckUserNS, hostprobe.CheckReadOnlyUsr, hostprobe.CheckSeccomp, hostprobe.CheckJournal} {
		if _, seen, err := hostprobe.Observe(c, ""); err != nil || seen == "" {
			t.Errorf("Observe(%s) = %q, %v", c, seen, err)
		}
	}
	if ok, _, _ := hostprobe.Observe(hostprobe.CheckStarted, ""); !ok {
		t.Error("started does not hold")
	}
	_, _, err := hostprobe.Observe("nope", "")
	if err == nil || !strings.Contains(err.Error(), "userns") {
		t.Errorf("unknown check: %v", err)
	}
}
