package units_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/legion-dev/legion/units"
)

// TestOOMScoreAdjust: under a real user manager, a transient service with
// OOMScoreAdjust= runs at that value when it raises the manager's own,
// and one that asks for less than the kernel lets this manager's
// processes go to (below the floor a process with CAP_SYS_RESOURCE last
// set, oom_score_adj_min, when the manager lacks that capability, as an
// unprivileged user's does) is not refused by systemd: it starts, at the
// value it inherited. A shell of the test's, under the same floor, shows
// which of the two the kernel does.
func TestOOMScoreAdjust(t *testing.T) {
	_, m, ctx := setup(t)
	own := readOOMScoreAdj(t, os.Getpid()) // the manager's, inherited from the test
	lower := max(own-100, -1000)
	err := exec.Command("sh", "-c", fmt.Sprintf("echo %d > /proc/self/oom_score_adj", lower)).Run()
	kernelLets := err == nil
	t.Logf("oom_score_adj %d here; lowering to %d in a child: allowed %v (%v)", own, lower, kernelLets, err)

	for _, tc := range []struct {
		name string
		adj  int32
		want int
	}{
		{"legion-test-oom-raise.service", units.AgentOOMScoreAdjust, units.AgentOOMScoreAdjust},
		{"legion-test-oom-lower.service", int32(lower), map[bool]int{true: lower, false: own}[kernelLets]},
	} {
		u := helperUnit(t, tc.name, "sleep", nil, units.String("Service", "Type", "notify"), units.Int32("Service", "OOMScoreAdjust", tc.adj))
		if err := m.StartTransient(ctx, u); err != nil {
			t.Fatalf("StartTransient(%s) with OOMScoreAdjust=%d: %v", tc.name, tc.adj, err)
		}
		st := waitState(t, ctx, m, tc.name, "running", func(s units.State) bool { return s.ActiveState == units.StateActive && s.MainPID != 0 })
		if got := readOOMScoreAdj(t, int(st.MainPID)); got != tc.want {
			t.Errorf("%s with OOMScoreAdjust=%d runs at oom_score_adj %d; want %d", tc.name, tc.adj, got, tc.want)
		}
	}
}

func readOOMScoreAdj(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("/proc/%d/oom_score_adj: %v", pid, err)
	}
	return n
}
