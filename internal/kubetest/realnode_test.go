package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/internal/waitfor"
)

// TestRealNode: a real kubelet with containerd and runc (Options.RealNode)
// registers Ready; a hardened pod of an image loaded with LoadImage (the
// machine's dash in one layer) runs on the pod network and its log comes
// back through the API server; after the cluster's cleanup no bridge,
// cgroup or mount of the node is left.
func TestRealNode(t *testing.T) {
	var dir, cgroup string
	t.Run("node", func(t *testing.T) {
		c := Start(t, Options{Nodes: -1, RealNode: true})
		dir, cgroup = c.node.dir, c.node.cgroup
		tar := filepath.Join(t.TempDir(), "shell.tar")
		if out, err := exec.Command(filepath.Join(c.node.bin, "legion-oci-archive"), tar, "legion.test/shell:1", "/bin/sh", "/bin/dash=/bin/sh",
			"/lib/x86_64-linux-gnu/libc.so.6=/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2=/lib64/ld-linux-x86-64.so.2").CombinedOutput(); err != nil {
			t.Fatalf("legion-oci-archive: %v: %s", err, out)
		}
		c.LoadImage(t, tar)
		no, yes, uid := false, true, int64(1000)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hi", Namespace: "default"},
			Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: &no,
				SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "sh", Image: "legion.test/shell:1", ImagePullPolicy: corev1.PullNever,
					Command: []string{"/bin/sh", "-c", `while read -r k v; do case $k in Uid:|CapEff:) echo $k $v;; esac; done < /proc/self/status`},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				}},
			},
		}
		ctx := t.Context()
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var got *corev1.Pod
		waitfor.Check(t, 2*time.Minute, "pod hi Succeeded on "+RealNodeName, func() error {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, "hi", metav1.GetOptions{})
			if err != nil {
				return err
			}
			got = p
			if p.Status.Phase != corev1.PodSucceeded {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			return nil
		})
		if got.Spec.NodeName != RealNodeName || !strings.HasPrefix(got.Status.PodIP, "10.77.20.") {
			t.Errorf("pod hi ran on %q at %q; want %s, an address in %s", got.Spec.NodeName, got.Status.PodIP, RealNodeName, realPodCIDR)
		}
		b, err := c.Client.CoreV1().Pods("default").GetLogs("hi", &corev1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		log := strings.Join(strings.Fields(string(b)), " ")
		if want := "Uid: 1000 1000 1000 1000 CapEff: 0000000000000000"; log != want {
			t.Errorf("pod hi's log %q; want %q", log, want)
		}
	})
	if dir == "" {
		return
	}
	for _, br := range []string{realBridge, realCNIBridge} {
		if ipCmd("link", "show", br) == nil {
			t.Errorf("bridge %s left behind", br)
		}
	}
	for _, h := range append(cgroupHierarchies(), "/sys/fs/cgroup/unified") {
		if _, err := os.Stat(filepath.Join(h, cgroup)); err == nil {
			t.Errorf("cgroup %s left behind", filepath.Join(h, cgroup))
		}
	}
	if m, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(m), dir) {
		t.Errorf("mounts under %s left behind", dir)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s left behind", dir)
	}
}
