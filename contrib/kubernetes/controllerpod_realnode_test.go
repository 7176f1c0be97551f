package kubernetes_test

import (
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/legion-dev/legion/activation/kube"
	"github.com/legion-dev/legion/controller/lease"
	"github.com/legion-dev/legion/controller/linear/lineartest"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// controllerImage is the image the test builds for the controller's pod
// (and its sessions'): `legion-kube image` with no agent CLI.
const controllerImage = "legion.test/legion:controllerpod"

// TestControllerPodRealNode runs the controller Deployment as it ships
// (controller.yaml, with the manifests beside it: namespace, service
// account, Role, quota, the state claim) as a real pod on a real node (a
// real kubelet with containerd and runc: kubetest.Options.RealNode), from
// Legion's own image (`legion-kube image`, loaded without a registry):
// the kubelet mounts the service account's token, the ConfigMap's
// legion.toml and the team's Secret; the init container clones the
// team's repository (git's smart HTTP on the node's address) and the
// controller, under legion-kube lead, takes the team's Lease with the
// pod's name and dispatches a fake Linear issue's planner as a Job with
// the Role's verbs only. The pod is then killed (deleted with no grace:
// the kubelet kills its containers): the Deployment's next pod waits for
// the Lease, takes it, lists the planner's Job before its first tick and
// does not dispatch it again, while it dispatches the planner of an
// issue added since. What differs from a cluster's: this node has no
// Service network (no kube-proxy), so the pod runs on the host's network
// with KUBERNETES_SERVICE_HOST and _PORT set to the API server's
// address, and its claim is a hostPath volume made for it.
func TestControllerPodRealNode(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: -1, RealNode: true})
	legion, kubeBin := sdtest.LegionBinary(t), sdtest.KubeBinary(t)
	tar := filepath.Join(t.TempDir(), "legion.tar")
	if out, err := exec.Command(kubeBin, "image", "--out", tar, "--cli", "", "--bin", filepath.Dir(legion), "--name", controllerImage).CombinedOutput(); err != nil {
		t.Fatalf("legion-kube image: %v: %s", err, out)
	}
	c.LoadImage(t, tar)
	ctx := t.Context()

	// The namespace with the sessions' volumes (their pods' user), then
	// the controller's state volume for its claim (the pod's user).
	c.RealNamespace(t, namespace, 2, 1000)
	var deploy *appsv1.Deployment
	objs := load(t)
	slices.SortStableFunc(objs, func(a, b object) int { return applyOrder(a.obj) - applyOrder(b.obj) })
	for _, o := range objs {
		switch x := o.obj.(type) {
		case *corev1.Namespace:
			continue // made above, with the storage class of its volumes
		case *corev1.PersistentVolumeClaim:
			x.Spec.StorageClassName = ptr.To(kubetest.StorageClass)
			uid := int(ptr.Deref(deployOf(t, objs).Spec.Template.Spec.SecurityContext.RunAsUser, 0))
			c.RealClaimVolume(t, namespace, 2, x.Name, uid)
		case *appsv1.Deployment:
			deploy = x // below, once the rest is there
			continue
		}
		create(t, c, o)
	}
	if _, err := c.Client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: agentsName},
		Data:       map[string][]byte{team.PodLinearKey: []byte(linearKey + "\n")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The fakes on the node's address, which the host's network and the
	// pod network both reach.
	listen := func() net.Listener {
		l, err := net.Listen("tcp", net.JoinHostPort(kubetest.RealNodeIP, "0"))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	srv := lineartest.NewServerOn(t, listen(), linearKey, "ENG")
	bare := strings.TrimPrefix(bareRepo(t), "file://")
	repo := kubetest.ServeGit(t, filepath.Dir(bare), listen()) + "/" + filepath.Base(bare)
	secrets := containerSecretsMount(t, deploy)
	toml := fmt.Sprintf(`[teams.%s]
id = %q
workspace = "/var/lib/legion/repo"
tracker = "linear"
linear.team_key = "ENG"
linear.credentials_file = %q
linear.api_url = %q
wip_limit = 2
agent.kind = "custom"
agent.new = ["/usr/local/bin/legion", "scripted-agent", "{prompt}"]
agent.env = { GIT_AUTHOR_NAME = "legion", GIT_AUTHOR_EMAIL = "legion@example.com", GIT_COMMITTER_NAME = "legion", GIT_COMMITTER_EMAIL = "legion@example.com" }
engine = "kubernetes"
kubernetes.namespace = %q
kubernetes.image = %q
kubernetes.storage_class = %q
kubernetes.storage = "1Gi"
kubernetes.secret = %q
kubernetes.repository = %q
`, podTeam, podTeamID, filepath.Join(secrets, team.PodLinearKey), srv.URL, namespace, controllerImage, kubetest.StorageClass, agentsName, repo)
	if _, err := c.Client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "legion-config"}, Data: map[string]string{"legion.toml": toml},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := srv.AddIssue("Write a file", "Todo")

	// The Deployment as it ships, but for what a user replaces (the
	// image, TEAM, the repository's URL) and the network this node lacks.
	api, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	spec := &deploy.Spec.Template.Spec
	spec.HostNetwork = true
	for _, cs := range []*[]corev1.Container{&spec.InitContainers, &spec.Containers} {
		for i := range *cs {
			ct := &(*cs)[i]
			ct.Image, ct.ImagePullPolicy = controllerImage, corev1.PullNever
			for j, a := range ct.Command {
				switch a {
				case "TEAM":
					ct.Command[j] = podTeam
				case "https://git.example/demo.git":
					ct.Command[j] = repo
				}
			}
			ct.Env = append(ct.Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: api.Hostname()}, corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: api.Port()})
		}
	}
	create(t, c, object{file: "controller.yaml", obj: deploy})

	// The first pod takes the Lease and dispatches the planner.
	plans := func() []string {
		jobs, err := c.Client.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelMode + "=plan"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range jobs.Items {
			names = append(names, j.Annotations[kube.AnnotIssue])
		}
		slices.Sort(names)
		return names
	}
	pod := controllerPod(t, c, "")
	defer func() {
		if t.Failed() {
			logControllerPods(t, c)
		}
	}()
	waitfor.Check(t, 4*time.Minute, "the planner's Job of "+first.Identifier+" by the controller's pod", func() error {
		if names := plans(); !slices.Contains(names, first.Identifier) {
			return fmt.Errorf("planner Jobs of %v", names)
		}
		return nil
	})
	holder := func() string {
		l, err := c.Client.CoordinationV1().Leases(namespace).Get(ctx, lease.ControllerName(shortID), metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	if h := holder(); h != pod.Name {
		t.Fatalf("the Lease is held by %q; want the controller's pod %s", h, pod.Name)
	}
	if pod.Spec.NodeName != kubetest.RealNodeName {
		t.Errorf("the controller's pod ran on %q; want the real node", pod.Spec.NodeName)
	}

	// Killed: no grace, so its Lease is not released; the next pod waits
	// for it to expire, takes it, and finds the planner's Job.
	if err := c.Client.CoreV1().Pods(namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	next := controllerPod(t, c, pod.Name)
	waitfor.Check(t, 3*time.Minute, "the Lease held by the next pod "+next.Name, func() error {
		if h := holder(); h != next.Name {
			return fmt.Errorf("held by %q", h)
		}
		return nil
	})
	second := srv.AddIssue("Write another file", "Todo")
	waitfor.Check(t, 3*time.Minute, "the planner's Job of "+second.Identifier+" by the next pod", func() error {
		if names := plans(); !slices.Contains(names, second.Identifier) {
			return fmt.Errorf("planner Jobs of %v", names)
		}
		return nil
	})
	if names := plans(); len(names) != 2 {
		t.Errorf("planner Jobs of %v; want one per issue", names)
	}
	log := podLog(t, c, next.Name)
	var dispatched []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "action=dispatch_planner") {
			dispatched = append(dispatched, line)
		}
	}
	if len(dispatched) != 1 || !strings.Contains(dispatched[0], "issue="+second.Identifier) {
		t.Errorf("the next pod decided these planner dispatches: %q; want one, of %s (it must see the first pod's session of %s):\n%s", dispatched, second.Identifier, first.Identifier, log)
	}
	if !strings.Contains(log, "following the sessions of a Kubernetes target") {
		t.Errorf("the next pod's helper did not follow namespace %s at its start:\n%s", namespace, log)
	}
}

// deployOf is the Deployment among objs.
func deployOf(t *testing.T, objs []object) *appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if d, ok := o.obj.(*appsv1.Deployment); ok {
			return d
		}
	}
	t.Fatal("no Deployment in the manifests")
	return nil
}

// controllerPod waits for the controller Deployment's running pod that is
// not named not, its containers started.
func controllerPod(t *testing.T, c *kubetest.Cluster, not string) corev1.Pod {
	t.Helper()
	var got corev1.Pod
	waitfor.Check(t, 4*time.Minute, "the controller's pod running", func() error {
		l, err := c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
		if err != nil {
			return err
		}
		var seen []string
		for _, p := range l.Items {
			seen = append(seen, p.Name+"="+string(p.Status.Phase))
			if p.Name != not && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				got = p
				return nil
			}
		}
		return fmt.Errorf("pods %v", seen)
	})
	return got
}

// podLog is the log of the controller container of pod name, from the
// kubelet through the API server.
func podLog(t *testing.T, c *kubetest.Cluster, name string) string {
	t.Helper()
	b, err := c.Client.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{Container: "controller"}).DoRaw(t.Context())
	if err != nil {
		return fmt.Sprintf("(log of %s: %v)", name, err)
	}
	return string(b)
}

// logControllerPods logs each controller pod's status and log, for a
// failed test.
func logControllerPods(t *testing.T, c *kubetest.Cluster) {
	l, err := c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Logf("list pods: %v", err)
		return
	}
	for _, p := range l.Items {
		t.Logf("pod %s: %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
		if p.Labels["app.kubernetes.io/component"] == "controller" {
			t.Logf("log of %s:\n%s", p.Name, podLog(t, c, p.Name))
		}
	}
}
