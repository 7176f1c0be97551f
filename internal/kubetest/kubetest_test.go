package kubetest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
)

// wait bounds each wait for the controllers: the Job controller's first
// retry comes after a 10 s backoff; 2 shared cores may be slow.
const wait = 2 * time.Minute

// TestScriptBuildsKubeVersion: the version the package looks for in the
// cache is the one the install script builds.
func TestScriptBuildsKubeVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "install-kube-control-plane"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBE_VERSION=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/install-kube-control-plane sets no KUBE_VERSION=")
	}
	if got := string(m[1]); got != kubetest.KubeVersion {
		t.Errorf("scripts/install-kube-control-plane builds KUBE_VERSION=%s; kubetest.KubeVersion = %s", got, kubetest.KubeVersion)
	}
}

// TestCluster starts one control plane and checks, against the real Job
// controller and scheduler, what Legion's Kubernetes engine relies on.
func TestCluster(t *testing.T) {
	begin := time.Now()
	execDir := t.TempDir()
	c := kubetest.Start(t, kubetest.Options{Nodes: 2, ExecDir: execDir})
	t.Logf("Start took %v", time.Since(begin).Round(time.Millisecond))
	ctx := t.Context()

	t.Run("kubeconfig", func(t *testing.T) {
		b, err := os.ReadFile(c.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "current-context: "+kubetest.Context) {
			t.Errorf("%s has no current-context %s:\n%s", c.Kubeconfig, kubetest.Context, b)
		}
	})

	t.Run("exit 78 fails the Job by its pod failure policy", func(t *testing.T) {
		job := newJob(t, c, "exit78", 3)
		pod := runningPod(t, c, job)
		if pod.Spec.NodeName == "" || !strings.HasPrefix(pod.Spec.NodeName, "kwok-node-") {
			t.Errorf("pod %s is on node %q; want a kwok node", pod.Name, pod.Spec.NodeName)
		}
		c.EndPod(t, "default", pod.Name, 78)
		waitfor.Check(t, wait, "Job exit78 Failed by PodFailurePolicy", func() error {
			j, err := c.Client.BatchV1().Jobs("default").Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
					if cond.Reason != batchv1.JobReasonPodFailurePolicy {
						return fmt.Errorf("job failed with reason %q (%s); want %s", cond.Reason, cond.Message, batchv1.JobReasonPodFailurePolicy)
					}
					return nil
				}
			}
			return fmt.Errorf("job conditions %v", j.Status.Conditions)
		})
		// kwok left the reported end as it was: no new pod, exit code kept.
		pods := jobPods(t, c, job)
		if len(pods) != 1 {
			t.Fatalf("job exit78 has %d pods; want 1 (FailJob makes no retry)", len(pods))
		}
		p := pods[0]
		if p.Status.Phase != corev1.PodFailed || len(p.Status.ContainerStatuses) != 1 ||
			p.Status.ContainerStatuses[0].State.Terminated == nil || p.Status.ContainerStatuses[0].State.Terminated.ExitCode != 78 {
			t.Errorf("pod %s status = phase %s, containers %+v; want Failed, terminated with exit code 78", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
		}
	})

	t.Run("exit 1 is retried up to backoffLimit", func(t *testing.T) {
		job := newJob(t, c, "exit1", 1)
		first := runningPod(t, c, job)
		c.EndPod(t, "default", first.Name, 1)
		var second corev1.Pod
		waitfor.Check(t, wait, "a second pod of Job exit1, Running", func() error {
			for _, p := range jobPods(t, c, job) {
				if p.Name != first.Name && p.Status.Phase == corev1.PodRunning {
					second = p
					return nil
				}
			}
			return fmt.Errorf("no second running pod")
		})
		c.EndPod(t, "default", second.Name, 1)
		waitfor.Check(t, wait, "Job exit1 Failed with BackoffLimitExceeded", func() error {
			j, err := c.Client.BatchV1().Jobs("default").Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
					if cond.Reason != batchv1.JobReasonBackoffLimitExceeded {
						return fmt.Errorf("job failed with reason %q; want %s", cond.Reason, batchv1.JobReasonBackoffLimitExceeded)
					}
					return nil
				}
			}
			return fmt.Errorf("job conditions %v, failed pods %d", j.Status.Conditions, j.Status.Failed)
		})
	})

	t.Run("exit 0 completes the Job", func(t *testing.T) {
		job := newJob(t, c, "exit0", 1)
		pod := runningPod(t, c, job)
		c.EndPod(t, "default", pod.Name, 0)
		waitfor.Check(t, wait, "Job exit0 Complete", func() error {
			j, err := c.Client.BatchV1().Jobs("default").Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("job conditions %v", j.Status.Conditions)
		})
	})

	t.Run("the restricted user may not create Jobs", func(t *testing.T) {
		rc, err := kubernetes.NewForConfig(c.RestrictedConfig)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rc.BatchV1().Jobs("default").Create(ctx, jobSpec("forbidden", 0), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("create Job as %s: %v; want Forbidden", kubetest.RestrictedUser, err)
		}
		if !strings.Contains(err.Error(), kubetest.RestrictedUser) {
			t.Errorf("create Job as %s: %v; want the refusal to name the user", kubetest.RestrictedUser, err)
		}
	})

	t.Run("nodes come and go", func(t *testing.T) {
		c.AddNode(t, "extra")
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "extra", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cpu := n.Status.Allocatable[corev1.ResourceCPU]; cpu.String() != "32" {
			t.Errorf("node extra allocatable cpu = %s; want 32 (the default)", cpu.String())
		}
		// kwok holds the node's Lease, which keeps it Ready past the node
		// lifecycle controller's grace period.
		waitfor.Check(t, wait, "the Lease of node extra", func() error {
			l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "extra", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil {
				return fmt.Errorf("lease of node extra has holder %v, renewed %v; want held (by kwok) and renewed", l.Spec.HolderIdentity, l.Spec.RenewTime)
			}
			return nil
		})
		c.DeleteNode(t, "extra")
	})

	t.Run("a pod on a deleted node ends and the Job replaces it", func(t *testing.T) {
		c.AddNode(t, "doomed")
		job := jobSpec("lost", 1)
		job.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "doomed"}
		job, err := c.Client.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		first := runningPod(t, c, job)
		begin := time.Now()
		c.DeleteNode(t, "doomed")
		// The pod garbage collector marks the orphan Failed with a
		// DisruptionTarget condition and deletes it; the Job controller
		// counts the failure and makes a new pod, which has no node to go
		// to (Pending) until a node with that hostname comes back.
		waitfor.Check(t, wait, "a new pod of Job lost", func() error {
			for _, p := range jobPods(t, c, job) {
				if p.Name != first.Name {
					return nil
				}
			}
			return fmt.Errorf("pods %v", summary(jobPods(t, c, job)))
		})
		t.Logf("the Job replaced the pod of the deleted node after %v", time.Since(begin).Round(time.Second))
		c.AddNode(t, "doomed")
		runningPod(t, c, job)
	})

	t.Run("exec runs the command locally through the API server", func(t *testing.T) {
		job := newJob(t, c, "exec", 0)
		pod := runningPod(t, c, job)
		req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod.Name).
			SubResource("exec").VersionedParams(&corev1.PodExecOptions{
			Container: "worker",
			Command:   []string{"sh", "-c", "pwd; read line; echo got $line; echo oops >&2"},
			Stdin:     true, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
		ex, err := remotecommand.NewWebSocketExecutor(c.Config, "GET", req.URL().String())
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr strings.Builder
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("input\n"), Stdout: &stdout, Stderr: &stderr}); err != nil {
			t.Fatalf("exec in pod %s: %v (stderr %q)", pod.Name, err, stderr.String())
		}
		if want := execDir + "\ngot input\n"; stdout.String() != want {
			t.Errorf("exec stdout = %q; want %q", stdout.String(), want)
		}
		if stderr.String() != "oops\n" {
			t.Errorf("exec stderr = %q; want %q", stderr.String(), "oops\n")
		}

		// With a TTY: the command's stdin and stdout are a terminal of
		// the size the client asked for.
		req = c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod.Name).
			SubResource("exec").VersionedParams(&corev1.PodExecOptions{
			Container: "worker",
			Command:   []string{"sh", "-c", "test -t 0 && test -t 1 && stty size"},
			Stdin:     true, Stdout: true, TTY: true,
		}, scheme.ParameterCodec)
		if ex, err = remotecommand.NewWebSocketExecutor(c.Config, "GET", req.URL().String()); err != nil {
			t.Fatal(err)
		}
		sizes := make(sizeQueue, 1)
		sizes <- remotecommand.TerminalSize{Width: 91, Height: 37}
		close(sizes) // one size, then Next says there are no more
		stdout.Reset()
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader(""), Stdout: &stdout, Tty: true, TerminalSizeQueue: sizes}); err != nil {
			t.Fatalf("exec with a TTY in pod %s: %v (output %q)", pod.Name, err, stdout.String())
		}
		if got := strings.TrimSpace(stdout.String()); got != "37 91" {
			t.Errorf("exec with a TTY: stty size printed %q; want %q", got, "37 91")
		}
	})

	t.Run("deleting a pod removes it", func(t *testing.T) {
		job := newJob(t, c, "deleted", 0)
		pod := runningPod(t, c, job)
		if err := c.Client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitfor.Check(t, wait, "pod "+pod.Name+" gone", func() error {
			_, err := c.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				return fmt.Errorf("pod %s still exists", pod.Name)
			}
			return err
		})
	})
}

// jobSpec is a Job as Legion's engine makes one: one pod, never restarted
// in place, exit 78 fatal, other failures retried up to backoffLimit.
func jobSpec(name string, backoffLimit int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "legion"}},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoffLimit,
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{78}},
			}}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "worker", Image: "legion-worker:test"}},
			}},
		},
	}
}

func newJob(t *testing.T, c *kubetest.Cluster, name string, backoffLimit int32) *batchv1.Job {
	t.Helper()
	j, err := c.Client.BatchV1().Jobs("default").Create(t.Context(), jobSpec(name, backoffLimit), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job %s: %v", name, err)
	}
	return j
}

// jobPods lists the Job's pods by the controller's label.
func jobPods(t *testing.T, c *kubetest.Cluster, job *batchv1.Job) []corev1.Pod {
	t.Helper()
	l, err := c.Client.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
	if err != nil {
		t.Fatalf("list the pods of Job %s: %v", job.Name, err)
	}
	return l.Items
}

// runningPod waits until the Job has a pod that is Running and Ready on a
// node, and returns it.
func runningPod(t *testing.T, c *kubetest.Cluster, job *batchv1.Job) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	waitfor.Check(t, wait, "a Running and Ready pod of Job "+job.Name, func() error {
		pods := jobPods(t, c, job)
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					pod = p
					return nil
				}
			}
		}
		return fmt.Errorf("pods %v", summary(pods))
	})
	return pod
}

func summary(pods []corev1.Pod) []string {
	var s []string
	for _, p := range pods {
		s = append(s, fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase))
	}
	return s
}

// sizeQueue hands the exec stream the terminal sizes sent on it, until it
// is closed.
type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &s
}
