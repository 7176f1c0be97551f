package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/capacity"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/unitname"
)

// TestSessionLimitWaitsForRoom: a team with session_limit = 1 (and a WIP
// limit of 2, so that the WIP limit holds nothing back) and two Todo
// issues under legion@demo. While the first issue's planner runs, the
// second waits for room: `legion state` says so, in its reason and its
// decision's gate, and it has no worker. Once the first issue is done,
// the second is dispatched and goes to Done as well. Meanwhile the
// running units' oom_score_adj are as units.AgentOOMScoreAdjust says:
// the agent's worker and the agent raised, the helper and the controller
// at the manager's own value, and the controller learns the agents' peak
// memory into capacity.json.
func TestSessionLimitWaitsForRoom(t *testing.T) {
	// The first planner waits for the test to release it.
	script := "if-env LEGION_MODE=plan once run sh -c \"until [ -e $HOME/release ]; do sleep 0.2; done\"\n" +
		planScript + implementScript + implementDone + approveScript + retroFinishScript
	e := start(t, script, teamOptions{wipLimit: 2, staleAfter: "2m", extra: "session_limit = 1\n"})
	release := filepath.Join(e.sd.Home, "release")
	ctx := testCtx(t)
	first := e.addIssue(ctx, "Write a file first")
	second := e.addIssue(ctx, "Write a file second")
	e.startController()

	planner := workerUnit(t, first, controller.ModePlan)
	e.waitUnit(ctx, first+"'s planner running", planner, running)
	var d controller.Decision
	e.poll(ctx, second+" waiting for room in legion state", func() (bool, string) {
		d = e.decision(ctx, second)
		return d.Room != nil, fmt.Sprintf("%s: %s", d.Action, d.Reason)
	})
	if d.Action != controller.ActionSkip || d.Room.Gate != controller.GateTeamSessions ||
		!strings.HasPrefix(d.Reason, "waiting for room: session_limit 1 reached") {
		t.Errorf("legion state for %s: %s (%s), room %+v; want a skip waiting for room at session_limit 1", second, d.Action, d.Reason, d.Room)
	}
	text := e.legion(ctx, "state", teamName)
	if !strings.Contains(text, "waiting for room (not stalled; dispatched once there is room): "+second) {
		t.Errorf("legion state printed:\n%s\nwant %s listed as waiting for room", text, second)
	}
	for _, s := range e.workers(ctx) {
		if strings.Contains(s.Name, strings.ReplaceAll(second, "-", `\x2d`)) {
			t.Errorf("%s has a worker %s while it waits for room", second, s.Name)
		}
	}

	e.assertOOMScores(ctx, planner)

	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.assertFinished(ctx, first, first+".txt", "impl "+first)
	e.assertFinished(ctx, second, second+".txt", "impl "+second)

	// The controller learnt from the agents it saw end.
	p, err := capacity.ReadPeaks(filepath.Join(e.team.StateDir, capacity.PeaksFile))
	if err != nil {
		t.Fatal(err)
	}
	if peak, ok := p.Expected(); !ok || peak == 0 {
		t.Errorf("%s after two issues: %+v; want the finished agents' peaks", capacity.PeaksFile, p)
	} else {
		var rep controller.Report
		if err := json.Unmarshal([]byte(e.legion(ctx, "state", teamName, "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Room.AgentSizeFrom != controller.SizeLearnt || rep.Room.AgentSize != peak {
			t.Errorf("legion state's room %+v; want the learnt size %d", rep.Room, peak)
		}
		t.Logf("learnt agent size: %s from %d finished agents", controller.Bytes(peak), len(p.Finished))
	}
}

// assertOOMScores checks /proc/PID/oom_score_adj of the running units:
// the worker unit of an agent and the agent under it raised to
// units.AgentOOMScoreAdjust, Legion's helper and controller left at the
// manager's own value, which is below.
func (e *env) assertOOMScores(ctx context.Context, worker string) {
	e.t.Helper()
	ctl, _ := unitname.ControllerUnit(teamName)
	mainPID := func(unit string) int {
		st, err := e.mgr.State(ctx, unit)
		if err != nil || st.MainPID == 0 {
			e.t.Fatalf("%s: %v, %v; want it running", unit, st, err)
		}
		return int(st.MainPID)
	}
	manager := oomScoreAdj(e.t, os.Getpid()) // the sandbox's manager runs with the test's
	for unit, want := range map[string]int{unitname.HelperUnit: manager, ctl: manager, worker: units.AgentOOMScoreAdjust} {
		pid := mainPID(unit)
		if got := oomScoreAdj(e.t, pid); got != want {
			e.t.Errorf("%s (PID %d): oom_score_adj %d; want %d", unit, pid, got, want)
		}
		if unit != worker {
			continue
		}
		// A Go program's children are listed under the thread that forked.
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
		var f []string
		for _, task := range tasks {
			kids, err := os.ReadFile(task)
			if err != nil {
				e.t.Fatal(err)
			}
			f = append(f, strings.Fields(string(kids))...)
		}
		if len(f) == 0 {
			e.t.Fatalf("the worker %s (PID %d) has no agent process", unit, pid)
		}
		agent, _ := strconv.Atoi(f[0])
		if got := oomScoreAdj(e.t, agent); got != units.AgentOOMScoreAdjust {
			e.t.Errorf("the agent of %s (PID %d): oom_score_adj %d; want %d", unit, agent, got, units.AgentOOMScoreAdjust)
		}
	}
}

func oomScoreAdj(t testing.TB, pid int) int {
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

// TestMemoryGate: a team whose expected agent size (agent.memory_max,
// before any agent finished) is above the machine's MemAvailable
// dispatches nothing: `legion state --apply`, the controller's tick, says
// its Todo issue waits for room, with the memory available and the size
// expected, and starts no worker. With agent.memory_max lowered to what
// fits, the same tick dispatches the planner.
func TestMemoryGate(t *testing.T) {
	e := start(t, planScript, teamOptions{wipLimit: 1, staleAfter: "2m", extra: "agent.memory_max = \"64T\"\n"})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Needs more memory than there is")
	for range 3 {
		e.legion(ctx, "state", teamName, "--apply")
	}
	d := e.decision(ctx, id)
	if d.Room == nil || d.Room.Gate != controller.GateMemory || !strings.HasPrefix(d.Reason, "waiting for room: ") ||
		!strings.Contains(d.Reason, " available, agents here may take up to 64 TiB (agent.memory_max)") {
		t.Errorf("legion state for %s: %s (%s), room %+v; want it waiting for memory", id, d.Action, d.Reason, d.Room)
	}
	if ws := e.workers(ctx); len(ws) != 0 {
		t.Errorf("workers %v started while the issue waits for memory; want none", ws)
	}
	t.Logf("%s: %s", id, d.Reason)

	cfg, err := os.ReadFile(e.configPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), `agent.memory_max = "64T"`, `agent.memory_max = "256M"`, 1))
	if err := os.WriteFile(e.configPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	e.legion(ctx, "state", teamName, "--apply")
	e.waitUnit(ctx, id+"'s planner started once memory fits", workerUnit(t, id, controller.ModePlan), func(s units.State) bool {
		return s.ActiveState != "inactive" || s.NRestarts > 0
	})
}

// TestSlicePressureKillsTheAgent: the team's slice is limited to 192 MiB
// (memory_max) and its planner's first run allocates without end. The
// kernel's OOM killer, acting inside the slice, where legion@demo runs
// too, picks the agent's process (oom_score_adj 500) and never the
// controller: the controller keeps its MainPID and restarts, the slice
// records the kill, and the issue still goes to Done (the worker resumes
// the agent, which does not run away twice; the next phases start though
// the learnt size no longer fits the slice, because no agent of the team
// runs to free room in it).
//
// It runs only where the kernel enforces the slice's MemoryMax= for the
// user manager (cgroup2 with the memory controller delegated, or the v1
// memory hierarchy units/sandbox mounts on a hybrid host); elsewhere it
// skips, even with CI=true: that is the kernel's layout, not a missing
// prerequisite.
func TestSlicePressureKillsTheAgent(t *testing.T) {
	script := "if-env LEGION_MODE=plan run sh -c \"if [ ! -e $HOME/ran-away ]; then touch $HOME/ran-away; exec tail /dev/zero; fi\"\n" +
		planScript + implementScript + implementDone + approveScript + retroFinishScript
	e := start(t, script, teamOptions{wipLimit: 1, staleAfter: "2m", extra: "memory_max = \"192M\"\n"})
	ctx := testCtx(t)
	id := e.addIssue(ctx, "Run away once")
	e.startController()
	ctl, _ := unitname.ControllerUnit(teamName)
	var before units.State
	e.poll(ctx, ctl+" running", func() (bool, string) {
		var err error
		before, err = e.mgr.State(ctx, ctl)
		return err == nil && before.MainPID != 0, fmt.Sprint(before, err)
	})
	events, limit := sliceOOMFiles(t, int(before.MainPID))
	if limit != 192<<20 {
		t.Skipf("the kernel does not enforce the team's memory_max for this user manager (slice limit %d)", limit)
	}
	e.assertFinished(ctx, id, id+".txt", "impl "+id)
	if _, err := os.Stat(filepath.Join(e.sd.Home, "ran-away")); err != nil {
		t.Fatalf("the planner never ran away: %v", err)
	}
	if n := oomKills(t, events); n < 1 {
		t.Errorf("%s: %d; want the kernel to have enforced the slice's limit", events, n)
	}
	_, sid := e.sessionFile(id, controller.ModePlan)
	if tr := e.transcript(sid); !strings.Contains(tr, "run sh: signal: killed") {
		t.Errorf("the planner's transcript has no \"run sh: signal: killed\" (the runaway killed):\n%s", tail(tr, 20))
	}
	after, err := e.mgr.State(ctx, ctl)
	if err != nil {
		t.Fatal(err)
	}
	if after.MainPID != before.MainPID || after.NRestarts != before.NRestarts {
		t.Errorf("%s after the OOM kill: %v; want it untouched (before: %v)", ctl, after, before)
	}
}

// sliceOOMFiles are, for the process pid in a team's slice as this
// process sees the cgroups, the slice's file that counts how the kernel
// enforced its limit (see oomKills) and the limit in bytes (0 when
// unreadable).
func sliceOOMFiles(t *testing.T, pid int) (events string, limit uint64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var dir, limitFile string
		switch {
		case f[1] == "memory":
			dir = filepath.Join(capacity.CgroupRoot, "memory", filepath.Dir(f[2]))
			// v1 counts an OOM kill in the victim's own cgroup, gone
			// with its unit's run; the slice counts that its limit was hit.
			events, limitFile = filepath.Join(dir, "memory.failcnt"), "memory.limit_in_bytes"
		case f[0] == "0" && f[1] == "":
			dir = filepath.Join(capacity.CgroupRoot, filepath.Dir(f[2]))
			events, limitFile = filepath.Join(dir, "memory.events"), "memory.max"
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, limitFile))
		if err != nil {
			continue
		}
		limit, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if limit != 0 {
			return events, limit
		}
	}
	return "", 0
}

// oomKills is what a slice's file says of the kernel enforcing its
// limit: the oom_kill count of cgroup2's memory.events (hierarchical), or
// cgroup v1's memory.failcnt, how often the limit was hit.
func oomKills(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) == "memory.failcnt" {
		n, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return n
	}
	for _, line := range strings.Split(string(data), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			v, _ := strconv.Atoi(n)
			return v
		}
	}
	t.Fatalf("%s has no oom_kill line:\n%s", path, data)
	return 0
}
