package systemtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units/unitname"
)

// exposureLine is the last line of `systemd-analyze security UNIT`.
var exposureLine = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+) (\S+)`)

// TestHardeningAsUser: as an ordinary user, the hardened helper,
// controller and worker run (an issue's plan phase under the enabled
// legion@web), each confined as its unit says (no new privileges, no
// capabilities, a system call filter, a user namespace of its own), and
// `systemd-analyze --user security` rates them as units/testdata/
// security.golden says (the scores the units tests record against a bare
// user manager).
func TestHardeningAsUser(t *testing.T) {
	t.Parallel()
	s := bootLegion(t, options{linger: true, script: longPlan})
	id := s.setUpTeam()
	s.login("systemctl", "--user", "start", "legion@"+teamName)
	worker, workerPID := s.workerUnit(id, controller.ModePlan)
	controllerUnit, err := unitname.ControllerUnit(teamName)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct{ unit, pid string }{
		{unitname.HelperUnit, s.unitShow(unitname.HelperUnit, "MainPID")},
		{controllerUnit, s.unitShow(controllerUnit, "MainPID")},
		{worker, workerPID},
	} {
		status, err := s.asUser("cat", "/proc/"+u.pid+"/status")
		if err != nil {
			t.Fatalf("status of %s (pid %s): %v", u.unit, u.pid, err)
		}
		for _, want := range []string{"NoNewPrivs:\t1", "CapBnd:\t0000000000000000", "Seccomp:\t2"} {
			if !strings.Contains(status, want+"\n") {
				t.Errorf("%s (pid %s): /proc/PID/status has no %q:\n%s", u.unit, u.pid, want, status)
			}
		}
		ns, err := s.asUser("sh", "-c", `readlink /proc/"$1"/ns/user /proc/self/ns/user`, "sh", u.pid)
		if f := strings.Fields(ns); err != nil || len(f) != 2 || f[0] == f[1] {
			t.Errorf("%s (pid %s): user namespaces %q (%v); want one of its own (PrivateUsers=yes)", u.unit, u.pid, ns, err)
		}
	}

	var got strings.Builder
	for _, u := range []struct{ unit, as string }{
		{unitname.HelperUnit, unitname.HelperUnit},
		{unitname.WebUnit, unitname.WebUnit},
		{controllerUnit, "legion@TEAM.service"},
		{worker, "legion-SHORT-ISSUE-MODE.service"},
	} {
		out, err := s.asUser("systemd-analyze", "--user", "--no-pager", "security", "--", u.unit)
		m := exposureLine.FindStringSubmatch(out)
		if m == nil || m[1] != u.unit {
			t.Fatalf("systemd-analyze --user security %s: %v, no exposure level:\n%s", u.unit, err, out)
		}
		fmt.Fprintf(&got, "%s %s %s\n", u.as, m[2], m[3])
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "units", "testdata", "security.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("security scores as an ordinary user on a booted system differ from units/testdata/security.golden (-want +got):\n%s", diff)
	}
	t.Logf("scores as user %s:\n%s", user, got.String())
}
