package kubetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube"
	"github.com/legion-dev/legion/activation/kube/wire"
)

// hardenedPod is a pod as Legion's engine makes one (activation/kube).
func hardenedPod() *corev1.Pod {
	uid, no, yes, mode := int64(1000), false, true, int32(0o440)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid, SupplementalGroups: []int64{7}},
			Volumes: []corev1.Volume{
				{Name: "issue", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
				{Name: "spec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: &mode}}},
			},
			Containers: []corev1.Container{{
				Name: "worker", Command: []string{"legion-pty-worker"}, Args: []string{"--spec", "/run/legion-spec/spec.json"},
				Env:          []corev1.EnvVar{{Name: "HOME", Value: "/legion/home"}},
				WorkingDir:   "/legion",
				VolumeMounts: []corev1.VolumeMount{{Name: "issue", MountPath: "/legion"}, {Name: "spec", MountPath: "/run/legion-spec"}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

func TestOCISpec(t *testing.T) {
	pod := hardenedPod()
	dirs := map[string]string{"issue": "/h/volumes/ns/c", "spec": "/h/pods/x/v/spec"}
	mounts, err := containerMounts(pod, &pod.Spec.Containers[0], dirs)
	if err != nil {
		t.Fatal(err)
	}
	wantMounts := []volumeMount{{host: "/h/volumes/ns/c", container: "/legion"}, {host: "/h/pods/x/v/spec", container: "/run/legion-spec", readOnly: true}}
	if d := cmp.Diff(wantMounts, mounts, cmp.AllowUnexported(volumeMount{})); d != "" {
		t.Errorf("containerMounts (-want +got):\n%s", d)
	}
	s, err := ociSpec(pod, nil, mounts, "kubetest-x")
	if err != nil {
		t.Fatal(err)
	}
	wantProc := &specs.Process{
		User:            specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 7}},
		Args:            []string{"legion-pty-worker", "--spec", "/run/legion-spec/spec.json"},
		Env:             []string{"PATH=" + defaultPath, "HOSTNAME=p", "HOME=/legion/home"},
		Cwd:             "/legion",
		Capabilities:    &specs.LinuxCapabilities{},
		NoNewPrivileges: true,
	}
	if d := cmp.Diff(wantProc, s.Process); d != "" {
		t.Errorf("ociSpec process (-want +got):\n%s", d)
	}
	if !s.Root.Readonly || s.Root.Path != "rootfs" || s.Hostname != "p" || s.Linux.CgroupsPath != "kubetest-x" {
		t.Errorf("ociSpec root %+v, hostname %q, cgroupsPath %q; want rootfs read-only, p, kubetest-x", s.Root, s.Hostname, s.Linux.CgroupsPath)
	}
	var ns []specs.LinuxNamespaceType
	for _, n := range s.Linux.Namespaces {
		ns = append(ns, n.Type)
	}
	if d := cmp.Diff([]specs.LinuxNamespaceType{specs.MountNamespace, specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace}, ns); d != "" {
		t.Errorf("namespaces (-want +got):\n%s", d)
	}
	last := s.Mounts[len(s.Mounts)-1]
	if last.Destination != "/run/legion-spec" || last.Source != "/h/pods/x/v/spec" || !strings.Contains(strings.Join(last.Options, ","), "ro") {
		t.Errorf("the secret's mount = %+v; want /h/pods/x/v/spec bound read-only on /run/legion-spec", last)
	}

	// Without hardening: the runtime's default capabilities, new
	// privileges allowed, a writable root, root's user.
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Command: []string{"sh"}, Env: []corev1.EnvVar{{Name: "PATH", Value: "/bin"}},
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_PTRACE"}, Drop: []corev1.Capability{"KILL"}}},
	}}}}
	s, err = ociSpec(plain, []string{"PATH=/image/bin", "LANG=C"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	caps := strings.Join(s.Process.Capabilities.Effective, " ")
	if s.Process.NoNewPrivileges || s.Root.Readonly || s.Process.User.UID != 0 || s.Process.Cwd != "/" ||
		!strings.Contains(caps, "CAP_SYS_PTRACE") || strings.Contains(caps, "CAP_KILL") || !strings.Contains(caps, "CAP_CHOWN") ||
		strings.Join(s.Process.Env, " ") != "PATH=/bin LANG=C HOSTNAME=q" {
		t.Errorf("ociSpec of a plain pod: process %+v, caps %s, root %+v; want uid 0 in /, the default caps but KILL, plus SYS_PTRACE, new privileges allowed, a writable root, the image env with its own PATH in the image's place", s.Process, caps, s.Root)
	}
}

func TestOCISpecRefuses(t *testing.T) {
	zero, yes := int64(0), true
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		want   string // in the error
	}{
		{"no command", func(p *corev1.Pod) { p.Spec.Containers[0].Command = nil }, "command is empty"},
		{"two containers", func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) }, "exactly one container"},
		{"an init container", func(p *corev1.Pod) { p.Spec.InitContainers = p.Spec.Containers }, "exactly one container"},
		{"valueFrom", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{}}}
		}, "env X uses valueFrom"},
		{"privileged", func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Privileged = &yes }, "privileged is true"},
		{"root with runAsNonRoot", func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = &zero }, "runAsNonRoot is true and the user is root"},
		{"a relative workingDir", func(p *corev1.Pod) { p.Spec.Containers[0].WorkingDir = "legion" }, `workingDir "legion"`},
		{"a Localhost seccomp profile", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}
		}, "seccompProfile Localhost: not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := hardenedPod()
			tc.change(pod)
			_, err := ociSpec(pod, nil, nil, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pod ns/p") {
				t.Errorf("ociSpec = %v; want an error naming pod ns/p and containing %q", err, tc.want)
			}
		})
	}
	pod := hardenedPod()
	pod.Spec.Containers[0].VolumeMounts[0].SubPath = "../escape"
	if _, err := containerMounts(pod, &pod.Spec.Containers[0], map[string]string{"issue": "/a", "spec": "/b"}); err == nil {
		t.Error("containerMounts with subPath ../escape = nil error; want a refusal")
	}
	if _, err := containerMounts(pod, &pod.Spec.Containers[0], map[string]string{"spec": "/b"}); err == nil || !strings.Contains(err.Error(), `"issue"`) {
		t.Errorf("containerMounts of an undeclared volume = %v; want an error naming it", err)
	}
}

func TestHostPath(t *testing.T) {
	mounts := []volumeMount{{host: "/h/issue", container: "/legion"}, {host: "/h/home", container: "/legion/home"}, {host: "/h/run", container: "/run/legion"}}
	for _, tc := range []struct{ in, want string }{
		{"/legion", "/h/issue"},
		{"/legion/wt/x", "/h/issue/wt/x"},
		{"/legion/home/.claude", "/h/home/.claude"}, // the deepest mount
		{"/run/legion/worker.sock", "/h/run/worker.sock"},
		{"/run/legion/../legion/s", "/h/run/s"},
		{"/legionx", ""},
		{"/usr/bin", ""},
		{"relative/legion", ""},
		{"a value", ""},
	} {
		if got := hostPath(mounts, tc.in); got != tc.want {
			t.Errorf("hostPath(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// TestCRILog: each line of each stream is one line of the CRI log format
// (k8s.io/cri-client/pkg/logs parses "<RFC 3339 time> <stream> <F|P>
// <text>"); a line longer than the buffer is split into partial lines.
func TestCRILog(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	l := &criLog{f: f}
	long := strings.Repeat("x", 20<<10)
	l.copy("stdout", strings.NewReader("one\n\ntwo"))
	l.copy("stderr", strings.NewReader(long+"\n"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z) (stdout|stderr) ([FP]) (.*)$`)
	var got []string
	for _, s := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		m := line.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("log line %.80q is not in the CRI format", s)
		}
		got = append(got, m[3]+" "+m[4]+" "+strings.ReplaceAll(m[5], long[:16<<10], "<16K>"))
	}
	want := []string{"stdout F one", "stdout F ", "stdout P two", "stderr P <16K>", "stderr F " + long[:4<<10]}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("log lines (-want +got):\n%s", d)
	}
}

// TestOCISpecOfLegionPod: the pod of a Legion session (activation/kube's
// Job template) is one the runner runs, as the hardening asks.
func TestOCISpecOfLegionPod(t *testing.T) {
	objs, err := kube.Build(api.KubeTarget{Namespace: "team", Image: "legion-worker:test", Storage: "1Gi", SecretName: "keys",
		CPURequest: "500m", CPULimit: "1500m", MemoryRequest: "1Gi", MemoryLimit: "2Gi"},
		wire.Spawn{ID: "0123456789abcdef", Name: "LIN-1-plan", TeamID: "0123456789abcdef", Issue: "LIN-1", Mode: "plan", Spec: []byte("{}"), StartLimitBurst: 3})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"}, Spec: objs.Job.Spec.Template.Spec}
	dirs := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		dirs[v.Name] = "/h/" + v.Name
	}
	mounts, err := containerMounts(pod, &pod.Spec.Containers[0], dirs)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ociSpec(pod, nil, mounts, "kubetest-x")
	if err != nil {
		t.Fatalf("ociSpec of Legion's pod: %v", err)
	}
	if u := s.Process.User; u.UID != 1000 || u.GID != 1000 || !s.Root.Readonly || !s.Process.NoNewPrivileges || len(s.Process.Capabilities.Bounding) != 0 {
		t.Errorf("Legion's pod runs as %+v, read-only root %v, no new privileges %v, capabilities %v; want 1000:1000, true, true, none", u, s.Root.Readonly, s.Process.NoNewPrivileges, s.Process.Capabilities.Bounding)
	}
	if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno || len(s.Linux.Seccomp.Syscalls) == 0 {
		t.Errorf("Legion's pod asks for seccomp RuntimeDefault; ociSpec gives %+v, want containerd's default profile (deny by default)", s.Linux.Seccomp)
	}
	if r := s.Linux.Resources; r.CPU == nil || r.CPU.Shares == nil || *r.CPU.Shares != 512 || r.CPU.Quota == nil || *r.CPU.Quota != 150000 ||
		r.CPU.Period == nil || *r.CPU.Period != 100000 || r.Memory == nil || r.Memory.Limit == nil || *r.Memory.Limit != 2<<30 {
		t.Errorf("Legion's pod (cpu 500m request, 1500m limit, memory limit 2Gi) gets resources cpu %+v, memory %+v; want shares 512, quota 150000 per 100000, limit 2Gi", r.CPU, r.Memory)
	}
	if got := hostPath(mounts, wire.RuntimeDir+"/worker.sock"); got != "/h/run/worker.sock" {
		t.Errorf("the worker's socket directory %s is %q on this machine; want /h/run/worker.sock", wire.RuntimeDir, got)
	}
	for _, m := range mounts {
		if m.readOnly != (m.container == wire.SpecDir || m.container == wire.SecretsDir) {
			t.Errorf("mount %+v: want only the spec and the team's secrets read-only", m)
		}
	}
}

// FuzzCRILog: whatever a container writes, the log is lines of the CRI
// format whose contents, read as k8s.io/cri-client/pkg/logs reads them
// (P: a part of a line; F: the line's end), give back exactly what it
// wrote.
func FuzzCRILog(f *testing.F) {
	f.Add([]byte("one\n\ntwo"))
	f.Add([]byte(strings.Repeat("x", 17<<10) + "\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		file, err := os.Create(filepath.Join(t.TempDir(), "log"))
		if err != nil {
			t.Fatal(err)
		}
		(&criLog{f: file}).copy("stdout", bytes.NewReader(in))
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(file.Name())
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for len(b) > 0 {
			line, rest, ok := bytes.Cut(b, []byte("\n"))
			if !ok {
				t.Fatalf("the log ends without a newline: %.80q", line)
			}
			b = rest
			parts := bytes.SplitN(line, []byte(" "), 4)
			if len(parts) != 4 || string(parts[1]) != "stdout" {
				t.Fatalf("log line %.80q: want <time> stdout <F|P> <text>", line)
			}
			if _, err := time.Parse(time.RFC3339Nano, string(parts[0])); err != nil {
				t.Fatalf("log line %.80q: %v", line, err)
			}
			got = append(got, parts[3]...)
			switch string(parts[2]) {
			case "F":
				got = append(got, '\n')
			case "P":
			default:
				t.Fatalf("log line %.80q: tag %q; want F or P", line, parts[2])
			}
		}
		if !bytes.Equal(got, in) {
			t.Errorf("the log reads back as %.80q; want %.80q", got, in)
		}
	})
}

func TestCounter(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3, true},               // cgroup v1 memory.oom_control
		{"low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n", 1, true}, // v2 memory.events
		{"oom_kill_disable 0\n", 0, false},
		{"oom_kill x\n", 0, false},
		{"", 0, false},
	} {
		got, err := counter([]byte(tc.in), "oom_kill")
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("counter(%q, oom_kill) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzCounter: any cgroup file gives a count or an error, and a file
// whose first oom_kill line says N gives N.
func FuzzCounter(f *testing.F) {
	f.Add([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), uint64(7))
	f.Fuzz(func(t *testing.T, data []byte, n uint64) {
		if _, err := counter(data, "oom_kill"); err != nil && !strings.Contains(err.Error(), "oom_kill") {
			t.Errorf("counter(%q) = %v; want an error naming the key", data, err)
		}
		if bytes.Contains(data, []byte("oom_kill ")) {
			return
		}
		file := append(append([]byte(nil), data...), fmt.Sprintf("\noom_kill %d\n", n)...)
		if got, err := counter(file, "oom_kill"); err != nil || got != n {
			t.Errorf("counter(%q) = %d, %v; want %d", file, got, err, n)
		}
	})
}

func TestReachable(t *testing.T) {
	const uid, gid = 4242, 4243 // nobody's: the others' bits apply
	base := t.TempDir()
	parent := filepath.Dir(base) // the test's own, made 0700 by the testing package
	for _, d := range []string{parent, base} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	closed := filepath.Join(base, "closed")
	unreadable := filepath.Join(base, "unreadable")
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Join(base, "bin"), 0o755}, {closed, 0o700}, {filepath.Join(closed, "bin"), 0o755}, {unreadable, 0o711}} {
		if err := os.Mkdir(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dir  string
		uid  uint32
		want string // in the error; "" for none
	}{
		{filepath.Join(base, "bin"), uid, ""},
		{filepath.Join(closed, "bin"), uid, "may not search " + closed + " (mode 0700"},
		{unreadable, uid, "may not read " + unreadable + " (mode 0711"},
		{filepath.Join(closed, "bin"), 0, ""}, // root
	} {
		err := reachable(tc.dir, tc.uid, []uint32{gid})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("reachable(%s, %d) = %v; want nil", tc.dir, tc.uid, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("reachable(%s, %d) = %v; want an error containing %q", tc.dir, tc.uid, err, tc.want)
		}
	}
}
