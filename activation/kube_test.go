package activation

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// kubeNamespace makes a namespace with a StorageClass of pre-made volumes
// (a cluster without a provisioner: the persistent volume controller binds
// each issue's claim to one of them), as a cluster operator would.
func kubeNamespace(t testing.TB, c *kubetest.Cluster, ns string, volumes int) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	immediate := storagev1.VolumeBindingImmediate
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "legion-test"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &immediate,
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for i := range volumes {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pv-%d", ns, i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName: "legion-test",
				Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: filepath.Join("/srv/legion-test", ns, fmt.Sprint(i))}},
			},
		}
		if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
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
	// Unbuilt commands say so, naming the Job.
	if _, err := cl.Send(ctx, plan.Name, "hi", false); !errors.Is(err, api.ErrNotImplemented) || !strings.Contains(err.Error(), wire.JobName(plan.ID)) {
		t.Errorf("Send = %v; want not_implemented naming the Job", err)
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
