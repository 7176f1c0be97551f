package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/legion-dev/legion/units/sdtest"
)

// A real node (Options.RealNode): a real kubelet with containerd and runc
// on this machine, as scripts/probe-real-node starts one and with its
// settings (kubelet-probe note, issue 35). Its pods run their images
// (loaded with LoadImage; no registry), on a CNI bridge, with the
// kubelet's own volume plugins (hostPath PVs: RealNamespace), exec and
// logs served by the kubelet through the API server. One at a time on
// this machine: its bridges and addresses are fixed.
const (
	// RealNodeName is the real node's name (its kubelet's identity,
	// system:node:RealNodeName).
	RealNodeName = "legion-real-node"
	// RealNodeIP is the node's InternalIP, held by bridge realNodeBridge:
	// the kubelet refuses a loopback node IP. Pods on the pod network
	// reach this machine there.
	RealNodeIP    = "10.77.19.1"
	realPodCIDR   = "10.77.20.0/24"
	realBridge    = "lgreal0"
	realCNIBridge = "lgreal-cni0"
	// RealPauseImage is the sandbox image, legion-pause in one layer.
	RealPauseImage = "legion.test/pause:1"
	// installKubeletScript builds the node's binaries (relative to the
	// module's root).
	installKubeletScript = "scripts/install-kubelet"
)

// realNodeLock is the file whose flock a real node holds while it runs.
const realNodeLock = "/tmp/legion-kubetest-realnode.lock"

// containerLogLinks is where a kubelet links each container's log.
const containerLogLinks = "/var/log/containers"

// realNodeBinaries are what installKubeletScript puts in its bin directory.
var realNodeBinaries = []string{"kubelet", "containerd", "containerd-shim-runc-v2", "cni/bridge", "cni/host-local", "cni/loopback", "legion-pause", "legion-oci-archive"}

// realNode is the running node: its directory and the ids of what it made.
type realNode struct {
	dir    string // containerd's root, state and socket, the kubelet's root, CNI config
	bin    string
	ctr    string
	runc   string
	cgroup string // the kubelet's cgroup root, a directory in each hierarchy
	sock   string
	// kubelet is the running kubelet, started with kubeletArgs.
	kubelet     *component
	kubeletArgs []string
}

// realNodeRequirements checks root, runc, ctr and ip, and returns the
// node's binaries, running installKubeletScript: with the binaries
// missing the test skips unless CI=true, which builds them (or fails).
func realNodeRequirements(t testing.TB) (bin, runc, ctr string) {
	t.Helper()
	miss := func(msg string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", msg)
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		miss("kubetest.Options.RealNode runs a kubelet and containerd, which need root")
	}
	var err error
	if runc, err = exec.LookPath("runc"); err != nil {
		if runc, err = exec.LookPath("/usr/sbin/runc"); err != nil {
			miss("runc is missing: install the Debian package runc (scripts/check-deps does)")
		}
	}
	// Debian's ctr (containerd 1.6) loads images; containerd v2.4.2's own
	// ctr fails against it here: "invalid (non-empty) authority".
	if ctr, err = exec.LookPath("ctr"); err != nil {
		miss("ctr is missing: install the Debian package containerd (scripts/check-deps does)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if _, err := os.Stat("/usr/sbin/ip"); err != nil {
			miss("ip is missing: install the Debian package iproute2")
		}
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("LEGION_KUBE_DIR")
	if dir == "" {
		dir = filepath.Join(sdtest.StartCacheDir, "legion", "kube", KubeVersion)
	}
	built := true
	for _, b := range realNodeBinaries {
		if _, err := os.Stat(filepath.Join(dir, "bin", b)); err != nil {
			built = false
		}
	}
	if !built && os.Getenv("CI") != "true" {
		t.Skipf("a real node's binaries are not built: run %s (a few CPU-minutes, cached after); with CI=true the test builds them", installKubeletScript)
	}
	script := filepath.Join(root, installKubeletScript)
	var stderr strings.Builder
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s failed (%v):\n%s", script, err, stderr.String())
	}
	bin = strings.TrimSpace(string(out))
	for _, b := range realNodeBinaries {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s printed %s, which has no %s: %v", script, bin, b, err)
		}
	}
	return bin, runc, ctr
}

// ipCmd runs ip with args.
func ipCmd(args ...string) error {
	ip, err := exec.LookPath("ip")
	if err != nil {
		ip = "/usr/sbin/ip"
	}
	if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// startRealNode starts containerd and a kubelet registering RealNodeName
// with the API server as system:node:RealNodeName (token nodeToken), and
// waits until the node is Ready. Everything it makes is undone in
// t.Cleanup: the pods on the node deleted first (while the kubelet runs),
// then the kubelet and containerd stopped by PID, their leftover
// containers and shims (ours by their socket) killed, every mount under
// its directory unmounted, its cgroups and bridges removed.
func (c *Cluster) startRealNode(t testing.TB, bin, runc, ctr, nodeToken, caCert string) error {
	t.Helper()
	n := &realNode{dir: filepath.Join(c.Dir, "node"), bin: bin, ctr: ctr, runc: runc, cgroup: "legion-realnode-" + strconv.Itoa(os.Getpid())}
	c.node = n
	n.sock = filepath.Join(n.dir, "containerd", "containerd.sock")
	// One real node at a time on this machine (its bridges and addresses
	// are fixed): test packages running in parallel take turns here.
	lock, err := os.OpenFile(realNodeLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("kubetest: the real node's lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return fmt.Errorf("kubetest: lock %s: %w", realNodeLock, err)
	}
	t.Cleanup(func() { lock.Close() }) // registered first: released last
	if err := ipCmd("link", "show", realBridge); err == nil {
		return fmt.Errorf("kubetest: bridge %s exists: another real node runs here (or a killed test left it: ip link del %s)", realBridge, realBridge)
	}
	// Registered first, so it runs last: after the kubelet and containerd
	// have been stopped (their cleanups are registered later).
	t.Cleanup(func() { n.teardown(t) })
	if err := ipCmd("link", "add", realBridge, "type", "bridge"); err != nil {
		return err
	}
	if err := ipCmd("addr", "add", RealNodeIP+"/32", "dev", realBridge); err != nil {
		return err
	}
	if err := ipCmd("link", "set", realBridge, "up"); err != nil {
		return err
	}
	if err := n.makeCgroups(); err != nil {
		return err
	}
	for _, d := range []string{"containerd", "cni/net.d", "kubelet"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	conflist := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "legion-real", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
  {"type": "loopback"}]}
`, realCNIBridge, realPodCIDR, filepath.Join(n.dir, "cni", "ipam"))
	if err := os.WriteFile(filepath.Join(n.dir, "cni/net.d/10-legion-real.conflist"), []byte(conflist), 0o644); err != nil {
		return err
	}
	config := filepath.Join(n.dir, "containerd", "config.toml")
	if err := os.WriteFile(config, []byte(n.containerdConfig()), 0o644); err != nil {
		return err
	}
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH")) // containerd finds its shim on PATH
	p, err := start(t, n.dir, "containerd", filepath.Join(bin, "containerd"), env, "--config", config)
	if err != nil {
		return err
	}
	c.components = append(c.components, p)
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	if err := c.poll(ctx, "containerd's socket "+n.sock, func() error { _, err := os.Stat(n.sock); return err }); err != nil {
		return err
	}
	pause := filepath.Join(n.dir, "pause.tar")
	if out, err := exec.Command(filepath.Join(bin, "legion-oci-archive"), pause, RealPauseImage, "/pause", filepath.Join(bin, "legion-pause")+"=/pause").CombinedOutput(); err != nil {
		return fmt.Errorf("legion-oci-archive %s: %w: %s", pause, err, out)
	}
	if err := n.load(pause); err != nil {
		return err
	}

	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "kubelet", "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority: %q}
users:
- name: node
  user: {token: %q}
contexts:
- name: c
  context: {cluster: c, user: node}
current-context: c
`, c.Config.Host, caCert, nodeToken)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		return err
	}
	kcfg := filepath.Join(n.dir, "kubelet", "config.yaml")
	// No serving certificate given: the kubelet makes itself one in
	// --cert-dir, and the API server (no --kubelet-certificate-authority)
	// does not verify it.
	if err := os.WriteFile(kcfg, fmt.Appendf(nil, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
resolvConf: /etc/resolv.conf
podLogsDir: %s
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%}
`, n.cgroup, RealNodeIP, ports[0], ports[1], caCert, n.sock, n.sock, filepath.Join(n.dir, "pod-logs")), 0o644); err != nil {
		return err
	}
	n.kubeletArgs = []string{"--config=" + kcfg, "--kubeconfig=" + kubeconfig, "--root-dir=" + filepath.Join(n.dir, "kubelet", "root"),
		"--cert-dir=" + filepath.Join(n.dir, "kubelet", "pki"), "--hostname-override=" + RealNodeName, "--node-ip=" + RealNodeIP, "-v=2"}
	if err := c.startKubelet(t); err != nil {
		return err
	}
	return c.waitNodeReady(ctx, RealNodeName)
}

// startKubelet starts the real node's kubelet.
func (c *Cluster) startKubelet(t testing.TB) error {
	n := c.node
	p, err := start(t, n.dir, "kubelet", filepath.Join(n.bin, "kubelet"), nil, n.kubeletArgs...)
	if err != nil {
		return err
	}
	n.kubelet = p
	c.components = append(c.components, p)
	// Registered after the kubelet's stop, so it runs before it: the
	// kubelet ends the node's pods (their containers, mounts, sandboxes).
	t.Cleanup(func() { c.deleteNodePods(t) })
	return nil
}

// LoseRealNode loses the real node as a cluster does a machine that is
// gone and replaced: its Node is deleted (the pod garbage collector then
// deletes its pods, and the kubelet, which still runs, ends their
// containers), and once its pods are gone its kubelet starts again and
// registers a node of the same name (a kubelet registers only when it
// starts), Ready again. The node's disk stays: hostPath volumes keep
// what their pods wrote, as a network volume would.
func (c *Cluster) LoseRealNode(t testing.TB) {
	t.Helper()
	if c.node == nil || c.node.kubelet == nil {
		t.Fatal("kubetest: LoseRealNode without Options.RealNode")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName=" + RealNodeName}
	l, err := c.Client.CoreV1().Pods("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, p := range l.Items {
		uids = append(uids, string(p.UID))
	}
	c.DeleteNode(t, RealNodeName)
	if err := c.poll(ctx, "the lost node's pods deleted", func() error {
		l, err := c.Client.CoreV1().Pods("").List(ctx, sel)
		if err != nil {
			return err
		}
		if len(l.Items) != 0 {
			return fmt.Errorf("%d pods still on %s", len(l.Items), RealNodeName)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The pod garbage collector deletes them at once (no grace), and the
	// kubelet ends their containers after: each pod's processes are gone
	// from its cgroup before the node comes back.
	if err := c.poll(ctx, "the lost node's containers ended", func() error {
		return podProcesses(uids)
	}); err != nil {
		t.Fatal(err)
	}
	c.node.kubelet.stop()
	c.components = slices.DeleteFunc(c.components, func(p *component) bool { return p == c.node.kubelet })
	_ = os.Rename(c.node.kubelet.log, c.node.kubelet.log+".lost") // the next one's log starts anew
	if err := c.startKubelet(t); err != nil {
		t.Fatal(err)
	}
	if err := c.waitNodeReady(ctx, RealNodeName); err != nil {
		t.Fatal(err)
	}
}

// deleteNodePods deletes every pod on the real node and waits (a minute
// at most) until the kubelet has ended them and they are gone.
func (c *Cluster) deleteNodePods(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName=" + RealNodeName}
	_ = c.poll(ctx, "the real node's pods gone", func() error {
		l, err := c.Client.CoreV1().Pods("").List(ctx, sel)
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				_ = c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d pods left", len(l.Items))
		}
		return nil
	})
}

func (n *realNode) containerdConfig() string {
	d := filepath.Join(n.dir, "containerd")
	return fmt.Sprintf(`version = 3
root = '%[1]s/root'
state = '%[1]s/state'
[grpc]
  address = '%[2]s'
[ttrpc]
  address = '%[2]s.ttrpc'
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '%[3]s'
  [plugins.'io.containerd.cri.v1.runtime']
    # Without CAP_SYS_RESOURCE runc cannot lower oom_score_adj below
    # containerd's own (the sandbox asks -998): "nsexec: failed to update
    # /proc/self/oom_score_adj: Permission denied".
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '%[4]s'
          Root = '%[5]s'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['%[6]s']
      conf_dir = '%[7]s'
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
`, d, n.sock, RealPauseImage, n.runc, filepath.Join(n.dir, "runc"), filepath.Join(n.bin, "cni"), filepath.Join(n.dir, "cni", "net.d"))
}

// cgroupHierarchies are this machine's cgroup v1 hierarchies, or the v2
// root alone.
func cgroupHierarchies() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	var hs []string
	es, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range es {
		if e.IsDir() && e.Name() != "unified" {
			hs = append(hs, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return hs
}

// makeCgroups makes the kubelet's cgroup root in every hierarchy (it
// refuses one with missing paths), with cpuset's cpus and mems copied.
func (n *realNode) makeCgroups() error {
	for _, h := range cgroupHierarchies() {
		if err := os.Mkdir(filepath.Join(h, n.cgroup), 0o755); err != nil {
			return fmt.Errorf("kubetest: the real node's cgroup root: %w", err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(h, n.cgroup, f), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// load imports an image tar (docker archive or OCI layout) into the
// node's containerd, namespace k8s.io (the CRI's).
func (n *realNode) load(tar string) error {
	out, err := exec.Command(n.ctr, "--address", n.sock, "-n", "k8s.io", "images", "import", tar).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s into the real node's containerd: %w: %s", tar, err, out)
	}
	return nil
}

// teardown undoes what startRealNode made, after the kubelet and
// containerd have been stopped, and reports what it could not.
func (n *realNode) teardown(t testing.TB) {
	runcRoot := filepath.Join(n.dir, "runc", "k8s.io")
	if out, err := exec.Command(n.runc, "--root", runcRoot, "list", "-q").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			if out, err := exec.Command(n.runc, "--root", runcRoot, "delete", "-f", id).CombinedOutput(); err != nil {
				t.Errorf("kubetest: runc delete -f %s: %v: %s", id, err, out)
			}
		}
	}
	// Shims have our socket in their argv: ours, by PID.
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		argv, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(argv), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "containerd-shim-runc-v2" && slices.Contains(args, n.sock) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// The kubelet links each container's log from /var/log/containers
	// (not configurable; podLogsDir is ours): the links into our
	// directory go.
	links, _ := os.ReadDir(containerLogLinks)
	for _, l := range links {
		p := filepath.Join(containerLogLinks, l.Name())
		if dst, err := os.Readlink(p); err == nil && strings.HasPrefix(dst, n.dir+"/") {
			if err := os.Remove(p); err != nil {
				t.Errorf("kubetest: %v", err)
			}
		}
	}
	// Mounts under the node's directory, deepest first.
	var mounts []string
	if f, err := os.Open("/proc/self/mounts"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			fs := strings.Fields(s.Text())
			if len(fs) > 1 && (fs[1] == n.dir || strings.HasPrefix(fs[1], n.dir+"/")) {
				mounts = append(mounts, fs[1])
			}
		}
		f.Close()
	}
	slices.Sort(mounts)
	slices.Reverse(mounts)
	for _, m := range mounts {
		if err := syscall.Unmount(m, 0); err != nil {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Errorf("kubetest: unmount %s: %v", m, err)
			}
		}
	}
	// The v1 hierarchies, and on a hybrid machine the v2 one too, where
	// the kubelet's runtime makes the root as well (seen: one left per run).
	hs := cgroupHierarchies()
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil {
		hs = append(hs, "/sys/fs/cgroup/unified")
	}
	for _, h := range hs {
		root := filepath.Join(h, n.cgroup)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs) // children first
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				t.Errorf("kubetest: remove cgroup %s: %v", d, err)
			}
		}
	}
	for _, br := range []string{realCNIBridge, realBridge} {
		if ipCmd("link", "show", br) == nil {
			if err := ipCmd("link", "del", br); err != nil {
				t.Errorf("kubetest: %v", err)
			}
		}
	}
}

// LoadImage loads an image tar (a docker archive or OCI layout, such as
// `legion-kube image` writes) into the real node's containerd, as a
// registry pull would; pods use it by its name with imagePullPolicy
// IfNotPresent or Never. It fails the test without Options.RealNode.
func (c *Cluster) LoadImage(t testing.TB, tar string) {
	t.Helper()
	if c.node == nil {
		t.Fatal("kubetest: LoadImage needs a cluster started with Options.RealNode")
	}
	if err := c.node.load(tar); err != nil {
		t.Fatal(err)
	}
}

// RealVolumeDir is the directory on this machine of volume i that
// RealNamespace made for namespace ns (a hostPath PV).
func (c *Cluster) RealVolumeDir(ns string, i int) string {
	return filepath.Join(c.Dir, "volumes", ns, strconv.Itoa(i))
}

// RealNamespace is Namespace for a real node: namespace ns with volumes
// hostPath PVs of 1Gi in StorageClass (no provisioner: the persistent
// volume controller binds each claim to one), each a directory
// RealVolumeDir owned by uid and gid (a hostPath volume gets no fsGroup),
// so the node's kubelet bind-mounts it into the pod.
func (c *Cluster) RealNamespace(t testing.TB, ns string, volumes, uid int) {
	t.Helper()
	c.namespaceAndClass(t, ns)
	for i := range volumes {
		c.realVolume(t, ns, i, uid, "")
	}
}

// RealClaimVolume adds volume i of namespace ns (RealNamespace made the
// namespace, and volumes below i) for claim only (the PV's claimRef),
// owned by uid: the claim of a pod whose user differs from the sessions'
// (the controller's state).
func (c *Cluster) RealClaimVolume(t testing.TB, ns string, i int, claim string, uid int) {
	t.Helper()
	c.realVolume(t, ns, i, uid, claim)
}

func (c *Cluster) realVolume(t testing.TB, ns string, i, uid int, claim string) {
	t.Helper()
	dirType := corev1.HostPathDirectory
	dir := c.RealVolumeDir(ns, i)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pv-%d", ns, i)},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:       StorageClass,
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
		},
	}
	if claim != "" {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claim}
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podProcesses says which process of this machine is still in the cgroup
// of a pod of uids (the kubelet's cgroupfs driver names a pod's cgroup
// pod<UID>), or nil.
func podProcesses(uids []string) error {
	procs, err := filepath.Glob("/proc/[0-9]*/cgroup")
	if err != nil {
		return err
	}
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the process exited meanwhile
		}
		for _, uid := range uids {
			if strings.Contains(string(b), "pod"+uid) {
				return fmt.Errorf("%s is in pod %s's cgroup", filepath.Dir(f), uid)
			}
		}
	}
	return nil
}
