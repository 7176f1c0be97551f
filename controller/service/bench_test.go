package service_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/internal/benchreport"
	"github.com/legion-dev/legion/internal/followmodel"
)

// BenchmarkPhaseHandoff measures what a finished phase costs: from the
// moment the agent, having added worker-done, ends its turn (its worker
// reports the agent idle on the helper's sessions.watch stream) to the
// next phase's worker running (the same stream), through the real
// controller, helper and manager, with the scripted agent (which ends its
// turns and fires its hooks as Claude Code does). Every handoff of two
// issues (plan → implement → review → retro → finish) is a sample. The
// baseline, in the same run, is `systemd-run --user --wait true` on the
// same manager: one transient unit started and finished. Target: the
// handoff within 2 s.
func BenchmarkPhaseHandoff(b *testing.B) {
	sdRun, err := exec.LookPath("systemd-run")
	if err != nil {
		b.Skip("systemd-run not found")
	}
	var handoffs, baseline []time.Duration
	for range b.N {
		e := start(b, planScript+implementScript+implementDone+approveScript+retroFinishScript, teamOptions{wipLimit: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var mu sync.Mutex
		idle := map[string]time.Time{}    // issue-mode → when its agent's turn ended
		running := map[string]time.Time{} // issue-mode → when its worker first ran
		wctx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			api.FollowSessions(wctx, api.WatchArgs{Team: teamName}, func(ev api.SessionEvent) error {
				if ev.Session == nil {
					return nil
				}
				now := time.Now()
				s := ev.Session
				mu.Lock()
				defer mu.Unlock()
				if s.Agent != nil && s.Agent.State == api.AgentIdle {
					if _, ok := idle[s.Name]; !ok {
						idle[s.Name] = now
					}
				}
				if s.State == api.StateRunning {
					if _, ok := running[s.Name]; !ok {
						running[s.Name] = now
					}
				}
				return nil
			}, func(error) {})
		}()
		ids := []string{e.addIssue(ctx, "First"), e.addIssue(ctx, "Second")}
		e.startController()
		for _, id := range ids {
			e.waitStatus(ctx, id, controller.StatusDone)
		}
		stopWatch()
		<-watched
		modes := []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeRetro, controller.ModeFinish}
		for _, id := range ids {
			for k := range len(modes) - 1 {
				from, to := id+"-"+string(modes[k]), id+"-"+string(modes[k+1])
				t0, ok0 := idle[from]
				t1, ok1 := running[to]
				if !ok0 || !ok1 || t1.Before(t0) {
					b.Fatalf("handoff %s → %s: idle at %v (%v), next running at %v (%v)", from, to, t0, ok0, t1, ok1)
				}
				handoffs = append(handoffs, t1.Sub(t0))
			}
		}
		for range 5 {
			t0 := time.Now()
			if out, err := exec.CommandContext(ctx, sdRun, "--user", "--wait", "-q", "true").CombinedOutput(); err != nil {
				b.Fatalf("systemd-run: %v: %s", err, out)
			}
			baseline = append(baseline, time.Since(t0))
		}
		cancel()
	}
	slices.Sort(handoffs)
	b.Logf("handoffs: %v", handoffs)
	benchreport.Vs(b, handoffs, "ms/handoff", baseline, "ms/systemd-run", "handoff/systemd-run")
	fmt.Printf("ms/handoff: median %v over %d; ms/systemd-run: median %v over %d\n",
		benchreport.Median(handoffs), len(handoffs), benchreport.Median(baseline), len(baseline))
	b.ReportMetric(float64(handoffs[len(handoffs)-1].Microseconds())/1000, "ms/handoff-max")
}

// BenchmarkDispatchToFirstCommand measures what Legion adds before an
// agent does its job: for each kind, from `legion dispatch` of a planner
// (set up by the README's quick start, default policy, the real CLI
// against its fake API in follow mode) to the moment the agent's first
// tracker command (legion issue show, step 1 of its instructions) has
// run, seen as the API's next request. The baseline, in the same run, is
// a bare start of the same CLI with the same prepared argv and
// environment, straight from this process in a PTY, with no helper, unit
// or worker, to the same moment. Three samples of each; medians and the
// ratio per kind.
func BenchmarkDispatchToFirstCommand(b *testing.B) {
	for _, kind := range []config.AgentKind{config.AgentClaude, config.AgentCodex, config.AgentGemini, config.AgentOpencode} {
		b.Run(string(kind), func(b *testing.B) {
			var viaLegion, bare []time.Duration
			for range b.N {
				f := startFollowed(b, kind, followmodel.Traits{})
				f.team.Legion = f.bin
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				// No controller: it would dispatch the bare issues' planners too.
				for i := range 3 {
					// Through Legion: the dispatch of a planner.
					id := f.addIssue(ctx, fmt.Sprintf("Through Legion %d", i))
					t0 := time.Now()
					f.legion(ctx, "dispatch", teamName, id, "plan")
					viaLegion = append(viaLegion, f.waitStep(ctx, id, controller.ModePlan, 1).Sub(t0))

					// Bare: the same CLI, argv and environment, started here.
					id = f.addIssue(ctx, fmt.Sprintf("Bare %d", i))
					d, err := f.team.PlanDispatch(ctx, id, controller.ModePlan, f.sd.Home)
					if err != nil {
						b.Fatal(err)
					}
					cmd := exec.CommandContext(ctx, d.ArgvNew[0], d.ArgvNew[1:]...)
					cmd.Dir = d.Cwd
					cmd.Env = append(append(os.Environ(), f.managerEnv...), append(d.Env, "LEGION_SESSION="+d.SessionID.String())...)
					t0 = time.Now()
					ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
					if err != nil {
						b.Fatalf("start %s: %v", d.ArgvNew[0], err)
					}
					go io.Copy(io.Discard, ptmx)
					bare = append(bare, f.waitStep(ctx, id, controller.ModePlan, 1).Sub(t0))
					syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its process group (pty.Start: a session of its own)
					cmd.Wait()
					ptmx.Close()
				}
				cancel()
			}
			k := string(kind)
			benchreport.Vs(b, viaLegion, k+"_dispatch_ms", bare, k+"_bare_ms", k+"_dispatch_vs_bare")
		})
	}
}

// waitStep waits until the fake API saw issue's phase mode go past step
// and returns when.
func (f *followed) waitStep(ctx context.Context, issue string, mode controller.Mode, step int) time.Time {
	f.t.Helper()
	for {
		if t, ok := f.stepDone(issue, mode, step); ok {
			return t
		}
		if ctx.Err() != nil {
			f.t.Fatalf("%s %s: step %d never ran: %v", issue, mode, step, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
