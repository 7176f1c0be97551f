package service_test

import (
	"context"
	"fmt"
	"github.com/legion-dev/legion/internal/benchreport"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
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
