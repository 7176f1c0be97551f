package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
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

// The controller pod's team: its id starts with the manifests' short id
// (role.yaml's Lease), its tracker a fake Linear.
const (
	podTeam    = "demo"
	podTeamID  = shortID + "-3b5d-4c8e-9a7f-2d4b6c8e0a1f"
	linearKey  = "lin_api_controllerpod"
	agentsName = "legion-agents" // controller.yaml's Secret: the team's kubernetes.secret
)

// replica is one run of the controller Deployment's container as a
// process of this machine, in the environment its pod would have.
type replica struct {
	name string // its POD_NAME, the Lease's holder identity
	cmd  *exec.Cmd
	log  *lockedBuffer
	// ticks gets each heartbeat of its controller (the loop's sd_notify
	// STATUS line after every tick), read from its NOTIFY_SOCKET.
	ticks chan string
	done  chan struct{} // closed when the process has ended
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestControllerPod runs the controller Deployment's container
// (controller.yaml: legion-kube lead -- legion controller TEAM
// --with-helper) as two replicas on this machine against a real control
// plane, each in the environment its pod would have: no kubeconfig, no
// systemd, KUBERNETES_SERVICE_HOST and _PORT, and in a mount namespace of
// its own, /run holding what a kubelet mounts under /var/run/secrets: the
// service account's token (a real one, from the API server's
// TokenRequest for ServiceAccount legion), its CA and namespace, and the
// tracker's key from the team's Secret. The manifests (namespace, service
// account, role.yaml's Role, quota) are created as kubectl apply would.
// One replica takes the Lease and its controller dispatches the planner
// of a fake Linear team's Todo issue as a Job, with the Role's verbs only;
// the other waits and starts nothing. Killed (-9), the leader's controller
// and helper end with it; the other takes the Lease over, lists the
// planner's Job through its own helper before its first tick, and does
// not dispatch it again. The pods run nowhere (kwok's nodes make them
// Running): what is tested is the controller's side.
func TestControllerPod(t *testing.T) {
	if os.Getuid() != 0 {
		sdtest.Require(t, "root (a mount namespace per replica, as its pod's)", false)
	}
	for _, p := range []string{"unshare", "mount", "git"} {
		if _, err := exec.LookPath(p); err != nil {
			sdtest.Require(t, p+" (apt-get install util-linux mount git)", false)
		}
	}
	bin := sdtest.LegionBinary(t)
	sdtest.KubeBinary(t) // beside legion, where the helper and the PATH find it
	binDir := filepath.Dir(bin)

	c := kubetest.Start(t, kubetest.Options{Nodes: 1})
	ctx := t.Context()
	var deploy *appsv1.Deployment
	objs := load(t)
	slices.SortStableFunc(objs, func(a, b object) int { return applyOrder(a.obj) - applyOrder(b.obj) })
	for _, o := range objs {
		if d, ok := o.obj.(*appsv1.Deployment); ok {
			deploy = d // run below as processes, not as its pod
			continue
		}
		create(t, c, o)
	}
	if deploy == nil {
		t.Fatal("no Deployment in the manifests")
	}
	if _, err := c.Client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: agentsName},
		Data:       map[string][]byte{team.PodLinearKey: []byte(linearKey + "\n")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// What a kubelet mounts: the service account's token, CA and
	// namespace (automountServiceAccountToken), and controller.yaml's
	// Secret volume, under the pod's /run.
	tok, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "legion", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for service account %s/legion: %v", namespace, err)
	}
	run := t.TempDir()
	if err := os.Chmod(run, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := c.Config.TLSClientConfig.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(c.Config.TLSClientConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	secrets := containerSecretsMount(t, deploy)
	for path, data := range map[string][]byte{
		"secrets/kubernetes.io/serviceaccount/token":                           []byte(tok.Status.Token),
		"secrets/kubernetes.io/serviceaccount/ca.crt":                          ca,
		"secrets/kubernetes.io/serviceaccount/namespace":                       []byte(namespace),
		filepath.Join(strings.TrimPrefix(secrets, "/run/"), team.PodLinearKey): []byte(linearKey + "\n"),
	} {
		p := filepath.Join(run, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	api, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}

	// The team's legion.toml (controller.yaml's ConfigMap legion-config).
	srv := lineartest.NewServer(t, linearKey, "ENG")
	repo := bareRepo(t)
	for i, c := range deploy.Spec.Template.Spec.InitContainers { // kubernetes.repository, not the example's
		for j, a := range c.Command {
			if a == "https://git.example/demo.git" {
				deploy.Spec.Template.Spec.InitContainers[i].Command[j] = repo
			}
		}
	}
	toml := fmt.Sprintf(`[teams.%s]
id = %q
workspace = "/var/lib/legion/repo"
tracker = "linear"
linear.team_key = "ENG"
linear.credentials_file = %q
linear.api_url = %q
agent.kind = "custom"
agent.new = ["/bin/true", "{prompt}"]
agent.env = { GIT_AUTHOR_NAME = "legion", GIT_AUTHOR_EMAIL = "legion@example.com", GIT_COMMITTER_NAME = "legion", GIT_COMMITTER_EMAIL = "legion@example.com" }
engine = "kubernetes"
kubernetes.namespace = %q
kubernetes.image = "registry.example/legion-worker:1"
kubernetes.storage_class = %q
kubernetes.storage = "1Gi"
kubernetes.secret = %q
kubernetes.repository = %q
`, podTeam, podTeamID, filepath.Join(secrets, team.PodLinearKey), srv.URL, namespace, kubetest.StorageClass, agentsName, repo)
	if _, err := c.Client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "legion-config"}, Data: map[string]string{"legion.toml": toml},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	is := srv.AddIssue("Write a file", "Todo")

	start := func(name string) *replica {
		return startReplica(t, deploy, name, run, binDir, toml, api)
	}
	a, b := start("legion-controller-a"), start("legion-controller-b")

	// One planner's Job for the issue, by the leader.
	plans := func() ([]string, error) {
		jobs, err := c.Client.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelMode + "=plan"})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, j := range jobs.Items {
			names = append(names, j.Name)
		}
		return names, nil
	}
	waitfor.Check(t, 3*time.Minute, "the planner's Job of "+is.Identifier, func() error {
		for _, r := range []*replica{a, b} {
			select {
			case <-r.done:
				return waitfor.Stop(fmt.Errorf("replica %s ended: %v\n%s", r.name, r.cmd.ProcessState, r.log.String()))
			default:
			}
		}
		names, err := plans()
		if err == nil && len(names) == 0 {
			err = errors.New("no Job with label " + kube.LabelMode + "=plan yet")
		}
		return err
	})
	leader, follower := a, b
	l, err := c.Client.CoordinationV1().Leases(namespace).Get(ctx, lease.ControllerName(shortID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	switch h := ptr.Deref(l.Spec.HolderIdentity, ""); h {
	case a.name:
	case b.name:
		leader, follower = b, a
	default:
		t.Fatalf("Lease %s held by %q; want %s or %s", l.Name, h, a.name, b.name)
	}
	leader.waitTick(t)
	if strings.Contains(follower.log.String(), "leading: started the command") {
		t.Fatalf("replica %s started its controller while %s holds the Lease:\n%s", follower.name, leader.name, follower.log.String())
	}

	// The leader is killed: its controller and helper with it; the other
	// takes over and finds the planner's Job running.
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.done
	follower.waitTick(t) // its first tick: it listed the sessions first
	follower.waitTick(t)
	names, err := plans()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 {
		t.Errorf("planner Jobs %v; want one (the second controller must see the first one's)\n%s:\n%s", names, follower.name, follower.log.String())
	}
	// Spawns are idempotent (the Job of a dispatch's session id is made
	// once), so the Jobs alone would not show a second decision: the
	// second controller must not decide to dispatch the planner at all.
	if strings.Contains(follower.log.String(), "action=dispatch_planner") {
		t.Errorf("replica %s decided to dispatch %s's planner again (it did not see the first one's session):\n%s", follower.name, is.Identifier, follower.log.String())
	}
	if !strings.Contains(follower.log.String(), "following the sessions of a Kubernetes target") {
		t.Errorf("replica %s's helper did not follow namespace %s at its start:\n%s", follower.name, namespace, follower.log.String())
	}
}

// containerSecretsMount is where controller.yaml mounts the team's Secret
// (the tracker's key).
func containerSecretsMount(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				if !strings.HasPrefix(m.MountPath, "/run/") {
					t.Fatalf("controller.yaml: Secret %s mounted at %s; the test puts it under /run", v.Secret.SecretName, m.MountPath)
				}
				return m.MountPath
			}
		}
	}
	t.Fatal("controller.yaml: no Secret volume (the tracker's key)")
	return ""
}

// startReplica runs the Deployment's pod as a kubelet would, on this
// machine: its init container, then its container (TEAM: podTeam), each
// a process in a mount namespace of its own with run bound on /run (the
// kubelet's mounts under /var/run/secrets), with the container's env, no
// kubeconfig, KUBERNETES_SERVICE_HOST and _PORT of the API server. The
// pod's other volumes are directories of the replica: paths under their
// mounts, in the env, the command and the ConfigMap's legion.toml (toml),
// are moved there.
func startReplica(t *testing.T, d *appsv1.Deployment, name, run, binDir, toml string, api *url.URL) *replica {
	t.Helper()
	dir := t.TempDir()
	pod := d.Spec.Template.Spec
	vols := map[string]string{} // volume name: its directory
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			continue // under run
		}
		vols[v.Name] = filepath.Join(dir, v.Name)
		if err := os.MkdirAll(vols[v.Name], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var mounts [][2]string // pod path, this machine's
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		for _, m := range c.VolumeMounts {
			if h, ok := vols[m.Name]; ok && !slices.Contains(mounts, [2]string{m.MountPath, h}) {
				mounts = append(mounts, [2]string{m.MountPath, h})
			}
		}
	}
	move := func(s string) string {
		for _, m := range mounts {
			if s == m[0] || strings.HasPrefix(s, m[0]+"/") {
				return m[1] + s[len(m[0]):]
			}
		}
		return s
	}
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil {
			var pairs []string
			for _, m := range mounts {
				pairs = append(pairs, `"`+m[0]+"/", `"`+m[1]+"/")
			}
			data := strings.NewReplacer(pairs...).Replace(toml) // one pass: a moved path is not moved again
			if err := os.WriteFile(filepath.Join(vols[v.Name], "legion.toml"), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := &replica{name: name, log: &lockedBuffer{}, ticks: make(chan string, 100), done: make(chan struct{})}
	notify := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notify, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Ends when conn is closed, at the test's end.
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			for _, line := range strings.Split(string(buf[:n]), "\n") {
				if s, ok := strings.CutPrefix(line, "STATUS="); ok {
					select {
					case r.ticks <- s:
					default:
					}
				}
			}
		}
	}()
	command := func(c corev1.Container) *exec.Cmd {
		argv := slices.Clone(c.Command)
		for i, a := range argv {
			if a == "TEAM" {
				argv[i] = podTeam
			}
			argv[i] = move(argv[i])
		}
		env := []string{
			"PATH=" + binDir + ":/usr/bin:/bin",
			"KUBERNETES_SERVICE_HOST=" + api.Hostname(),
			"KUBERNETES_SERVICE_PORT=" + api.Port(),
			"NOTIFY_SOCKET=" + notify, // the test's window on the controller's ticks; a pod has none
		}
		for _, e := range c.Env {
			switch {
			case e.Name == "POD_NAME":
				env = append(env, "POD_NAME="+name)
			case e.ValueFrom != nil:
				t.Fatalf("controller.yaml: env %s from %+v; the test knows POD_NAME only", e.Name, e.ValueFrom)
			default:
				env = append(env, e.Name+"="+move(e.Value))
			}
		}
		script := `mount --bind "$0" /run && exec "$@"`
		cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", script, run}, argv...)...)
		cmd.Env, cmd.Dir = env, dir
		cmd.Stdout, cmd.Stderr = r.log, r.log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	for _, c := range pod.InitContainers {
		if err := command(c).Run(); err != nil {
			t.Fatalf("replica %s: init container %s: %v\n%s", name, c.Name, err, r.log.String())
		}
	}
	r.cmd = command(pod.Containers[0])
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Ends when the process does: killed by the test, or at its end.
	go func() {
		r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("replica %s:\n%s", r.name, r.log.String())
		}
	})
	return r
}

// waitTick waits for the replica's controller's next tick, failing the
// test if the tick failed or the replica ended.
func (r *replica) waitTick(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	select {
	case s := <-r.ticks:
		if !strings.Contains(s, "applied") {
			t.Fatalf("replica %s: a tick failed: %s\n%s", r.name, s, r.log.String())
		}
	case <-r.done:
		t.Fatalf("replica %s ended: %v\n%s", r.name, r.cmd.ProcessState, r.log.String())
	case <-ctx.Done():
		t.Fatalf("replica %s: no tick of its controller in 3 minutes\n%s", r.name, r.log.String())
	}
}

// bareRepo is the team's repository (kubernetes.repository): a bare
// repository with one commit on main, as a file:// URL.
func bareRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ws, bare := filepath.Join(dir, "ws"), filepath.Join(dir, "demo.git")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=legion", "GIT_AUTHOR_EMAIL=legion@example.com", "GIT_COMMITTER_NAME=legion", "GIT_COMMITTER_EMAIL=legion@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	git(ws, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(ws, "README"), []byte("demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(ws, "add", "README")
	git(ws, "commit", "-q", "-m", "first")
	git(dir, "clone", "-q", "--bare", ws, bare)
	return "file://" + bare
}
