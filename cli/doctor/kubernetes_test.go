package doctor

import (
	"io"
	"log"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/uuid"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/legion-dev/legion/activation/kube"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/units/sdtest"
)

// testRegistry serves go-containerregistry's in-process registry (the
// distribution API's wire format) on a loopback address with a random
// image pushed as legion-worker:1, and returns the image's reference.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	image := strings.TrimPrefix(srv.URL, "http://") + "/legion-worker:1"
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", image, err)
	}
	return image
}

// kubeconfigAs is c's kubeconfig with every user's credentials replaced
// by token.
func kubeconfigAs(t *testing.T, c *kubetest.Cluster, token string) string {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name := range raw.AuthInfos {
		raw.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*raw, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKube: legion doctor checks a Kubernetes team against a real API
// server and a real registry's wire format: what it found when all is
// well, and each problem named with what to fix: an unknown context, a
// missing namespace, a user RBAC does not allow the engine's verbs, or
// the controller Lease's, a storage class the cluster lacks, an image
// the registry has not got, a registry that does not answer.
func TestKube(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Nodes: -1})
	ctx := t.Context()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "legion-demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "example.com/disk",
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	image := testRegistry(t)
	bin := sdtest.KubeBinary(t)
	team := config.Team{Name: "demo", ID: uuid.MustParse("6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f"), Engine: config.EngineKubernetes, Kubernetes: config.Kubernetes{
		Kubeconfig: c.Kubeconfig, Namespace: "legion-demo", Image: image, StorageClass: "standard", Storage: "1Gi",
	}}
	const lease = "legion-controller-6f1c2e0a"
	check := func(mut func(*config.Team)) []Check {
		tm := team
		mut(&tm)
		return checkKube(ctx, "/cfg/legion.toml", bin, tm, workerEnv{})
	}
	cluster := func(checks []Check) Check { return find(t, checks, "Kubernetes of team demo") }
	img := func(checks []Check) Check { return find(t, checks, "worker image of team demo") }
	ls := func(checks []Check) Check { return find(t, checks, "controller Lease of team demo") }

	good := check(func(*config.Team) {})
	expect(t, cluster(good), OK, "RBAC allows every verb; storage class standard", "")
	expect(t, img(good), OK, "image "+image+" is in its registry (sha256:", "")
	expect(t, ls(good), OK, "the kubeconfig's user may hold Lease "+lease+"; no controller has taken it yet", "")

	expect(t, cluster(check(func(t *config.Team) { t.Kubernetes.Context = "prod" })), Fail, `kubernetes.context "prod": no such context in `+c.Kubeconfig, "[teams.demo.kubernetes]")
	expect(t, cluster(check(func(t *config.Team) { t.Kubernetes.Namespace = "nowhere" })), Fail, "namespace nowhere does not exist", "")
	expect(t, cluster(check(func(t *config.Team) { t.Kubernetes.StorageClass = "fast" })), Fail, "storage class fast does not exist (the cluster has: standard)", "")
	expect(t, cluster(check(func(t *config.Team) { t.Kubernetes.StorageClass = "" })), Fail, "no default storage class", "")

	// The image: a tag the registry has not got fails; a registry that
	// does not answer here is a warning (the nodes may reach it).
	missing := strings.TrimSuffix(image, ":1") + ":2"
	expect(t, img(check(func(t *config.Team) { t.Kubernetes.Image = missing })), Fail,
		"image "+missing+" is not in its registry (no such repository or tag)", "push the worker image there")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String() + "/legion-worker:1"
	l.Close()
	expect(t, img(check(func(t *config.Team) { t.Kubernetes.Image = closed })), Warn,
		"the registry of image "+closed+" did not answer", "nodes pull over their own network")

	// The Lease, held by a controller on the cluster.
	holder := "legion-controller-7d9f8-abcde"
	if _, err := c.Client.CoordinationV1().Leases("legion-demo").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lease}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &metav1.MicroTime{Time: metav1.Now().Time}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ls(check(func(*config.Team) {})), OK, "may hold Lease "+lease+"; "+holder+" holds it, renewed ", "")

	// A user with no role: every verb refused, the Lease's too.
	restricted := kubeconfigAs(t, c, c.RestrictedConfig.BearerToken)
	none := check(func(t *config.Team) { t.Kubernetes.Kubeconfig = restricted })
	expect(t, cluster(none), Fail,
		"may not create jobs, get jobs, list jobs, watch jobs, delete jobs, get pods, list pods, watch pods, create pods/exec, create secrets, create persistentvolumeclaims, list events, watch events in namespace legion-demo", "")
	expect(t, ls(none), Fail, "may not get lease "+lease+", create leases, update lease "+lease+" in namespace legion-demo", "contrib/kubernetes/role.yaml")

	// The same user bound to the engine's verbs and to another team's
	// Lease: the engine is fine, the team's Lease is not.
	var rules []rbacv1.PolicyRule
	for _, p := range kube.Permissions {
		res := p.Resource
		if p.Subresource != "" {
			res += "/" + p.Subresource
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{res}, Verbs: p.Verbs})
	}
	rules = append(rules,
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"legion-controller-ffffffff"}, Verbs: []string{"get", "update"}})
	if _, err := c.Client.RbacV1().Roles("legion-demo").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "legion"}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings("legion-demo").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "legion"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "legion"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: kubetest.RestrictedUser}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	engineOnly := check(func(t *config.Team) { t.Kubernetes.Kubeconfig = restricted })
	expect(t, cluster(engineOnly), OK, "RBAC allows every verb", "")
	expect(t, ls(engineOnly), Fail, "may not get lease "+lease+", update lease "+lease+" in namespace legion-demo", "get, update on lease "+lease)

	// The kubeconfig the helper reads: the manager's $KUBECONFIG without
	// kubernetes.kubeconfig.
	tm := team
	tm.Kubernetes.Kubeconfig = ""
	expect(t, cluster(checkKube(ctx, "/cfg/legion.toml", bin, tm, workerEnv{env: []string{"KUBECONFIG=" + c.Kubeconfig}})), OK, "namespace legion-demo", "")
}

// TestClusterDispatch: a Kubernetes team's controller needs the
// repository its pods clone and a tracker they reach; doctor says which
// is missing.
func TestClusterDispatch(t *testing.T) {
	tm := config.Team{Name: "demo", Engine: config.EngineKubernetes, Tracker: config.TrackerLocal}
	c := checkClusterDispatch("/cfg/legion.toml", tm)
	if c.Status != Fail || !strings.Contains(c.Detail, "kubernetes.repository is not set") || !strings.Contains(c.Detail, `tracker = "local"`) || !strings.Contains(c.Fix, "/cfg/legion.toml") {
		t.Errorf("a local-tracker team without a repository: %+v; want a failure naming both and the file", c)
	}
	tm.Tracker, tm.Kubernetes.Repository = config.TrackerLinear, "https://git.example/demo.git"
	if c := checkClusterDispatch("/cfg/legion.toml", tm); c.Status != OK || !strings.Contains(c.Detail, "https://git.example/demo.git") {
		t.Errorf("a Linear team with a repository: %+v; want OK naming the repository", c)
	}
}
