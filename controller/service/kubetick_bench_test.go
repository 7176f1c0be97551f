package service_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/linear/lineartest"
	"github.com/legion-dev/legion/controller/service"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/benchreport"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// envTickSessions sets the number of sessions of BenchmarkKubeTick (the
// same variable as package activation's BenchmarkKubeScale).
const envTickSessions = "LEGION_BENCH_SESSIONS"

// tickRounds is how many steady ticks BenchmarkKubeTick times per engine.
const tickRounds = 5

// kubeResources are what the Kubernetes engine reads and writes (package
// activation/kube: its informers and a spawn's objects): the API
// requests counted are those on them. Other resources (nodes and their
// leases, which kwok renews for 100 nodes, endpoints, ...) are the
// cluster's own traffic.
var kubeResources = []string{"jobs", "pods", "persistentvolumeclaims", "secrets", "events", "namespaces"}

// engineRequests are the requests that only the Kubernetes engine makes
// here, of those on kubeResources: a spawn's get of its Job and creates of
// the issue's claim, the Job and its spec's Secret (package
// activation/kube). The cluster's components read through informers
// (watches, not counted) and write other things: the Job controller
// pods, jobs/status and events, the scheduler pods/binding, kwok
// pods/status.
var engineRequests = []string{"GET jobs", "POST jobs", "POST persistentvolumeclaims", "POST secrets", "DELETE jobs", "LIST jobs", "LIST pods", "LIST events", "GET namespaces"}

// engineOnly is the part of r that only the engine makes (engineRequests).
func engineOnly(r kubetest.Requests) kubetest.Requests {
	out := kubetest.Requests{}
	for _, k := range engineRequests {
		if v, ok := r[k]; ok {
			out[k] = v
		}
	}
	return out
}

// tickFigures are one engine's measures.
type tickFigures struct {
	ticks    []time.Duration // steady ticks: n sessions live, nothing to do
	dispatch time.Duration   // the tick that dispatched one planner
	// API requests on kubeResources during the steady ticks, during an
	// idle wait as long as they took (the cluster's own traffic on the
	// same resources), and during the dispatch tick.
	tickReqs, idleReqs, dispatchReqs kubetest.Requests
}

// BenchmarkKubeTick measures the controller's tick, the collect →
// decide → apply that `legion controller TEAM` runs each interval
// (controller.Tick with the sources and dispatcher service.Run wires), for
// a team whose n sessions (1,000 unless LEGION_BENCH_SESSIONS says
// otherwise) run on a real control plane with 100 kwok nodes, against
// the same team's n sessions as units under a private systemd user
// manager, each through the real helper (socket-activated by the
// manager; for the cluster it runs legion-kube). Each engine has its own
// private manager, helper and fake Linear.
//
// The team: tracker "linear" (package lineartest's fake, over HTTP: the
// cluster path refuses the local tracker, whose files its pods cannot
// reach), agent kind "custom" (/bin/sleep: what runs is not measured),
// wip_limit 1. Its n issues are in Needs Review, each with its reviewer
// (which wip_limit does not count: at most 1,000 is allowed) dispatched
// by service.Dispatch (the controller's own dispatch:
// team.PlanDispatch, then the helper's spawn) and running; then:
//
//   - kube-tick-ms vs systemd-tick-ms: the median of 5 ticks with nothing
//     to do (every issue has its live reviewer), after one untimed;
//   - kube-requests/tick: the API requests the API server served on the
//     engine's resources (jobs, pods, claims, secrets, events,
//     namespaces: kubetest.Cluster.Requests, its own
//     apiserver_request_total, watches excluded) during those ticks, per
//     tick, less what it served on the same resources during an idle
//     wait as long as the ticks (kube-idle-requests/tick: the cluster's
//     own traffic, reported too);
//   - kube-dispatch-tick-ms vs systemd-dispatch-tick-ms and
//     kube-requests/dispatch: one more issue, in Todo, and the tick that
//     dispatches its planner.
//
// D-Bus calls per tick under systemd are not counted: the helper talks
// to the manager on its private socket (units.Connect), which no bus
// monitor sees.
func BenchmarkKubeTick(b *testing.B) {
	n := 1000
	if v := os.Getenv(envTickSessions); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive count", envTickSessions, v)
		}
	}
	var kube, unit tickFigures
	b.Run("kube", func(b *testing.B) {
		kube = measureTicks(b, n, true)
		benchreport.MS(b, benchreport.Median(kube.ticks), "kube-tick-ms")
		b.ReportMetric(kube.tickReqs.Total()/tickRounds, "kube-requests/tick")
		b.ReportMetric(engineOnly(kube.tickReqs).Total()/tickRounds, "kube-engine-requests/tick")
		b.ReportMetric(kube.idleReqs.Total()/tickRounds, "kube-idle-requests/tick")
		b.ReportMetric(kube.dispatchReqs.Total(), "kube-requests/dispatch")
		b.ReportMetric(engineOnly(kube.dispatchReqs).Total(), "kube-engine-requests/dispatch")
		b.ReportMetric(float64(n), "sessions")
		b.Logf("requests during %d steady ticks, less the idle wait's: %v", tickRounds, kube.tickReqs)
		b.Logf("requests during an idle wait as long: %v", kube.idleReqs)
		b.Logf("requests during the dispatch tick: %v", kube.dispatchReqs)
	})
	b.Run("vs-systemd", func(b *testing.B) {
		if len(kube.ticks) == 0 {
			b.Skip("the cluster's figures are missing: its run failed")
		}
		unit = measureTicks(b, n, false)
		benchreport.Vs(b, kube.ticks, "kube-tick-ms", unit.ticks, "systemd-tick-ms", "tick-kube/systemd")
		benchreport.Vs(b, []time.Duration{kube.dispatch}, "kube-dispatch-tick-ms", []time.Duration{unit.dispatch}, "systemd-dispatch-tick-ms", "dispatch-tick-kube/systemd")
		b.ReportMetric(float64(n), "sessions")
		b.ReportMetric(benchreport.LoadAvg(b), "load1-end")
	})
}

// measureTicks sets up the team of BenchmarkKubeTick with its n sessions
// on the cluster (onCluster) or under systemd and measures its ticks.
func measureTicks(b *testing.B, n int, onCluster bool) tickFigures {
	srv := lineartest.NewServer(b, linearKey, "ENG")
	keyFile := filepath.Join(b.TempDir(), "linear-key")
	if err := os.WriteFile(keyFile, []byte(linearKey+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	extra := fmt.Sprintf(`tracker = "linear"
linear.team_key = "ENG"
linear.credentials_file = %q
linear.api_url = %q
agent.kind = "custom"
`, keyFile, srv.URL)
	var c *kubetest.Cluster
	const ns = "legion-bench"
	if onCluster {
		c = kubetest.Start(b, kubetest.Options{Nodes: 100})
		c.Namespace(b, ns, n+1)
		if _, err := c.Client.CoreV1().Secrets(ns).Create(b.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "legion-bench"},
			Data:       map[string][]byte{team.PodLinearKey: []byte(linearKey + "\n")},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		// Pods on kwok's nodes run nothing: the repository and the
		// programs are never reached.
		extra += fmt.Sprintf(`engine = "kubernetes"
kubernetes.kubeconfig = %q
kubernetes.namespace = %q
kubernetes.image = "legion-worker:test"
kubernetes.storage_class = %q
kubernetes.storage = "1Gi"
kubernetes.memory_request = "64Mi"
kubernetes.cpu_request = "100m"
kubernetes.secret = "legion-bench"
kubernetes.repository = "https://git.invalid/bench.git"
kubernetes.bin_dir = "/opt/legion/bin"
`, c.Kubeconfig, ns, kubetest.StorageClass)
	}
	argv := `agent.new = ["/bin/sleep", "100000"]`
	e := start(b, "", teamOptions{wipLimit: 1, staleAfter: "1h", argv: argv, extra: extra})
	if onCluster {
		sdtest.KubeBinary(b) // beside legion, where the helper finds it
	}
	cfg, err := config.Load(e.configPath)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	ids := make([]string, n)
	for i := range n {
		ids[i] = srv.AddIssue(fmt.Sprintf("bench %d", i), "Needs Review").Identifier
	}

	// The n reviewers, each on its own connection to the helper: 8
	// dispatches at a time on the cluster, one at a time under systemd,
	// as the controller makes them (two worktrees made at once in one
	// repository can meet on its .git/config lock: "could not lock
	// config file", seen here).
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(1)
	if onCluster {
		g.SetLimit(8)
	}
	for _, id := range ids {
		g.Go(func() error {
			cl, err := api.Dial(gctx)
			if err != nil {
				return err
			}
			defer cl.Close()
			_, err = service.Dispatch(gctx, cl, e.team, cfg.Worker, id, controller.ModeReview)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	engine := api.EngineSystemd
	if onCluster {
		engine = api.EngineKubernetes
	}
	// On the cluster: every claim bound, every pod scheduled and running
	// (the persistent volume controller binds a thousand claims in
	// minutes on 2 cores).
	waitfor.Check(b, 20*time.Minute, fmt.Sprintf("%d sessions of team %s running on %s", n, teamName, engine), func() error {
		running, other := 0, map[string]int{}
		for _, s := range e.sessions(ctx) {
			if s.Team != teamName {
				continue
			}
			if (s.Engine == engine || (s.Engine == "" && !onCluster)) && s.State == api.StateRunning {
				running++
			} else {
				other[fmt.Sprintf("%s/%s", s.Engine, s.State)]++
			}
		}
		if running < n {
			return fmt.Errorf("%d running, others %v", running, other)
		}
		return nil
	})

	tick := service.NewTicker(service.Options{Team: e.team, Worker: cfg.Worker, Log: slog.New(slog.DiscardHandler)})
	steady := func(what string) time.Duration {
		t0 := time.Now()
		r := tick(ctx)
		d := time.Since(t0)
		if r.Err != nil || r.Applied != 0 || r.Failed != 0 {
			b.Fatalf("%s: tick = %+v; want nothing applied and no error (every issue has its live reviewer)", what, r)
		}
		return d
	}
	steady("the first tick")
	var f tickFigures
	requests := func() kubetest.Requests {
		if c == nil {
			return kubetest.Requests{}
		}
		return c.Requests(b).Only(kubeResources...)
	}
	before := requests()
	t0 := time.Now()
	for i := range tickRounds {
		f.ticks = append(f.ticks, steady(fmt.Sprintf("steady tick %d", i)))
	}
	took := time.Since(t0)
	during := requests().Sub(before)
	before = requests()
	time.Sleep(took) // what the cluster serves on the same resources meanwhile, unasked
	f.idleReqs = requests().Sub(before)
	f.tickReqs = during.Sub(f.idleReqs)

	// One issue more, in Todo: the next tick dispatches its planner.
	todo := srv.AddIssue("bench dispatch", "Todo").Identifier
	before = requests()
	t0 = time.Now()
	r := tick(ctx)
	f.dispatch = time.Since(t0)
	f.dispatchReqs = requests().Sub(before)
	if r.Err != nil || r.Applied != 1 || r.Failed != 0 {
		b.Fatalf("the dispatch tick = %+v; want one decision applied", r)
	}
	if _, ok := e.session(ctx, todo, controller.ModePlan); !ok {
		b.Fatalf("after the dispatch tick %s has no planner", todo)
	}

	cl, err := api.Dial(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	// Not a figure of the tick: logged, and a failure would hide the
	// figures above. With 1,000 Jobs deleted one after the other, each
	// waited for, the helper's team.stop on the cluster ran past its
	// deadline ("kubernetes team_stop: context deadline exceeded").
	stopStart := time.Now()
	if _, err := cl.TeamStop(ctx, api.TeamStopArgs{Team: teamName, Short: e.team.ShortID()}); err != nil {
		b.Logf("team stop of %d sessions on %s failed after %s: %v", n+1, engine, time.Since(stopStart).Round(time.Millisecond), err)
	} else {
		b.Logf("team stop of %d sessions on %s took %s", n+1, engine, time.Since(stopStart).Round(time.Millisecond))
	}
	return f
}
