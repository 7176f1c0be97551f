package doctor

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestKube: legion doctor checks a Kubernetes team against a real API
// server: what it found when all is well, and each problem named with
// what to fix: an unknown context, a missing namespace, a user RBAC
// does not allow, a storage class the cluster lacks.
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
	bin := sdtest.KubeBinary(t)
	team := config.Team{Name: "demo", Engine: config.EngineKubernetes, Kubernetes: config.Kubernetes{
		Kubeconfig: c.Kubeconfig, Namespace: "legion-demo", Image: "reg.example/legion-worker:1", StorageClass: "standard", Storage: "1Gi",
	}}
	check := func(mut func(*config.Team)) Check {
		tm := team
		mut(&tm)
		return checkKube(ctx, "/cfg/legion.toml", bin, tm, workerEnv{})
	}
	expect(t, check(func(*config.Team) {}), OK, "RBAC allows every verb; storage class standard", "")
	expect(t, check(func(t *config.Team) { t.Kubernetes.Context = "prod" }), Fail, `kubernetes.context "prod": no such context in `+c.Kubeconfig, "[teams.demo.kubernetes]")
	expect(t, check(func(t *config.Team) { t.Kubernetes.Namespace = "nowhere" }), Fail, "namespace nowhere does not exist", "")
	expect(t, check(func(t *config.Team) { t.Kubernetes.StorageClass = "fast" }), Fail, "storage class fast does not exist (the cluster has: standard)", "")
	expect(t, check(func(t *config.Team) { t.Kubernetes.StorageClass = "" }), Fail, "no default storage class", "")

	raw, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name := range raw.AuthInfos {
		raw.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: c.RestrictedConfig.BearerToken}
	}
	restricted := filepath.Join(t.TempDir(), "restricted.kubeconfig")
	if err := clientcmd.WriteToFile(*raw, restricted); err != nil {
		t.Fatal(err)
	}
	expect(t, check(func(t *config.Team) { t.Kubernetes.Kubeconfig = restricted }), Fail,
		"may not create jobs, get jobs, list jobs, watch jobs, delete jobs, get pods, list pods, watch pods, create pods/exec, create secrets, create persistentvolumeclaims in namespace legion-demo", "")

	// The kubeconfig the helper reads: the manager's $KUBECONFIG without
	// kubernetes.kubeconfig.
	tm := team
	tm.Kubernetes.Kubeconfig = ""
	expect(t, checkKube(ctx, "/cfg/legion.toml", bin, tm, workerEnv{env: []string{"KUBECONFIG=" + c.Kubeconfig}}), OK, "namespace legion-demo", "")
}
