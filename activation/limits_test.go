package activation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/units"
)

// agentMemoryMax is agent.memory_max of the limits tests' team: enough for
// a pty-worker and a shell, far less than the runaway agent takes.
const (
	agentMemoryMax     = 64 << 20
	agentMemoryMaxText = "64M"
	agentCPUWeight     = 50
)

// limitsTeam adds the team "lim" with per-agent limits and a custom agent
// that, for an issue whose file ISSUE.runaway exists in the returned
// directory, removes the file and allocates without end (tail of
// /dev/zero keeps one ever-growing line); otherwise it sleeps. So a
// runaway agent runs away once: restarted, it is calm. Then it installs.
func limitsTeam(t *testing.T, e *testEnv, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	e.mustLegion(ctx, "team", "add", "lim", "--workspace", gitWorkspace(t))
	script := `if [ -e "$0/$1.runaway" ]; then rm "$0/$1.runaway"; echo running away; exec tail /dev/zero; fi; echo calm; exec sleep 600`
	argv := fmt.Sprintf(`["/bin/sh", "-c", %q, %q, "{issue}"]`, script, dir)
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion", "legion.toml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "restart_cooldown = \"1s\"\nagent.kind = \"custom\"\nagent.new = %s\nagent.resume = %s\n", argv, argv)
	fmt.Fprintf(f, "agent.memory_max = %q\nagent.cpu_weight = %d\n", agentMemoryMaxText, agentCPUWeight)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	e.mustLegion(ctx, "install")
	return dir
}

// dispatchIssue adds an issue to team lim and dispatches it in plan mode.
func dispatchIssue(t *testing.T, e *testEnv, ctx context.Context, title string) (issue string, res api.SpawnResult) {
	t.Helper()
	issue = strings.TrimSpace(e.mustLegion(ctx, "issue", "add", "lim", title))
	out := e.mustLegion(ctx, "dispatch", "lim", issue, "plan", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("dispatch --json printed %q: %v", out, err)
	}
	return issue, res
}

// status runs `legion sessions status NAME --json`.
func (e *testEnv) status(ctx context.Context, name string) api.Session {
	e.t.Helper()
	var s api.Session
	out := e.mustLegion(ctx, "sessions", "status", name, "--json")
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		e.t.Fatalf("sessions status --json printed %q: %v", out, err)
	}
	return s
}

// waitRunning waits until the session runs, and returns its worker's
// MainPID.
func (e *testEnv) waitRunning(ctx context.Context, res api.SpawnResult) uint32 {
	e.t.Helper()
	var pid uint32
	e.poll(ctx, res.Name+" running", func() (bool, string) {
		st, err := e.mgr.State(ctx, res.Unit)
		if err != nil {
			return false, err.Error()
		}
		pid = st.MainPID
		return st.ActiveState == units.StateActive && pid != 0, st.String()
	})
	return pid
}

// TestAgentLimitsReachWorker: agent.memory_max and agent.cpu_weight of
// legion.toml are MemoryMax= and CPUWeight= of a real worker unit, as the
// manager reports them over D-Bus (through the team's worker drop-in that
// `legion install` writes), and `legion sessions status` shows them with
// the unit's memory and CPU use or why systemd reports none.
func TestAgentLimitsReachWorker(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*waitFor)
	defer cancel()
	limitsTeam(t, e, ctx)
	_, res := dispatchIssue(t, e, ctx, "Calm")
	e.waitRunning(ctx, res)

	r, err := e.mgr.Resources(ctx, res.Unit)
	if err != nil {
		t.Fatal(err)
	}
	if r.MemoryMax != agentMemoryMax || r.CPUWeight != agentCPUWeight {
		t.Errorf("%s: MemoryMax=%d CPUWeight=%d over D-Bus; want %d and %d (agent.memory_max, agent.cpu_weight)", res.Unit, r.MemoryMax, r.CPUWeight, agentMemoryMax, agentCPUWeight)
	}

	s := e.status(ctx, res.Name)
	rs := s.Resources
	switch {
	case rs == nil:
		t.Fatalf("sessions status %s: no resources", res.Name)
	case rs.MemoryMax == nil || *rs.MemoryMax != agentMemoryMax || rs.CPUWeight == nil || *rs.CPUWeight != agentCPUWeight:
		t.Errorf("sessions status %s: resources %+v; want memory_max %d and cpu_weight %d", res.Name, rs, agentMemoryMax, agentCPUWeight)
	case (rs.MemoryBytes == nil || rs.CPUNSec == nil) && rs.NotAccounted == "":
		t.Errorf("sessions status %s: resources %+v: a figure is null and not_accounted does not say why", res.Name, rs)
	case rs.MemoryBytes != nil && rs.NotAccounted != "" && rs.CPUNSec != nil:
		t.Errorf("sessions status %s: resources %+v: every figure is there, yet not_accounted says %q", res.Name, rs, rs.NotAccounted)
	}
	t.Logf("sessions status %s: resources %+v (not accounted: %q)", res.Name, rs, rs.NotAccounted)
	text := e.mustLegion(ctx, "sessions", "status", res.Name)
	if !strings.Contains(text, "memory:") || !strings.Contains(text, "(max 64.0 MiB)") || !strings.Contains(text, "(weight 50)") {
		t.Errorf("sessions status %s printed:\n%s\nwant memory and cpu lines with the limits", res.Name, text)
	}

	// Ended, its unit gone: no figures, and status says why.
	e.mustLegion(ctx, "sessions", "kill", res.Name)
	e.poll(ctx, res.Name+" ended", func() (bool, string) {
		s = e.status(ctx, res.Name)
		return s.State == api.StateExited || s.State == api.StateFailed, string(s.State)
	})
	if rs := s.Resources; rs == nil || rs.MemoryBytes != nil || rs.CPUNSec != nil || rs.NotAccounted == "" {
		t.Errorf("sessions status %s after kill: resources %+v; want no figures and why", res.Name, rs)
	} else {
		t.Logf("after kill: not accounted: %s", rs.NotAccounted)
	}
}

// TestRunawayAgentKilledAlone: one agent that allocates past its
// agent.memory_max is killed by the kernel, alone; systemd restarts its
// worker, which starts the same session again (the same name and session
// ID, one restart more), while its neighbours' workers keep their MainPIDs.
//
// It runs only where the kernel enforces the limit for the user manager:
// cgroup2 with the memory controller in the manager's cgroup, where the
// unit also fails with result oom-kill (systemd reads memory.events), or,
// under units/sandbox on a hybrid host as root, cgroup v1's memory
// controller mounted for the manager (memory.limit_in_bytes of the unit
// set), where the kernel kills the agent with SIGKILL and systemd sees the
// worker fail. Elsewhere it skips, even with CI=true: that is the kernel's
// layout, not a missing prerequisite.
func TestRunawayAgentKilledAlone(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*waitFor)
	defer cancel()
	dir := limitsTeam(t, e, ctx)
	var neighbours []api.SpawnResult
	pids := map[string]uint32{}
	for _, title := range []string{"Calm one", "Calm two"} {
		_, res := dispatchIssue(t, e, ctx, title)
		pids[res.Unit] = e.waitRunning(ctx, res)
		neighbours = append(neighbours, res)
	}

	ctl, err := e.mgr.Controllers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v1 := !ctl.Memory && v1MemoryLimit(pids[neighbours[0].Unit]) == agentMemoryMax
	if !ctl.Memory && !v1 {
		t.Skipf("the kernel does not enforce agent.memory_max for this user manager: %s", ctl.Why)
	}

	issue := strings.TrimSpace(e.mustLegion(ctx, "issue", "add", "lim", "Runaway"))
	if err := os.WriteFile(filepath.Join(dir, issue+".runaway"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var res api.SpawnResult
	out := e.mustLegion(ctx, "dispatch", "lim", issue, "plan", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("dispatch --json printed %q: %v", out, err)
	}
	var s api.Session
	e.poll(ctx, res.Name+" killed and running again", func() (bool, string) {
		s = e.status(ctx, res.Name)
		_, err := os.Stat(filepath.Join(dir, issue+".runaway"))
		return os.IsNotExist(err) && s.Restarts >= 1 && s.State == api.StateRunning, fmt.Sprintf("%+v", s)
	})
	if s.ID != res.ID {
		t.Errorf("after the kill, session %s has ID %s; want the same session %s", res.Name, s.ID, res.ID)
	}
	log := e.sd.Log()
	if ctl.Memory && !strings.Contains(log, res.Unit+": Failed with result 'oom-kill'") {
		t.Errorf("manager log has no %q (cgroup2: systemd reads the OOM kill from memory.events):\n%s", res.Unit+": Failed with result 'oom-kill'", tail(log, 40))
	}
	if v1 && (s.Exit == nil || s.Exit.Signal != "SIGKILL") {
		t.Errorf("the runaway's last exit is %v; want killed by SIGKILL (cgroup v1's OOM killer)", s.Exit)
	}
	for _, n := range neighbours {
		st, err := e.mgr.State(ctx, n.Unit)
		if err != nil {
			t.Fatal(err)
		}
		if st.MainPID != pids[n.Unit] || st.NRestarts != 0 {
			t.Errorf("neighbour %s: %v; want it untouched (MainPID %d, no restart)", n.Unit, st, pids[n.Unit])
		}
	}
}

// v1MemoryLimit is memory.limit_in_bytes of process pid's cgroup v1 memory
// cgroup, 0 when there is none.
func v1MemoryLimit(pid uint32) uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || f[1] != "memory" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.limit_in_bytes"))
		if err != nil {
			return 0
		}
		n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	return 0
}
