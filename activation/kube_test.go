package activation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// kubeNamespace makes a namespace with volumes pre-made volumes
// (kubetest.Namespace).
func kubeNamespace(t testing.TB, c *kubetest.Cluster, ns string, volumes int) {
	t.Helper()
	c.Namespace(t, ns, volumes)
}

// runPodsCluster is a control plane whose pods run (kubetest's RunPods)
// with the directory of this test's legion binaries bound into each
// container at the same path and on its PATH, as an image would hold
// them; bin is the legion binary.
func runPodsCluster(t *testing.T) (*kubetest.Cluster, string) {
	t.Helper()
	bin := sdtest.LegionBinary(t)
	binDir := filepath.Dir(bin)
	// The pod's user (1000) runs the programs from there.
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := binDir + ":/usr/bin:/bin"
	return kubetest.Start(t, kubetest.Options{RunPods: true, PodBinds: []string{binDir}, PodEnv: []string{"PATH=" + path},
		ExecEnv: map[string]string{"PATH": path}}), bin
}

func kubeLaunch(c *kubetest.Cluster, ns, issue, mode string) api.SpawnArgs {
	a := testLaunch(issue+"-"+mode, "claude", "--session-id", "x")
	a.Issue, a.Mode, a.Role, a.Cwd = issue, mode, roleWorker, wire.WorkDir
	a.Name = issue + "-" + mode
	a.ID = uuid.NewSHA1(config.AdhocTeamID, []byte(a.Name)).String()
	a.Kubernetes = &api.KubeTarget{Kubeconfig: c.Kubeconfig, Namespace: ns, Image: "legion-worker:test", StorageClass: "legion-test", Storage: "1Gi",
		CPURequest: "500m", MemoryRequest: "1Gi", MemoryLimit: "2Gi"}
	a.StartLimitBurst = 3
	return a
}

// kubeSession waits until the helper lists session name as cond wants.
func kubeSession(t testing.TB, cl *api.Client, name, what string, cond func(api.Session) bool) api.Session {
	t.Helper()
	var got api.Session
	waitfor.Check(t, 90*time.Second, "session "+name+" "+what, func() error {
		res, err := cl.List(t.Context())
		if err != nil {
			return err
		}
		for _, s := range res.Sessions {
			if s.Name == name {
				got = s
				if cond(s) {
					return nil
				}
				return fmt.Errorf("listed as %+v", s)
			}
		}
		return fmt.Errorf("not listed")
	})
	return got
}

// podsOf are the pods of session id, oldest first.
func podsOf(t testing.TB, c *kubetest.Cluster, ns, id string) []corev1.Pod {
	t.Helper()
	l, err := c.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "legion.dev/session" + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(l.Items, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return l.Items
}

// TestKubeSessions: a team's sessions on a real control plane (etcd,
// kube-apiserver, the real Job, garbage-collector and persistent-volume
// controllers, the real scheduler) whose nodes are kwok's simulated ones.
// The test plays each node's kubelet where a pod's container ends
// (kubetest.EndPod): no pod runs anything here. Through the helper's one
// API: spawn, list (engine and node), watch, a run that failed restarted
// on a new pod with the same volume, exit 78 failed for good with its
// cause and never again dispatched, a lost node's pod replaced without
// counting against the start limit, kill keeping the issue's volume,
// team.stop.
func TestKubeSessions(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: 2})
	const ns = "legion-demo"
	kubeNamespace(t, c, ns, 4)
	ip := startInProcess(t, true, Options{KubeBinary: sdtest.KubeBinary(t)})
	cl := ip.client(t)
	ctx := t.Context()

	var mu sync.Mutex
	var events []api.SessionEvent
	go ip.client(t).Watch(ctx, api.WatchArgs{}, func(ev api.SessionEvent) error { // a client of its own: one call at a time per client
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		return nil
	})

	plan := kubeLaunch(c, ns, "DEMO-1", "plan")
	res, err := cl.Spawn(ctx, plan)
	if err != nil || !res.Started {
		t.Fatalf("Spawn = %+v, %v; want started", res, err)
	}
	s := kubeSession(t, cl, plan.Name, "running on a node", func(s api.Session) bool {
		return s.Engine == api.EngineKubernetes && s.State == api.StateRunning && s.Node != ""
	})
	if s.ID != plan.ID || s.Team != plan.Team || s.Issue != "DEMO-1" || s.Mode != "plan" {
		t.Errorf("listed %+v; want the spawn's id, team, issue and mode", s)
	}
	// A dispatch again is idempotent.
	plan.Reuse = true
	if res, err := cl.Spawn(ctx, plan); err != nil || res.Started {
		t.Errorf("second dispatch = %+v, %v; want not started, no error", res, err)
	}
	// The control token is in the Secret only.
	job, err := c.Client.BatchV1().Jobs(ns).Get(ctx, wire.JobName(plan.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := c.Client.CoreV1().Secrets(ns).Get(ctx, wire.SecretName(plan.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Token        string `json:"token"`
		SelfWatchdog bool   `json:"self_watchdog"`
		Paths        struct {
			StateDir string `json:"state_dir"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(sec.Data["spec.json"], &spec); err != nil || spec.Token == "" || !spec.SelfWatchdog || spec.Paths.StateDir != wire.StateDir {
		t.Fatalf("spec in the Secret %s: %+v, %v: want a token, self_watchdog and the pod's paths", sec.Name, spec, err)
	}
	jb, _ := json.Marshal(job)
	if strings.Contains(string(jb), spec.Token) {
		t.Errorf("the Job's spec holds the control token")
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != job.UID {
		t.Errorf("the spec's Secret is owned by %+v; want the Job", sec.OwnerReferences)
	}
	// Input and logs go through exec, which these nodes route nowhere:
	// the error says what failed (TestKubeAttach has them work).
	if _, err := cl.Send(ctx, plan.Name, "hi", false); !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "through exec") {
		t.Errorf("Send = %v; want unavailable, saying exec failed", err)
	}
	if _, err := cl.Logs(ctx, api.LogsArgs{Name: plan.Name}, io.Discard); !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "through exec") {
		t.Errorf("Logs = %v; want unavailable, saying exec failed", err)
	}

	// The run fails (its worker exits 1: a crash, or a stale agent the
	// worker ended): the Job controller starts a new pod on the same
	// volume after its backoff, and the helper counts the restart.
	pods := podsOf(t, c, ns, plan.ID)
	c.EndPod(t, ns, pods[0].Name, 1)
	s = kubeSession(t, cl, plan.Name, "running again after a failed run", func(s api.Session) bool {
		return s.State == api.StateRunning && s.Restarts == 1 && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 1
	})
	pods = podsOf(t, c, ns, plan.ID)
	if len(pods) != 2 || pods[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName != pods[1].Spec.Volumes[0].PersistentVolumeClaim.ClaimName {
		t.Fatalf("pods %d; want 2 on one volume", len(pods))
	}

	// Its node is lost: the pod goes with it, and the Job starts another
	// elsewhere without counting it against the start limit.
	lost := pods[1].Spec.NodeName
	c.DeleteNode(t, lost)
	s = kubeSession(t, cl, plan.Name, "running on another node", func(s api.Session) bool {
		return s.State == api.StateRunning && s.Node != "" && s.Node != lost
	})
	if s.Restarts != 1 {
		t.Errorf("restarts %d after a lost node; want 1 (a lost node is not the agent's failure)", s.Restarts)
	}
	c.AddNode(t, lost)

	// Exit 78: the agent cannot start. The Job fails for good with the
	// cause, at once (not after the start limit), and a dispatch does not
	// start it again.
	pods = podsOf(t, c, ns, plan.ID)
	c.EndPod(t, ns, pods[len(pods)-1].Name, 78)
	s = kubeSession(t, cl, plan.Name, "failed for good", func(s api.Session) bool { return s.State == api.StateFailed })
	if !strings.Contains(s.Cause, "cannot be started") {
		t.Errorf("cause %q; want the agent that cannot be started", s.Cause)
	}
	if _, err := cl.Spawn(ctx, plan); !errors.Is(err, api.ErrNotRunning) || !strings.Contains(err.Error(), "until a person acts") {
		t.Errorf("dispatch of a failed session = %v; want not_running until a person acts", err)
	}
	if st, err := cl.Status(ctx, plan.Name); err != nil || st.State != api.StateFailed {
		t.Errorf("Status = %+v, %v; want failed", st, err)
	}

	// Kill: the Job and its pods go, the issue's volume stays for the
	// next phase, which mounts it.
	if _, err := cl.Kill(ctx, plan.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.BatchV1().Jobs(ns).Get(ctx, wire.JobName(plan.ID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Job after kill: %v; want not found", err)
	}
	claim := pods[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{}); err != nil {
		t.Errorf("the issue's volume %s after kill: %v; want kept", claim, err)
	}
	impl := kubeLaunch(c, ns, "DEMO-1", "implement")
	if _, err := cl.Spawn(ctx, impl); err != nil {
		t.Fatal(err)
	}
	kubeSession(t, cl, impl.Name, "running", func(s api.Session) bool { return s.State == api.StateRunning })
	if p := podsOf(t, c, ns, impl.ID); p[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName != claim {
		t.Errorf("implement mounts %s; want the issue's volume %s", p[0].Spec.Volumes[0].PersistentVolumeClaim.ClaimName, claim)
	}

	// The start limit: every run fails, the Job gives up after
	// start_limit_burst runs, with the last exit.
	other := kubeLaunch(c, ns, "DEMO-2", "plan")
	other.StartLimitBurst = 2
	if _, err := cl.Spawn(ctx, other); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		// Running on run's pod: not the last run's, still listed running
		// until the informer sees its end.
		kubeSession(t, cl, other.Name, fmt.Sprintf("running (run %d)", run), func(s api.Session) bool {
			return s.State == api.StateRunning && s.Restarts == uint32(run-1)
		})
		p := podsOf(t, c, ns, other.ID)
		c.EndPod(t, ns, p[len(p)-1].Name, 3)
	}
	s = kubeSession(t, cl, other.Name, "failed at the start limit", func(s api.Session) bool { return s.State == api.StateFailed })
	if !strings.Contains(s.Cause, "start limit") || !strings.Contains(s.Cause, "exit code 3") {
		t.Errorf("cause %q; want the start limit and the last exit code", s.Cause)
	}

	// team.stop ends the team's live sessions.
	tr, err := cl.TeamStop(ctx, api.TeamStopArgs{Team: impl.Team, Short: impl.TeamID[:8]})
	if err != nil || !slices.Contains(tr.Stopped, impl.Name) {
		t.Errorf("TeamStop = %+v, %v; want %s stopped", tr, err, impl.Name)
	}

	mu.Lock()
	var seen []string
	for _, ev := range events {
		if ev.Session != nil && ev.Session.Name == plan.Name {
			seen = append(seen, string(ev.Type)+":"+string(ev.Session.State))
		}
	}
	mu.Unlock()
	for _, want := range []string{"started:", "failed:failed"} {
		if !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("sessions.watch sent %v for %s; want a %s event", seen, plan.Name, want)
		}
	}
}

// TestKubeBadTarget: what a spawn on a cluster says when the target is
// wrong: an unknown context, a namespace that does not exist, a user the
// cluster's RBAC does not allow.
func TestKubeBadTarget(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: -1})
	kubeNamespace(t, c, "legion-demo", 0)
	ip := startInProcess(t, true, Options{KubeBinary: sdtest.KubeBinary(t)})
	cl := ip.client(t)
	ctx := t.Context()

	a := kubeLaunch(c, "legion-demo", "DEMO-1", "plan")
	a.Kubernetes.Context = "prod"
	if _, err := cl.Spawn(ctx, a); err == nil || !strings.Contains(err.Error(), `kubernetes.context "prod": no such context in `+c.Kubeconfig) {
		t.Errorf("unknown context: %v", err)
	}
	a = kubeLaunch(c, "nowhere", "DEMO-1", "plan")
	if _, err := cl.Spawn(ctx, a); err == nil || !strings.Contains(err.Error(), "namespace nowhere does not exist") {
		t.Errorf("missing namespace: %v", err)
	}
	// The restricted user, in a kubeconfig of its own.
	raw, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc := c.RestrictedConfig
	for name := range raw.AuthInfos {
		raw.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	}
	restricted := filepath.Join(t.TempDir(), "restricted.kubeconfig")
	if err := clientcmd.WriteToFile(*raw, restricted); err != nil {
		t.Fatal(err)
	}
	a = kubeLaunch(c, "legion-demo", "DEMO-1", "plan")
	a.Kubernetes.Kubeconfig = restricted
	if _, err := cl.Spawn(ctx, a); err == nil || !strings.Contains(err.Error(), "may not list jobs in namespace legion-demo") || !strings.Contains(err.Error(), "RBAC") {
		t.Errorf("forbidden: %v", err)
	}
	// None of them is followed at the next helper start.
	if _, err := os.Stat(filepath.Join(ip.h.opts.StateDir, kubeTargetsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("targets file after failed spawns only: %v; want none", err)
	}
}

// A corrupt kubernetes-targets.json is quarantined at the helper's start,
// not overwritten by the next spawn's record; the helper runs on.
func TestKubeTargetsCorrupt(t *testing.T) {
	sdtest.Start(t)
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(state, kubeTargetsFile)
	if err := os.WriteFile(p, []byte(`[{"namespace": "demo"`), 0o600); err != nil {
		t.Fatal(err)
	}
	ip := startInProcessOn(t, nil, Options{StateDir: state, KubeBinary: "/nonexistent/legion-kube"})
	q := filepath.Join(state, quarantineDir, kubeTargetsFile)
	waitfor.Check(t, time.Minute, "the corrupt targets file quarantined", func() error {
		_, err := os.Stat(q)
		return err
	})
	if b, err := os.ReadFile(q); err != nil || string(b) != `[{"namespace": "demo"` {
		t.Errorf("quarantined file %q, %v; want the original bytes", b, err)
	}
	if _, err := ip.client(t).List(t.Context()); err != nil {
		t.Errorf("List after a corrupt targets file: %v", err)
	}
}

// staleThenResumed is issue DEMO-9's implementer on the cluster: the
// scripted agent (legion, the binary's path in the pod) in the issue's
// volume, whose first run goes stale (hangs past 1.5 s) and whose resumed
// run says so and works on.
func staleThenResumed(c *kubetest.Cluster, ns, legion string) api.SpawnArgs {
	a := kubeLaunch(c, ns, "DEMO-9", "implement")
	a.Cwd = wire.VolumeMount
	a.Argv = []string{legion, "scripted-agent", "--session-id", a.ID, "go"}
	a.ArgvResume = []string{legion, "scripted-agent", "--resume", a.ID, "go on"}
	a.Watch = claudecode.SessionFile(wire.HomeDir, a.Cwd, uuid.MustParse(a.ID))
	a.StaleAfter = api.Duration(1500 * time.Millisecond)
	a.StartupGrace = new(api.Duration(0))
	a.Env = []string{"LEGION_SCRIPT=" + `
if-new say first run
if-new work 600ms
if-new hang
if-resumed say resumed the same conversation
if-resumed work 5m
`}
	return a
}

// checkResumedOnVolume waits until the registry on the issue's volume
// (volDir, the claim's directory) says run 2 resumed the conversation
// after the worker's own watchdog ended run 1, then attaches to session
// name through the API server and reads the resumed agent's screen.
func checkResumedOnVolume(t *testing.T, ctx context.Context, cl *api.Client, volDir, id, name string) {
	t.Helper()
	regPath := filepath.Join(volDir, "state", "registry", id+".json")
	waitfor.Check(t, 60*time.Second, "run 2 resumed, in the registry on the volume", func() error {
		r, err := proto.ReadRegistry(regPath)
		if err != nil {
			return err
		}
		if r.Run != 2 || r.ArgvKind != proto.ArgvResume || r.LastExit == nil || !strings.HasPrefix(r.LastExit.Reason, "watchdog: stale for ") {
			return fmt.Errorf("registry %+v, last exit %+v", r, r.LastExit)
		}
		return nil
	})
	wc, _ := attachFromStart(t, cl, name)
	defer wc.Close()
	var out strings.Builder
	readAttached(t, wc, &out, "resumed the same conversation", 60*time.Second)
}

// attachFromStart attaches to session name through the helper, as
// `legion attach` and the dashboard do (mapped unless relayed: a ring's
// descriptor cannot cross the API server), from the output's start.
func attachFromStart(t testing.TB, cl *api.Client, name string) (*proto.Client, api.AttachResult) {
	t.Helper()
	conn, res, err := cl.Attach(t.Context(), api.AttachArgs{Name: name})
	if err != nil {
		t.Fatalf("Attach to %s: %v", name, err)
	}
	wc := proto.NewClient(conn)
	zero := uint64(0)
	if _, err := wc.Attach(t.Context(), proto.AttachParams{Offset: &zero, Mapped: !res.Relayed}); err != nil {
		wc.Close()
		t.Fatalf("attach to %s on the relay: %v", name, err)
	}
	return wc, res
}

// readAttached adds the output an attached client gets to out until out
// holds want; the test fails when the connection closes or wait passes.
func readAttached(t testing.TB, wc *proto.Client, out *strings.Builder, want string, wait time.Duration) {
	t.Helper()
	deadline := time.After(wait)
	for !strings.Contains(out.String(), want) {
		select {
		case ev, ok := <-wc.Events():
			if !ok {
				t.Fatalf("the relay closed; output so far %q", out.String())
			}
			if ev.Kind == proto.EventKindOutput || ev.Kind == proto.EventKindSnapshot {
				out.Write(ev.Data)
			}
		case <-deadline:
			t.Fatalf("no %q in the attached output %q", want, out.String())
		}
	}
}

// TestKubeAttach: attach, input and end of a session on a cluster go
// through the API server's exec, as the helper does them: legion-kube
// exec runs `legion-pty-worker --connect` in the session's pod, which
// says hello to the worker with the spec's token and relays. kwok's nodes
// run no container: the test runs the pod's worker on this machine (the
// Secret's spec, with paths of a temporary directory instead of the
// pod's mounts) and kwok routes the exec to a local process whose
// environment names that spec and socket, as the pod's does its own.
func TestKubeAttach(t *testing.T) {
	dir := t.TempDir()
	specPath, socket := filepath.Join(dir, "spec.json"), filepath.Join(dir, "worker.sock")
	worker := sdtest.WorkerBinary(t) // on the exec's PATH, as in the image
	c := kubetest.Start(t, kubetest.Options{ExecDir: dir, ExecEnv: map[string]string{
		wire.EnvSpec: specPath, wire.EnvSocket: socket, "PATH": filepath.Dir(worker) + ":/usr/bin:/bin"}})
	const ns = "legion-attach"
	kubeNamespace(t, c, ns, 2)
	ip := startInProcess(t, true, Options{KubeBinary: sdtest.KubeBinary(t)})
	cl := ip.client(t)
	ctx := t.Context()

	a := kubeLaunch(c, ns, "DEMO-7", "implement")
	a.Argv, a.Role, a.Agent = []string{"/bin/cat"}, roleCommand, ""
	if _, err := cl.Spawn(ctx, a); err != nil {
		t.Fatal(err)
	}
	kubeSession(t, cl, a.Name, "running on a node", func(s api.Session) bool { return s.State == api.StateRunning })
	job, err := c.Client.BatchV1().Jobs(ns).Get(ctx, wire.JobName(a.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env[wire.EnvSpec] != wire.SpecFile || !strings.HasPrefix(env[wire.EnvSocket], wire.RuntimeDir+"/") {
		t.Errorf("the pod's environment %v; want %s=%s and %s in %s", env, wire.EnvSpec, wire.SpecFile, wire.EnvSocket, wire.RuntimeDir)
	}

	// The pod's worker, run here from the Secret's spec.
	sec, err := c.Client.CoreV1().Secrets(ns).Get(ctx, wire.SecretName(a.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(sec.Data["spec.json"], &spec); err != nil {
		t.Fatal(err)
	}
	spec["paths"] = map[string]any{"runtime_dir": filepath.Join(dir, "run"), "state_dir": filepath.Join(dir, "state")}
	spec["cwd"] = dir
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	w := exec.Command(worker, "--spec", specPath)
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	t.Cleanup(func() {
		_ = w.Process.Kill() // by PID; an error once it exited
		<-done
	})
	// The worker puts its socket where the spec says; the exec's
	// environment names it (the test gives the spec's path to kwok
	// before the spawn, so it links the one to the other).
	var sp struct{ Socket string }
	waitfor.Check(t, 30*time.Second, "the worker's socket", func() error {
		m, err := filepath.Glob(filepath.Join(dir, "run", "w", "*.sock"))
		if err != nil || len(m) != 1 {
			return fmt.Errorf("sockets %v, %v", m, err)
		}
		sp.Socket = m[0]
		return nil
	})
	if err := os.Symlink(sp.Socket, socket); err != nil {
		t.Fatal(err)
	}

	// Input through the helper, then attach: the relay, past hello, marked
	// relayed so the client asks for no mapped ring.
	if _, err := cl.Send(ctx, a.Name, "hello from the helper", false); err != nil {
		t.Fatalf("Send through the API server: %v", err)
	}
	wc, res := attachFromStart(t, cl, a.Name)
	defer wc.Close()
	if !res.Relayed || res.Session.ID != a.ID {
		t.Errorf("AttachResult = %+v; want relayed, the session", res)
	}
	var out strings.Builder
	read := func(want string) { t.Helper(); readAttached(t, wc, &out, want, 30*time.Second) }
	read("hello from the helper")
	// Keys typed on the attached terminal reach the agent.
	if err := wc.Input(ctx, []byte("typed while attached\r")); err != nil {
		t.Fatal(err)
	}
	read("typed while attached")

	// Logs: the transcript on the pod's volume, read there by exec; with
	// follow, what comes after too, until the session ends.
	var logs strings.Builder
	if _, err := ip.client(t).Logs(ctx, api.LogsArgs{Name: a.Name}, &logs); err != nil || !strings.Contains(logs.String(), "typed while attached") {
		t.Errorf("Logs = %v, %q; want the transcript with what was typed", err, logs.String())
	}
	var tailed strings.Builder
	if _, err := ip.client(t).Logs(ctx, api.LogsArgs{Name: a.Name, Tail: 8}, &tailed); err != nil || tailed.Len() != 8 {
		t.Errorf("Logs with tail 8 = %v, %q; want 8 bytes", err, tailed.String())
	}
	followed := make(chan string, 1)
	go func() {
		var b strings.Builder
		res, err := ip.client(t).Logs(ctx, api.LogsArgs{Name: a.Name, Follow: true}, &b)
		followed <- fmt.Sprintf("%s|%v|%s", res.Reason, err, b.String())
	}()
	if err := wc.Input(ctx, []byte("after the follow began\r")); err != nil {
		t.Fatal(err)
	}
	read("after the follow began")

	// End: the worker ends the agent and exits 0, as the pod's would.
	if _, err := cl.End(ctx, a.Name, "its work is done"); err != nil {
		t.Fatalf("End through the API server: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the worker exited %v after end; want 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not exit after end")
	}
	done <- nil // for the cleanup

	// Without a running pod, attach says so.
	pod := podsOf(t, c, ns, a.ID)[0]
	c.EndPod(t, ns, pod.Name, 0)
	kubeSession(t, cl, a.Name, "succeeded", func(s api.Session) bool { return s.State.Ended() })
	select {
	case got := <-followed:
		if !strings.HasPrefix(got, "session ended|<nil>|") || !strings.Contains(got, "after the follow began") {
			t.Errorf("Logs with follow = %q; want what came after it began, ended with the session", got)
		}
	case <-time.After(30 * time.Second):
		t.Error("Logs with follow did not end with the session")
	}
	if _, _, err := cl.Attach(ctx, api.AttachArgs{Name: a.Name}); !errors.Is(err, api.ErrNotRunning) {
		t.Errorf("Attach after the end = %v; want not_running", err)
	}
}

// TestKubeResume: a session whose pods run (kwok's simulated nodes, their
// containers run by the test with runc: kubetest.Options.RunPods) keeps
// the promises of a unit. The real worker runs the scripted agent in a
// hardened pod; the agent goes stale, the worker (no systemd watchdog:
// self_watchdog) ends it and exits 1; the Job starts a new pod on the
// issue's volume, whose worker resumes the same conversation (the
// session file is on the volume, so the resume argv). Attach through the
// API server shows the resumed agent; end completes the Job.
func TestKubeResume(t *testing.T) {
	c, bin := runPodsCluster(t) // legion scripted-agent, the stand-in for Claude Code
	const ns = "legion-resume"
	kubeNamespace(t, c, ns, 2)
	ip := startInProcess(t, true, Options{KubeBinary: sdtest.KubeBinary(t)})
	cl := ip.client(t)
	ctx := t.Context()

	a := staleThenResumed(c, ns, bin)
	if _, err := cl.Spawn(ctx, a); err != nil {
		t.Fatal(err)
	}
	// Beside it, an agent that cannot start: its worker exits 78 and the
	// Job fails for good at once, with the cause, on its first pod.
	missing := kubeLaunch(c, ns, "DEMO-10", "implement")
	missing.Argv, missing.Role, missing.Cwd = []string{"/nonexistent/agent"}, roleCommand, wire.VolumeMount
	if _, err := cl.Spawn(ctx, missing); err != nil {
		t.Fatal(err)
	}
	s := kubeSession(t, cl, a.Name, "running again after its stale run", func(s api.Session) bool {
		return s.State == api.StateRunning && s.Restarts == 1
	})
	if s.Exit == nil || s.Exit.Code == nil || *s.Exit.Code != 1 {
		t.Errorf("the first run's exit = %+v; want code 1 (the worker ended its stale agent)", s.Exit)
	}
	pods := podsOf(t, c, ns, a.ID)
	if len(pods) != 2 || pods[0].Status.Phase != corev1.PodFailed {
		t.Fatalf("pods %d, the first %s; want 2, the first failed", len(pods), pods[0].Status.Phase)
	}

	// The registry on the issue's volume: run 2 resumed, run 1 ended by
	// the worker's own watchdog.
	claim := pods[1].Spec.Volumes[0].PersistentVolumeClaim.ClaimName
	// Attach through the API server: the resumed agent's screen.
	checkResumedOnVolume(t, ctx, cl, c.VolumeDir(ns, claim), a.ID, a.Name)

	// End: the worker ends the agent and exits 0; the Job completes.
	if _, err := cl.End(ctx, a.Name, "its work is done"); err != nil {
		t.Fatalf("End: %v", err)
	}
	kubeSession(t, cl, a.Name, "succeeded", func(s api.Session) bool {
		return s.State == api.StateExited && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 0
	})

	kubeSession(t, cl, missing.Name, "failed for good", func(s api.Session) bool {
		return s.State == api.StateFailed && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 78
	})
	if n := len(podsOf(t, c, ns, missing.ID)); n != 1 {
		t.Errorf("the agent that cannot start had %d pods; want 1 (no restart)", n)
	}
}
