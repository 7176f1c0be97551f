package kubetest_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/legion-dev/legion/internal/kubetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/packaging/image"
)

// TestRunPods runs pods on simulated (kwok) nodes whose containers the
// test runs with runc, against the real Job controller: exit codes,
// the claim's data kept for the Job's next pod, the pod's user, groups
// and read-only root seen from inside, exec and pods/log through the API
// server, and the container killed with its Job.
func TestRunPods(t *testing.T) {
	// ExecDir too: a pod the runner runs has its own kwok Exec, which kwok
	// must prefer to ExecDir's ClusterExec (exec below reads ./hello in
	// the working directory, which ExecDir does not have).
	// PodBinds: a directory of this machine under /tmp, which the pod's
	// /tmp emptyDir would hide, carries a program the pod runs.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "hello-bin"), []byte("#!/bin/sh\necho bound program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := kubetest.Start(t, kubetest.Options{RunPods: true, ExecDir: t.TempDir(), PodBinds: []string{bin}})
	ctx := t.Context()

	t.Run("a failed pod's replacement sees what it wrote on the claim", func(t *testing.T) {
		claim(t, c, "resume")
		job := runJob(t, c, "resume", 1, `if [ -f /legion/first ]; then echo "second saw $(cat /legion/first)"; exit 0; fi; echo one > /legion/first; exit 3`)
		job.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "issue", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "resume"}}}}
		job.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "issue", MountPath: "/legion"}}
		job = createJob(t, c, job)
		waitfor.Check(t, wait, "Job resume Complete after a pod that failed with exit code 3", func() error {
			j, err := c.Client.BatchV1().Jobs("default").Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !jobCondition(j, batchv1.JobComplete) {
				return fmt.Errorf("job conditions %v, pods %v", j.Status.Conditions, summary(jobPods(t, c, job)))
			}
			return nil
		})
		var codes []int32
		var second string
		for _, p := range jobPods(t, c, job) {
			for _, st := range p.Status.ContainerStatuses {
				if st.State.Terminated != nil {
					codes = append(codes, st.State.Terminated.ExitCode)
				}
			}
			if p.Status.Phase == corev1.PodSucceeded {
				second = p.Name
			}
		}
		if fmt.Sprint(codes) != "[3 0]" && fmt.Sprint(codes) != "[0 3]" {
			t.Errorf("the Job's pods ended with exit codes %v; want 3 (the first) and 0", codes)
		}
		if got := podLog(t, c, second); got != "second saw one\n" {
			t.Errorf("pods/log of %s = %q; want %q", second, got, "second saw one\n")
		}
		if b, err := os.ReadFile(filepath.Join(c.VolumeDir("default", "resume"), "first")); err != nil || string(b) != "one\n" {
			t.Errorf("the claim's file on this machine: %q, %v; want %q", b, err, "one\n")
		}
		// What a failed test logs of the namespace.
		d := c.Describe(ctx, "default")
		for _, want := range []string{
			"job " + job.Name + ": active 0, succeeded 1, failed 1",
			"claim resume: Bound",
			"phase Failed", "terminated, exit code 3", "exited with code 3",
			"phase Succeeded", "stdout F second saw one",
			"event ", "Scheduled",
		} {
			if !strings.Contains(d, want) {
				t.Errorf("Describe(default) has no %q:\n%s", want, d)
			}
		}
	})

	t.Run("the container runs as the pod asks, exec and logs reach it, deleting the Job kills it", func(t *testing.T) {
		const specJSON = `{"spec":true}`
		if _, err := c.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "spec"}, Data: map[string][]byte{"spec.json": []byte(specJSON)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		job := runJob(t, c, "hardened", 0, `id -u; id -G; touch /var/tmp/x 2>&1 | grep -q 'Read-only file system' && echo root read-only
stat -c '%a %u:%g' /run/legion-spec/spec.json; cat /run/legion-spec/spec.json; echo
grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status
python3 -c 'import os; os.openpty(); print("a pty")'; "$BIN"/hello-bin
echo "hello from pid $$" > /run/legion/hello; echo ready; exec sleep 1000`)
		secretMode, uid, no, yes := int32(0o440), int64(1000), false, true
		spec := &job.Spec.Template.Spec
		spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		spec.Volumes = []corev1.Volume{
			{Name: "spec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "spec", DefaultMode: &secretMode}}},
			{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
		ctr := &spec.Containers[0]
		ctr.VolumeMounts = []corev1.VolumeMount{
			{Name: "spec", MountPath: "/run/legion-spec", ReadOnly: true},
			{Name: "run", MountPath: "/run/legion"},
			{Name: "tmp", MountPath: "/tmp"},
		}
		ctr.Env = []corev1.EnvVar{{Name: "HELLO", Value: "/run/legion/hello"}, {Name: "SPEC", Value: "/run/legion-spec/spec.json"}, {Name: "BIN", Value: bin}}
		ctr.WorkingDir = "/run/legion"
		ctr.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		ctr.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
		job = createJob(t, c, job)
		pod := runningPod(t, c, job)
		pid := c.ContainerPID(t, "default", pod.Name)
		cgroup := cgroupDir(t, pid, "memory")
		for file, want := range map[string]string{
			filepath.Join(cgroup, "memory.limit_in_bytes"):               "67108864", // 64Mi
			filepath.Join(cgroupDir(t, pid, "cpu"), "cpu.cfs_quota_us"):  "50000",    // 500m of 100 ms
			filepath.Join(cgroupDir(t, pid, "cpu"), "cpu.cfs_period_us"): "100000",
		} {
			if b, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != want {
				t.Errorf("%s: %q, %v; want %s (the container's limits)", file, b, err, want)
			}
		}

		var out string
		waitfor.Check(t, wait, "pods/log of "+pod.Name+" up to ready", func() error {
			b, err := c.Client.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{Container: "worker"}).DoRaw(ctx)
			if err != nil {
				return err
			}
			out = string(b)
			if !strings.HasSuffix(out, "ready\n") {
				return fmt.Errorf("log so far %q", out)
			}
			return nil
		})
		want := "1000\n1000\nroot read-only\n440 0:1000\n" + specJSON + "\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\na pty\nbound program\nready\n"
		if out != want {
			t.Errorf("pods/log of %s = %q; want %q", pod.Name, out, want)
		}

		// exec finds the container's files through its env and working
		// directory (kwok sees the pod's Exec a moment after the runner
		// makes it: until then exec finds no target).
		var stdout, stderr strings.Builder
		waitfor.Check(t, wait, "exec in pod "+pod.Name, func() error {
			stdout.Reset()
			stderr.Reset()
			req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod.Name).
				SubResource("exec").VersionedParams(&corev1.PodExecOptions{
				Container: "worker",
				Command:   []string{"sh", "-c", `cat "$HELLO" ./hello "$SPEC"; echo; id -u`},
				Stdout:    true, Stderr: true,
			}, scheme.ParameterCodec)
			ex, err := remotecommand.NewWebSocketExecutor(c.Config, "GET", req.URL().String())
			if err != nil {
				return waitfor.Stop(err)
			}
			if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
				return fmt.Errorf("exec: %v (stderr %q)", err, stderr.String())
			}
			return nil
		})
		if want := "hello from pid 1\nhello from pid 1\n" + specJSON + "\n1000\n"; stdout.String() != want {
			t.Errorf("exec stdout = %q (stderr %q); want %q", stdout.String(), stderr.String(), want)
		}

		bg := metav1.DeletePropagationBackground
		if err := c.Client.BatchV1().Jobs("default").Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
		waitfor.Check(t, wait, fmt.Sprintf("the container's process %d gone", pid), func() error {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill -0 %d: %v", pid, err)
			}
			return nil
		})
		waitfor.Check(t, wait, "the container's cgroup "+cgroup+" removed", func() error {
			if _, err := os.Stat(cgroup); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("stat %s: %v", cgroup, err)
			}
			return nil
		})
		waitfor.Check(t, wait, "the pod's overlay and tmpfs unmounted", func() error {
			b, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				return waitfor.Stop(err)
			}
			if dir := filepath.Join(c.Dir, "pods"); strings.Contains(string(b), dir) {
				return fmt.Errorf("/proc/self/mountinfo still has mounts under %s", dir)
			}
			return nil
		})
		waitfor.Check(t, wait, "pod "+pod.Name+" gone", func() error {
			_, err := c.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("pod %s: %v", pod.Name, err)
		})
	})

	t.Run("a pod ended by someone else has its container killed", func(t *testing.T) {
		// As the pod garbage collector ends the pods of a lost node.
		job := createJob(t, c, runJob(t, c, "ended", 0, "exec sleep 1000"))
		pod := runningPod(t, c, job)
		pid := c.ContainerPID(t, "default", pod.Name)
		c.EndPod(t, "default", pod.Name, 137)
		waitfor.Check(t, wait, fmt.Sprintf("the container's process %d gone", pid), func() error {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill -0 %d: %v", pid, err)
			}
			return nil
		})
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st := p.Status.ContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 137 {
			t.Errorf("pod %s container statuses %+v; want the end the test reported (137), not the runner's", pod.Name, st)
		}
	})

	t.Run("a container over its memory limit ends OOMKilled", func(t *testing.T) {
		j := runJob(t, c, "oom", 0, `python3 -c 'b = bytearray(256 << 20); b[::4096] = b"x" * len(b[::4096])'`)
		j.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}
		job := createJob(t, c, j)
		var st *corev1.ContainerStateTerminated
		waitfor.Check(t, wait, "the pod of Job oom ended", func() error {
			for _, p := range jobPods(t, c, job) {
				if s := p.Status.ContainerStatuses; p.Status.Phase == corev1.PodFailed && len(s) == 1 && s[0].State.Terminated != nil {
					st = s[0].State.Terminated
					return nil
				}
			}
			return fmt.Errorf("pods %v", summary(jobPods(t, c, job)))
		})
		if st.Reason != "OOMKilled" || st.ExitCode != 137 {
			t.Errorf("the pod of Job oom ended with reason %q, exit code %d; want OOMKilled, 137 (SIGKILL)", st.Reason, st.ExitCode)
		}
	})

	t.Run("a lost node's container is killed", func(t *testing.T) {
		c.AddNode(t, "doomed")
		j := runJob(t, c, "lost", 0, "exec sleep 1000")
		j.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "doomed"}
		pod := runningPod(t, c, createJob(t, c, j))
		pid := c.ContainerPID(t, "default", pod.Name)
		begin := time.Now()
		c.DeleteNode(t, "doomed")
		waitfor.Check(t, wait, fmt.Sprintf("the container's process %d gone", pid), func() error {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill -0 %d: %v", pid, err)
			}
			return nil
		})
		t.Logf("the pod garbage collector ended the pod, and the runner its container, %v after the node was deleted", time.Since(begin).Round(time.Second))
	})
}

// runJob is a Job of one pod whose container "worker" runs script with
// /bin/sh -c.
func runJob(t *testing.T, c *kubetest.Cluster, name string, backoffLimit int32, script string) *batchv1.Job {
	t.Helper()
	j := jobSpec(name, backoffLimit)
	no := false
	j.Spec.Template.Spec.AutomountServiceAccountToken = &no // as Legion's: the runner mounts no projected volume
	j.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", script}
	return j
}

func createJob(t *testing.T, c *kubetest.Cluster, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	j, err := c.Client.BatchV1().Jobs("default").Create(t.Context(), j, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job: %v", err)
	}
	return j
}

// claim makes a claim named name in namespace default and a volume bound
// to it beforehand (the cluster has no provisioner), so the scheduler can
// place a pod that mounts it.
func claim(t *testing.T, c *kubetest.Cluster, name string) {
	t.Helper()
	ctx := t.Context()
	none := ""
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: size, AccessModes: rwo, StorageClassName: none,
			ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: c.VolumeDir("default", name)}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: rwo, StorageClassName: &none, VolumeName: name,
			Resources: corev1.VolumeResourceRequirements{Requests: size},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podLog is pods/log of the pod's container, through the API server.
func podLog(t *testing.T, c *kubetest.Cluster, pod string) string {
	t.Helper()
	b, err := c.Client.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{Container: "worker"}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("pods/log of %s: %v", pod, err)
	}
	return string(b)
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, cond := range j.Status.Conditions {
		if cond.Type == typ && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// cgroupDir is the directory of process pid's cgroup in the hierarchy of
// controller (cgroup v1, as on this machine kind), which must exist and
// be the runner's (kubetest-<pod uid>).
func cgroupDir(t *testing.T, pid int, controller string) string {
	t.Helper()
	file := fmt.Sprintf("/proc/%d/cgroup", pid)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !slices.Contains(strings.Split(parts[1], ","), controller) {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup", parts[1], parts[2])
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("%s names %s cgroup %s: %v", file, controller, parts[2], err)
		}
		if !strings.Contains(parts[2], "kubetest-") {
			t.Fatalf("%s names %s cgroup %s; want the runner's, kubetest-<pod uid>", file, controller, parts[2])
		}
		return dir
	}
	t.Fatalf("%s has no %s line (cgroup v1): %q", file, controller, b)
	return ""
}

// TestRunPodsCleanup: a container still running when its test ends is
// killed, its cgroup removed and its mounts unmounted by the test's
// cleanup.
func TestRunPodsCleanup(t *testing.T) {
	var pid int
	var cgroup, pods string
	t.Run("leave a container running", func(t *testing.T) {
		c := kubetest.Start(t, kubetest.Options{RunPods: true})
		job := createJob(t, c, runJob(t, c, "left", 0, "exec sleep 1000"))
		pod := runningPod(t, c, job)
		pid = c.ContainerPID(t, "default", pod.Name)
		cgroup = cgroupDir(t, pid, "memory")
		pods = filepath.Join(c.Dir, "pods")
	})
	if pid == 0 {
		t.Fatal("the subtest ran no container")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after the test, kill -0 %d (the container's first process): %v; want ESRCH", pid, err)
	}
	if _, err := os.Stat(cgroup); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the test, stat %s (the container's cgroup): %v; want it removed", cgroup, err)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), pods) {
		t.Errorf("after the test, /proc/self/mountinfo has mounts under %s", pods)
	}
}

// TestRunPodsImageRoot: with Options.PodRoot a container's root is that
// directory (here a root of nothing but sh and the libraries it needs),
// not this machine's /, and its env starts from Options.PodEnv.
func TestRunPodsImageRoot(t *testing.T) {
	root := t.TempDir()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ldd", sh).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", sh, err)
	}
	libs, err := image.ParseLdd(string(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(libs, sh+":/bin/sh") {
		src, dst, ok := strings.Cut(f, ":")
		if !ok {
			dst = src
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(dst)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dst), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := kubetest.Start(t, kubetest.Options{RunPods: true, PodRoot: root, PodEnv: []string{"PATH=/bin", "FROM_IMAGE=image"}})
	j := runJob(t, c, "image", 0, `echo "$FROM_IMAGE $PATH"; if [ -e /usr/bin/python3 ]; then echo the host root; else echo the image root; fi`)
	j.Spec.Template.Spec.Containers[0].Command[0] = "sh" // found by the image's PATH
	j.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "FROM_IMAGE", Value: "pod"}}
	job := createJob(t, c, j)
	waitfor.Check(t, wait, "Job image Complete", func() error {
		got, err := c.Client.BatchV1().Jobs("default").Get(t.Context(), job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !jobCondition(got, batchv1.JobComplete) {
			return fmt.Errorf("job conditions %v, pods %v", got.Status.Conditions, summary(jobPods(t, c, job)))
		}
		return nil
	})
	pods := jobPods(t, c, job)
	if len(pods) != 1 {
		t.Fatalf("Job image has pods %v; want one", summary(pods))
	}
	if got, want := podLog(t, c, pods[0].Name), "pod /bin\nthe image root\n"; got != want {
		t.Errorf("pods/log = %q; want %q (the pod's env over the image's, the image's root)", got, want)
	}
}
