package activation

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/benchreport"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// BenchmarkKubeScale runs n sessions (1,000 unless LEGION_BENCH_SESSIONS
// says otherwise) on a real control plane with 100 kwok nodes, then n on
// a private user manager, through one helper, and reports each figure
// against the same under systemd:
//
//   - spawn: the helper's spawn answer, 8 at a time (kube-spawn-ms vs
//     systemd-spawn-ms);
//   - sessions.list with the n sessions (kube-list-ms vs systemd-list-ms);
//     the cluster's are read from the engine's informers, so a list makes
//     no request to the API server;
//   - sessions.watch: a run's end to the event that says so (a pod's end
//     reported as a kubelet would, against the kill of a unit's agent);
//   - the 1-minute load average at the end (the machine may be shared).
//
// The controller's tick and the API requests it makes per tick and per
// dispatch are controller/service's BenchmarkKubeTick (it needs a team,
// its tracker and the controller's own tick).
func BenchmarkKubeScale(b *testing.B) {
	n := 1000
	if v := os.Getenv(envScaleSessions); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive count", envScaleSessions, v)
		}
	}
	c := kubetest.Start(b, kubetest.Options{Nodes: 100})
	const ns = "legion-bench"
	kubeNamespace(b, c, ns, n)
	ip := startInProcess(b, true, Options{KubeBinary: sdtest.KubeBinary(b), Logger: slog.New(slog.DiscardHandler)})
	cl := ip.client(b)
	ctx := b.Context()

	ev := newEventTimes(b, ip)

	kube := func(i int) api.SpawnArgs { return kubeLaunch(c, ns, fmt.Sprintf("BENCH-%d", i), "plan") }
	unit := func(i int) api.SpawnArgs {
		a := testLaunch(fmt.Sprintf("unit-%d", i), "/bin/sleep", "100000")
		a.Cooldown = new(api.Duration(time.Hour)) // an ended run stays ended while measured
		return a
	}
	kubeSpawn := spawnAll(b, ctx, cl, n, kube)
	// Every claim bound to a volume, every pod scheduled and running: the
	// persistent volume controller binds a thousand claims in minutes on
	// 2 cores.
	waitfor.Check(b, 15*time.Minute, fmt.Sprintf("%d sessions on the cluster running", n), func() error {
		res, err := cl.List(ctx)
		if err != nil {
			return err
		}
		running := 0
		for _, s := range res.Sessions {
			if s.Engine == api.EngineKubernetes && s.State == api.StateRunning {
				running++
			}
		}
		if running < n {
			return fmt.Errorf("%d running", running)
		}
		return nil
	})
	kubeList := listTimes(b, ctx, cl, n, 7)
	var kubeEvent []time.Duration
	for r := range 5 {
		a := kube(r)
		pods := podsOf(b, c, ns, a.ID)
		t0 := time.Now()
		c.EndPod(b, ns, pods[len(pods)-1].Name, 1)
		kubeEvent = append(kubeEvent, ev.wait(b, a.Name, t0))
	}
	if _, err := cl.TeamStop(ctx, api.TeamStopArgs{Team: config.AdhocTeam, Short: config.AdhocTeamID.String()[:8]}); err != nil {
		b.Fatal(err)
	}

	unitSpawn := spawnAll(b, ctx, cl, n, unit)
	unitList := listTimes(b, ctx, cl, n, 7)
	var unitEvent []time.Duration
	for r := range 5 {
		a := unit(r)
		s, err := cl.Status(ctx, a.Name)
		if err != nil || s.PID == 0 {
			b.Fatalf("status of %s: %+v, %v", a.Name, s, err)
		}
		t0 := time.Now()
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		unitEvent = append(unitEvent, ev.wait(b, a.Name, t0))
	}
	benchreport.Vs(b, kubeSpawn, "kube-spawn-ms", unitSpawn, "systemd-spawn-ms", "spawn-kube/systemd")
	benchreport.Vs(b, kubeList, "kube-list-ms", unitList, "systemd-list-ms", "list-kube/systemd")
	benchreport.Vs(b, kubeEvent, "kube-event-ms", unitEvent, "systemd-event-ms", "event-kube/systemd")
	b.ReportMetric(float64(n), "sessions")
	b.ReportMetric(benchreport.LoadAvg(b), "load1-end")
	if _, err := cl.TeamStop(ctx, api.TeamStopArgs{Team: config.AdhocTeam, Short: config.AdhocTeamID.String()[:8]}); err != nil {
		b.Error(err)
	}
}

// spawnAll spawns a(0) … a(n-1), 8 at a time, and returns each answer's
// time.
func spawnAll(b *testing.B, ctx context.Context, cl *api.Client, n int, a func(int) api.SpawnArgs) []time.Duration {
	b.Helper()
	times := make([]time.Duration, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			c, err := cl.Redial(gctx)
			if err != nil {
				return err
			}
			defer c.Close()
			t0 := time.Now()
			if _, err := c.Spawn(gctx, a(i)); err != nil {
				return fmt.Errorf("spawn %d: %w", i, err)
			}
			times[i] = time.Since(t0)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return times
}

// listTimes times rounds sessions.list calls, each of which must list at
// least n sessions.
func listTimes(b *testing.B, ctx context.Context, cl *api.Client, n, rounds int) []time.Duration {
	b.Helper()
	var out []time.Duration
	for range rounds {
		t0 := time.Now()
		res, err := cl.List(ctx)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(t0))
		if len(res.Sessions) < n {
			b.Fatalf("listed %d sessions; want at least %d", len(res.Sessions), n)
		}
	}
	return out
}

// eventTimes records when sessions.watch said each session's run ended.
type eventTimes struct {
	mu    sync.Mutex
	ended map[string]time.Time
}

func newEventTimes(b *testing.B, ip *inProcess) *eventTimes {
	e := &eventTimes{ended: map[string]time.Time{}}
	go ip.client(b).Watch(b.Context(), api.WatchArgs{}, func(ev api.SessionEvent) error {
		if s := ev.Session; s != nil && s.Exit != nil && s.State != api.StateRunning {
			e.mu.Lock()
			if _, ok := e.ended[s.Name]; !ok {
				e.ended[s.Name] = time.Now()
			}
			e.mu.Unlock()
		}
		return nil
	})
	return e
}

func (e *eventTimes) wait(b *testing.B, name string, t0 time.Time) time.Duration {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		t, ok := e.ended[name]
		e.mu.Unlock()
		if ok {
			return t.Sub(t0)
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatalf("no event said %s's run ended within 2m", name)
	return 0
}
