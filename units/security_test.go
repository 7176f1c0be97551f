package units_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// securityTeam is the team whose units the security test rates: default
// worker hardening, and limits per agent.
var securityTeam = units.TeamUnits{
	Name: "sec", ShortID: "5ec0000a", RestartCooldown: time.Second, StartLimitInterval: time.Hour, StartLimitBurst: 5,
	AgentMemoryMax: 512 << 20, AgentCPUWeight: 50,
}

// Targets of `systemd-analyze --user security` (issue 19): the exposure
// level, 0 (safe) to 10; systemd rates user units as if they ran as root,
// so only the relative values mean much.
const (
	targetLegion = 2.5 // helper and controller
	targetWorker = 5.5 // workers
)

// exposureLine is the last line of `systemd-analyze security UNIT`:
// "→ Overall exposure level for legion.service: 2.2 OK 🙂".
var exposureLine = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+) (\S+)`)

// TestSecurityScores installs Legion's units into a real user manager,
// starts a worker of the team (a transient unit with a worker's name, which
// gets the team's worker drop-in as a worker does), and rates the helper,
// the team's controller and the worker with `systemd-analyze --user
// security`. The scores are held in testdata/security.golden (refresh with
// -update), so a change to any unit's hardening shows; each must meet its
// target. It also reads the worker's MemoryMax= and CPUWeight= back over
// D-Bus: the drop-in reaches a transient unit.
func TestSecurityScores(t *testing.T) {
	_, err := exec.LookPath("systemd-analyze")
	sdtest.Require(t, "systemd-analyze (Debian package systemd) on $PATH", err == nil)
	sd, m, ctx := setup(t)
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	if _, err := units.Install(ctx, units.InstallOptions{UnitDir: unitDir, Bin: sdtest.LegionBinary(t), Defaults: defaults, Teams: []units.TeamUnits{securityTeam}, Web: &units.WebUnits{Listen: freeAddr(t)}, Manager: m}); err != nil {
		t.Fatalf("Install: %v", err)
	}
	worker, err := unitname.WorkerUnit(securityTeam.ShortID, "SEC-1", "implement")
	if err != nil {
		t.Fatal(err)
	}
	u := helperUnit(t, worker, "sleep", nil, units.String("Service", "Type", "notify"))
	if err := m.StartTransient(ctx, u); err != nil {
		t.Fatalf("start %s (hardened by the team's drop-in): %v\n%s", worker, err, sd.Log())
	}
	t.Cleanup(func() { _ = m.Stop(ctx, worker) }) // the manager goes at cleanup anyway

	r, err := m.Resources(ctx, worker)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Controllers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worker %s: %+v; manager's controllers: %+v", worker, r, c)
	if r.MemoryMax != securityTeam.AgentMemoryMax || r.CPUWeight != securityTeam.AgentCPUWeight {
		t.Errorf("worker %s: MemoryMax=%d CPUWeight=%d over D-Bus; want %d and %d from the team's drop-in", worker, r.MemoryMax, r.CPUWeight, securityTeam.AgentMemoryMax, securityTeam.AgentCPUWeight)
	}

	// The hardening is applied, not ignored (as a user manager ignores
	// some directives without PrivateUsers): the running helper and
	// worker have no new privileges, no capabilities, a user namespace of
	// their own, and a system call filter (the helper's @system-service;
	// the worker's only blocks what RestrictRealtime=, RestrictSUIDSGID=,
	// ProtectClock=, ProtectHostname= and ProtectKernelModules= take away).
	if err := m.Start(ctx, unitname.HelperUnit); err != nil {
		t.Fatalf("start %s: %v\n%s", unitname.HelperUnit, err, sd.Log())
	}
	for _, unit := range []string{unitname.HelperUnit, worker} {
		st, err := m.State(ctx, unit)
		if err != nil || st.MainPID == 0 {
			t.Fatalf("state of %s: %v, %v; want it running", unit, st, err)
		}
		checkConfined(t, unit, st.MainPID)
	}

	controller, err := unitname.ControllerUnit(securityTeam.Name)
	if err != nil {
		t.Fatal(err)
	}
	rated := []struct {
		unit, as string // as: the name in the golden file
		target   float64
	}{
		{unitname.HelperUnit, unitname.HelperUnit, targetLegion},
		{unitname.WebUnit, unitname.WebUnit, targetLegion},
		{controller, "legion@TEAM.service", targetLegion},
		{worker, "legion-SHORT-ISSUE-MODE.service", targetWorker},
	}
	var got strings.Builder
	for _, u := range rated {
		level, verdict := exposure(t, sd, u.unit)
		fmt.Fprintf(&got, "%s %s %s\n", u.as, level, verdict)
		if f, err := strconv.ParseFloat(level, 64); err != nil || f > u.target {
			t.Errorf("systemd-analyze --user security %s: exposure %s; want at most %.1f", u.unit, level, u.target)
		}
	}
	golden := filepath.Join("testdata", "security.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read %s (refresh with go test ./units -run TestSecurityScores -update): %v", golden, err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("security scores differ from %s (-want +got; a changed hardening changes them: refresh with -update and update the README):\n%s", golden, diff)
	}
}

// checkConfined checks /proc/PID of a unit's main process: NoNewPrivs 1,
// an empty capability bounding set, a seccomp filter (mode 2), and a user
// namespace other than the test's.
func checkConfined(t *testing.T, unit string, pid uint32) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	for k, want := range map[string]string{"NoNewPrivs": "1", "CapBnd": "0000000000000000", "Seccomp": "2"} {
		if fields[k] != want {
			t.Errorf("%s (pid %d): %s: %q in /proc/PID/status; want %q", unit, pid, k, fields[k], want)
		}
	}
	own, err1 := os.Readlink("/proc/self/ns/user")
	its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err1 != nil || err2 != nil || own == its {
		t.Errorf("%s (pid %d): user namespace %s (%v), the test's %s (%v); want one of its own (PrivateUsers=yes)", unit, pid, its, err2, own, err1)
	}
}

// exposure runs `systemd-analyze --user security UNIT` against the test's
// manager and returns the overall exposure level and its verdict.
func exposure(t *testing.T, sd *sdtest.Manager, unit string) (level, verdict string) {
	t.Helper()
	cmd := exec.Command("systemd-analyze", "--user", "--no-pager", "security", "--", unit)
	cmd.Env = sd.Env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	mt := exposureLine.FindStringSubmatch(o.String())
	if mt == nil || mt[1] != unit {
		t.Fatalf("systemd-analyze --user security %s: %v, no exposure level in its output:\n%s\nstderr:\n%s", unit, err, o.String(), e.String())
	}
	t.Logf("systemd-analyze --user security %s:\n%s", unit, o.String())
	return mt[2], mt[3]
}
