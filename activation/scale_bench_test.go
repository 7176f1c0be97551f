package activation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/benchreport"
)

// envScaleSessions overrides BenchmarkScale's session count.
const envScaleSessions = "LEGION_BENCH_SESSIONS"

// BenchmarkScale runs n idle sessions (1,000 unless LEGION_BENCH_SESSIONS
// says otherwise; `sleep` agents) on one private user manager and reports,
// each next to a baseline measured in the same run:
//
//   - spawn throughput: n `legion spawn` against n `systemd-run --user` of
//     the same command, in interleaved chunks with the same parallelism,
//     each side until its CLI returned (target: ratio ≤1.2); and what a
//     spawn costs in CPU, the whole machine's (cpu-ms/spawn-<side>, and
//     their ratio spawn-cpu/systemd-run) and by part: the CLI, the
//     helper, the user manager and the unit's processes (see spawnCost);
//   - `sessions list --json` with n sessions (target: <100 ms), against
//     `systemctl --user list-units legion-*` of the same units;
//   - the first coherent list (all n listed running: checked by their
//     workers, or as recovery listed them while it checks them) after a
//     clean stop of the helper (cold start) and after kill -9 of it
//     (target: <500 ms each), against the same with one session, before
//     the n were spawned; and the time until recovery checked every
//     worker (ms/<what>-checked);
//   - the helper's own recovery time (from its log);
//   - idle CPU of all workers (and of the helper) over an interval, from
//     their threads' run time (/proc/<pid>/task/*/schedstat), in % of
//     one core (target: workers ≤5%);
//   - total and per-worker PSS (smaps_rollup);
//   - sessions.watch latency with n sessions: a hook event of one Claude
//     Code session to the event that carries its new state (target:
//     <50 ms), against the same with one session;
//   - the 1-minute load average at the start and the end, since the
//     machine may be shared.
//
// A spawn that fails stops the spawning; the bench then reports how many
// ran and what the error said (the user manager's TasksMax, fd or pid
// limits).
func BenchmarkScale(b *testing.B) {
	n := 1000
	if v := os.Getenv(envScaleSessions); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", envScaleSessions, v)
		}
	}
	const (
		parallel   = 4  // spawns in flight, each side
		chunk      = 50 // spawns per side before the other side's turn
		rounds     = 3  // cold starts and kill -9 each
		hookRounds = 20 // hook-to-event samples
		idleFor    = 30 * time.Second
	)
	e := startEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	sdRun, err := exec.LookPath("systemd-run")
	if err != nil {
		b.Skip("systemd-run not found")
	}
	metric(b, benchreport.LoadAvg(b), "load1-start")
	// Stop the sessions a few at a time before the manager's own cleanup,
	// which gives all of its units together less time than 1,000 take.
	b.Cleanup(func() { stopAll(b, e) })
	e.useShippedSettings(ctx, "RestartSec=") // kill -9: restarted as shipped
	e.list(ctx)                              // start the helper

	// The one Claude Code session whose hook events the watch bench
	// sends, and the baselines with it alone.
	hc := e.client(ctx)
	a := testLaunch("hookscale", "/bin/sleep", "100000")
	a.Agent = "claude"
	if _, err := hc.Spawn(ctx, a); err != nil {
		b.Fatal(err)
	}
	var hookPID int
	poll(b, ctx, "hookscale running", func() (bool, string) {
		s, err := hc.Status(ctx, "hookscale")
		hookPID = s.PID
		return err == nil && s.State == api.StateRunning && hookPID > 0, fmt.Sprint(s, err)
	})
	hookEnv := benchHookEnv(b, hookPID)
	hook1 := hookToEvent(b, ctx, e, hookEnv, "hookscale", hookRounds)
	cold1 := coherentAfter(b, ctx, e, 1, rounds, false, nil, "cold-start-1")

	// Spawn: interleaved chunks, systemd-run first in each, with the CPU
	// each side costs (see spawnCost).
	var sdTook, lgTook time.Duration
	var sdCost, lgCost spawnCost
	manager := ppid(b, e.helperPID(ctx))
	spawned, stopped := 0, ""
	for start := 0; start < n && stopped == ""; start += chunk {
		end := min(start+chunk, n)
		t0 := time.Now()
		if err := sdCost.measure(b, manager, e.helperPID(ctx), func() (time.Duration, error) {
			return spawnRange(ctx, parallel, start, end, func(i int) *exec.Cmd {
				return exec.CommandContext(ctx, sdRun, "--user", "--quiet", "--collect", "--unit", fmt.Sprintf("bench-sd-%04d", i), "--", "/bin/sleep", "100000")
			})
		}); err != nil {
			stopped = "systemd-run: " + err.Error()
			break
		}
		sdTook += time.Since(t0)
		t0 = time.Now()
		if err := lgCost.measure(b, manager, e.helperPID(ctx), func() (time.Duration, error) {
			return spawnRange(ctx, parallel, start, end, func(i int) *exec.Cmd {
				return exec.CommandContext(ctx, e.bin, "spawn", "--name", fmt.Sprintf("s%04d", i), "--", "/bin/sleep", "100000")
			})
		}); err != nil {
			stopped = "legion spawn: " + err.Error()
			break
		}
		lgTook += time.Since(t0)
		spawned = end
	}
	if stopped != "" {
		b.Logf("spawning stopped after %d sessions: %s", spawned, stopped)
	}
	if spawned == 0 {
		b.Fatalf("no session could be spawned: %s", stopped)
	}
	metric(b, float64(spawned), "sessions")
	metric(b, float64(lgTook.Milliseconds()), "ms/legion-spawn-all")
	metric(b, float64(sdTook.Milliseconds()), "ms/systemd-run-all")
	metric(b, float64(lgTook)/float64(sdTook), "spawn/systemd-run")
	sdCost.units = cpuOf(unitPIDs(b, ctx, e, "bench-sd-*.service"))
	lgCost.units = cpuOf(unitPIDs(b, ctx, e, "legion-*-s[0-9][0-9][0-9][0-9]-spawn.service")) // not hookscale
	sdCost.report(b, spawned, "systemd-run")
	lgCost.report(b, spawned, "legion")
	metric(b, float64(lgCost.machine.Busy)/float64(sdCost.machine.Busy), "spawn-cpu/systemd-run")
	// The baseline's units go: they would only load the manager.
	if out, err := exec.CommandContext(ctx, "systemctl", "--user", "stop", "bench-sd-*").CombinedOutput(); err != nil {
		b.Fatalf("stop the systemd-run units: %v: %s", err, out)
	}
	total := spawned + 1

	// list --json, against systemctl's listing of the same units.
	waitCoherent(b, ctx, e, total, time.Now())
	var list, sdList []time.Duration
	for range 11 {
		t0 := time.Now()
		e.mustLegion(ctx, "sessions", "list", "--json")
		list = append(list, time.Since(t0))
		t0 = time.Now()
		if out, err := exec.CommandContext(ctx, "systemctl", "--user", "--no-pager", "list-units", "--all", "legion-*").CombinedOutput(); err != nil {
			b.Fatalf("systemctl list-units: %v: %s", err, out)
		}
		sdList = append(sdList, time.Since(t0))
	}
	vs(b, list, "ms/list-json", sdList, "ms/systemctl-list-units", "list/systemctl")

	// Idle CPU and PSS of every worker.
	workers := workerPIDs(b, ctx, e)
	helper := e.helperPID(ctx)
	time.Sleep(5 * time.Second) // let the spawns' aftermath settle
	w0, h0 := cpuOf(workers), cpuOf([]int{helper})
	t0 := time.Now()
	time.Sleep(idleFor)
	w1, h1 := cpuOf(workers), cpuOf([]int{helper})
	iv := time.Since(t0)
	metric(b, 100*float64(w1-w0)/float64(iv), "%cpu/workers-idle")
	metric(b, 100*float64(h1-h0)/float64(iv), "%cpu/helper-idle")
	pss := pssOf(b, workers)
	metric(b, float64(pss)/(1<<20), "MiB/workers-pss")
	metric(b, float64(pss)/float64(len(workers))/(1<<20), "MiB/worker-pss")
	metric(b, float64(pssOf(b, []int{helper}))/(1<<20), "MiB/helper-pss")

	// sessions.watch with every session.
	hookN := hookToEvent(b, ctx, e, hookEnv, "hookscale", hookRounds)
	vs(b, hookN, "ms/hook-to-event-n", hook1, "ms/hook-to-event-1", "hook-n/hook-1")

	// Cold start and kill -9 with every session.
	coldN := coherentAfter(b, ctx, e, total, rounds, false, workers, "cold-start-n")
	vs(b, coldN, "ms/cold-start-n", cold1, "ms/cold-start-1", "cold-n/cold-1")
	killN := coherentAfter(b, ctx, e, total, rounds, true, workers, "kill-9-n")
	vs(b, killN, "ms/kill-9-n", cold1, "ms/cold-start-1", "kill9-n/cold-1")
	if rec := recoveryTimes(e.helperLog, total); len(rec) > 0 {
		metric(b, ms(benchreport.Median(rec)), "ms/recovery-n")
	}
	metric(b, benchreport.LoadAvg(b), "load1-end")
	metric(b, 0, "ns/op")
}

// metric reports v and logs it too: a bench that fails later still
// says what it measured.
func metric(b *testing.B, v float64, unit string) {
	b.Helper()
	b.ReportMetric(v, unit)
	b.Logf("%s: %.3f", unit, v)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// vs is benchreport.Vs, logged.
func vs(b *testing.B, got []time.Duration, gotUnit string, base []time.Duration, baseUnit, ratioUnit string) {
	b.Helper()
	mg, mb := benchreport.Median(got), benchreport.Median(base)
	metric(b, ms(mg), gotUnit)
	metric(b, ms(mb), baseUnit)
	metric(b, float64(mg)/float64(mb), ratioUnit)
}

// stopAll stops every legion-* worker unit, a few at a time.
func stopAll(b *testing.B, e *testEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	listed, err := e.mgr.List(ctx, "legion-*.service")
	if err != nil {
		b.Errorf("list the worker units: %v", err)
		return
	}
	var g errgroup.Group
	g.SetLimit(8)
	for _, st := range listed {
		if st.Name == "legion.service" || st.Gone() {
			continue
		}
		g.Go(func() error { return e.mgr.Stop(ctx, st.Name) })
	}
	if err := g.Wait(); err != nil {
		b.Errorf("stop the worker units: %v", err)
	}
}

// spawnRange runs cmd(i) for i in [start, end), parallel at a time, each
// to success, and returns the CPU time the commands used (their rusage);
// the first failure is returned with the command's output.
func spawnRange(ctx context.Context, parallel, start, end int, cmd func(i int) *exec.Cmd) (time.Duration, error) {
	g, _ := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	var cpu atomic.Int64
	for i := start; i < end; i++ {
		g.Go(func() error {
			c := cmd(i)
			c.Env = os.Environ()
			out, err := c.CombinedOutput()
			if c.ProcessState != nil {
				cpu.Add(int64(c.ProcessState.UserTime() + c.ProcessState.SystemTime()))
			}
			if err != nil {
				return fmt.Errorf("%s: %w: %s", strings.Join(c.Args, " "), err, bytes.TrimSpace(out))
			}
			return nil
		})
	}
	err := g.Wait()
	return time.Duration(cpu.Load()), err
}

// spawnCost is the CPU time one side of the spawn bench cost, in all
// and by part: the whole machine (busy time in /proc/stat: every process
// and kernel thread, this one too), the CLIs (their rusage), the helper and the
// user manager (their own threads), and the units' processes once they
// all run (the worker with its agent, or systemd-run's command; from
// the fork in the manager on). Both sides run the same command, so what
// legion's units cost over systemd-run's is the worker.
type spawnCost struct {
	machine                     benchreport.MachineTime
	cli, helper, manager, units time.Duration
}

// measure runs spawn (which returns its CLIs' CPU) and adds what it cost.
func (c *spawnCost) measure(b *testing.B, manager, helper int, spawn func() (time.Duration, error)) error {
	b.Helper()
	m0, mg0, h0 := benchreport.MachineNow(b), threadsCPU(manager), threadsCPU(helper)
	cli, err := spawn()
	c.cli += cli
	c.machine = c.machine.Add(benchreport.MachineNow(b).Sub(m0))
	c.manager += threadsCPU(manager) - mg0
	c.helper += threadsCPU(helper) - h0
	return err
}

// report reports the cost per spawn: cpu-ms/spawn-<side>-<part>.
func (c *spawnCost) report(b *testing.B, n int, side string) {
	b.Helper()
	per := func(d time.Duration) float64 { return ms(d) / float64(n) }
	metric(b, per(c.machine.Busy), "cpu-ms/spawn-"+side)
	metric(b, per(c.cli), "cpu-ms/spawn-"+side+"-cli")
	metric(b, per(c.helper), "cpu-ms/spawn-"+side+"-helper")
	metric(b, per(c.manager), "cpu-ms/spawn-"+side+"-manager")
	metric(b, per(c.units), "cpu-ms/spawn-"+side+"-unit")
}

// threadsCPU is the run time of pid's live threads (not its children).
func threadsCPU(pid int) time.Duration {
	var sum time.Duration
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, t := range tasks {
		sum += schedstat(t)
	}
	return sum
}

// ppid is pid's parent.
func ppid(b *testing.B, pid int) int {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	p, err := strconv.Atoi(f[1])
	if err != nil {
		b.Fatalf("/proc/%d/stat: %v", pid, err)
	}
	return p
}

// coherentAfter times, rounds times, the first coherent list (total
// sessions running, total recovered) after a clean stop of the helper,
// or after kill -9 of it (the clock starts at the kill). It also reports
// the median CPU time the new helper spent until then, and with workers
// theirs (what recovery costs, whatever the machine's load), as
// cpu-ms/<what>-helper and cpu-ms/<what>-workers.
func coherentAfter(b *testing.B, ctx context.Context, e *testEnv, total, rounds int, kill bool, workers []int, what string) []time.Duration {
	b.Helper()
	var took, checked, helperCPU, workersCPU []time.Duration
	defer func() {
		metric(b, ms(benchreport.Median(checked)), "ms/"+what+"-checked")
		metric(b, ms(benchreport.Median(helperCPU)), "cpu-ms/"+what+"-helper")
		if len(workers) > 0 {
			metric(b, ms(benchreport.Median(workersCPU)), "cpu-ms/"+what+"-workers")
		}
	}()
	for range rounds {
		w0 := cpuOf(workers)
		var t0 time.Time
		if kill {
			pid := e.helperPID(ctx)
			t0 = time.Now()
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				b.Fatalf("kill -9 helper %d: %v", pid, err)
			}
		} else {
			e.stopHelper(ctx)
			t0 = time.Now()
		}
		took = append(took, waitCoherent(b, ctx, e, total, t0))
		checked = append(checked, waitChecked(b, ctx, e, total, t0))
		workersCPU = append(workersCPU, cpuOf(workers)-w0)
		helperCPU = append(helperCPU, processCPU(b, e.helperPID(ctx)))
	}
	return took
}

// processCPU is the CPU time pid has used since it started, all its
// threads, ended ones included (/proc/<pid>/stat utime + stime).
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command, which is in parentheses.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// waitCoherent lists until total sessions are listed running (checked
// by this helper, spawned by it, or listed by its recovery while it
// checks them), and returns the time since t0.
func waitCoherent(b *testing.B, ctx context.Context, e *testEnv, total int, t0 time.Time) time.Duration {
	b.Helper()
	for {
		out, errOut, err := e.legion(ctx, "sessions", "list", "--json")
		if err != nil {
			b.Fatalf("sessions list: %v: %s", err, errOut)
		}
		d := time.Since(t0)
		running, _ := listCounts(b, out)
		if running == total {
			return d
		}
		if d > 5*waitFor {
			b.Fatalf("no coherent list after %v: %d of %d running", d, running, total)
		}
	}
}

// waitChecked lists until recovery has checked every worker (none is
// listed as checking, total were recovered) and returns the time since
// t0.
func waitChecked(b *testing.B, ctx context.Context, e *testEnv, total int, t0 time.Time) time.Duration {
	b.Helper()
	for {
		var r api.ListResult
		if err := json.Unmarshal([]byte(e.mustLegion(ctx, "sessions", "list", "--json")), &r); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		if r.Checking == 0 && r.Recovery.Recovered >= total {
			return d
		}
		if d > 5*waitFor {
			b.Fatalf("recovery still checking after %v: %+v", d, r.Recovery)
		}
	}
}

// hookToEvent times rounds hook events of the Claude Code session name,
// each from the start of `legion hook` to the sessions.watch event that
// carries the new state.
func hookToEvent(b *testing.B, ctx context.Context, e *testEnv, env []string, name string, rounds int) []time.Duration {
	b.Helper()
	wc := e.client(ctx)
	events := make(chan api.SessionEvent, 4096)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	// Ends when wctx is cancelled, below.
	go func() {
		done <- wc.Watch(wctx, api.WatchArgs{}, func(ev api.SessionEvent) error {
			if ev.Session != nil && ev.Session.Name == name {
				events <- ev
			}
			return nil
		})
	}()
	defer func() { stop(); <-done }()
	payloads := []struct {
		raw   string
		state api.AgentState
	}{
		{`{"hook_event_name":"UserPromptSubmit","prompt":"go"}`, api.AgentWorking},
		{`{"hook_event_name":"Stop","last_assistant_message":"done","background_tasks":[]}`, api.AgentIdle},
	}
	var took []time.Duration
	for j := range rounds {
		p := payloads[j%2]
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, e.bin, "hook")
		cmd.Env, cmd.Stdin = env, strings.NewReader(p.raw)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			b.Fatalf("legion hook: %v: %s", err, out)
		}
		deadline := time.After(waitFor)
	wait:
		for {
			select {
			case ev := <-events:
				if ev.Session.Agent != nil && ev.Session.Agent.State == p.state {
					break wait
				}
			case err := <-done:
				b.Fatalf("the watch stream ended: %v", err)
			case <-deadline:
				b.Fatalf("no event of %s with its agent %s", name, p.state)
			}
		}
		took = append(took, time.Since(t0))
	}
	return took
}

// workerPIDs is the main PID of every legion-* unit that runs.
func workerPIDs(b *testing.B, ctx context.Context, e *testEnv) []int {
	b.Helper()
	return unitPIDs(b, ctx, e, "legion-*.service")
}

// unitPIDs is the main PID of every unit matching pattern that runs,
// but legion.service.
func unitPIDs(b *testing.B, ctx context.Context, e *testEnv, pattern string) []int {
	b.Helper()
	listed, err := e.mgr.List(ctx, pattern)
	if err != nil {
		b.Fatal(err)
	}
	var pids []int
	for _, st := range listed {
		if st.Name == "legion.service" || !unitRuns(st) {
			continue
		}
		full, err := e.mgr.State(ctx, st.Name)
		if err != nil {
			b.Fatal(err)
		}
		if full.MainPID != 0 {
			pids = append(pids, int(full.MainPID))
		}
	}
	return pids
}

// cpuOf sums the run time of every thread of pids and of their children
// (the agents), from /proc/<pid>/task/*/schedstat (ns on a CPU).
func cpuOf(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
		for _, t := range tasks {
			sum += schedstat(t)
			kids, _ := os.ReadFile(t + "/children")
			for _, k := range strings.Fields(string(kids)) {
				ktasks, _ := filepath.Glob("/proc/" + k + "/task/*")
				for _, kt := range ktasks {
					sum += schedstat(kt)
				}
			}
		}
	}
	return sum
}

func schedstat(task string) time.Duration {
	raw, err := os.ReadFile(task + "/schedstat")
	if err != nil {
		return 0 // the thread ended
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns)
}

// pssOf sums the proportional set size of pids, in bytes.
func pssOf(b *testing.B, pids []int) int64 {
	b.Helper()
	var sum int64
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			b.Fatal(err)
		}
		for l := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "Pss:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				sum += kb << 10
			}
		}
	}
	return sum
}
