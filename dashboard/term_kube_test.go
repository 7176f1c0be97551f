package dashboard

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// TestTermOnCluster: the browser terminal of a session on Kubernetes. The
// dashboard asks the helper to attach as for any session; the helper's
// descriptor is a relay through the API server's exec into the session's
// pod (marked relayed, so the page gets data frames, not the mapped
// ring). The pod runs on one of kwok's simulated nodes, its container
// run by the test with runc (kubetest.Options.RunPods): the real worker,
// the scripted agent.
func TestTermOnCluster(t *testing.T) {
	binDir := filepath.Dir(sdtest.LegionBinary(t))
	sdtest.KubeBinary(t)                            // beside legion, where legion helper finds it
	if err := os.Chmod(binDir, 0o755); err != nil { // the pod's user runs the programs there
		t.Fatal(err)
	}
	path := binDir + ":/usr/bin:/bin"
	c := kubetest.Start(t, kubetest.Options{RunPods: true, PodBinds: []string{binDir}, PodEnv: []string{"PATH=" + path},
		ExecEnv: map[string]string{"PATH": path}})
	// After the cluster: sdtest's manager gives the test another HOME,
	// where the control plane's cache is not.
	f := startHelper(t)
	ctx := t.Context()
	const ns = "legion-term"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	immediate := storagev1.VolumeBindingImmediate
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "legion-test"}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &immediate,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "legion-term-pv"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:       "legion-test",
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/legion-test/term"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	const name = "term-k8s"
	if _, err := f.c.Spawn(ctx, api.SpawnArgs{
		Team: config.AdhocTeam, TeamID: config.AdhocTeamID.String(),
		Name: name, ID: uuid.NewSHA1(config.AdhocTeamID, []byte(name+":"+api.ModeSpawn)).String(),
		Mode: api.ModeSpawn, Role: "command", Cwd: "/legion", Argv: []string{f.bin, "scripted-agent", "hello"},
		Env:                []string{"LEGION_SCRIPT=say Got it: $PROMPT"},
		Cooldown:           new(api.Duration(0)),
		StartLimitBurst:    3,
		StartLimitInterval: api.Duration(10 * time.Minute),
		RingSize:           1 << 20,
		Kubernetes:         &api.KubeTarget{Kubeconfig: c.Kubeconfig, Namespace: ns, Image: "legion-worker:test", StorageClass: "legion-test", Storage: "1Gi"},
	}); err != nil {
		t.Fatal(err)
	}
	waitfor.Check(t, 2*termWait, name+" to run on the cluster", func() error {
		s, err := f.c.Status(ctx, name)
		if err != nil {
			return err
		}
		if s.Engine != api.EngineKubernetes || s.State != api.StateRunning {
			return fmt.Errorf("engine %q, state %s", s.Engine, s.State)
		}
		return nil
	})

	tc := f.dialTerm(t, name)
	tc.until("the attach and the agent's answer, through the API server", func() bool { return tc.got("attached") && tc.shows("Got it: hello")() })
	tc.send(termMessage{Type: "control"})
	tc.until("control", func() bool { return tc.got("control") })
	tc.send(termMessage{Type: "input", Data: "from the page\r"})
	tc.until("the agent's answer to the typed line", tc.shows("Got it: from the page"))
}
