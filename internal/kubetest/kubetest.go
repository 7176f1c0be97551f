// Package kubetest runs a real Kubernetes control plane for tests: etcd,
// kube-apiserver, kube-controller-manager (all its controllers: Job, pod
// GC, namespace, garbage collector, service account and token, node
// lifecycle) and kube-scheduler, built from the Go module proxy at pinned
// versions by scripts/install-kube-control-plane, with kwok's simulated
// nodes. A cluster starts in a few seconds; all its state is in the test's
// temporary directory, and every process is the test's child, ended in
// t.Cleanup and killed with the test process (Pdeathsig).
//
// With Options.RealNode the cluster also has one real node (realnode.go):
// a real kubelet with containerd and runc on this machine, whose pods run
// their images (LoadImage) on a CNI bridge; the test's cleanup removes
// its processes, mounts, cgroups, bridges and log links. Everything below
// about nodes is about kwok's.
//
// Nodes are kwok's, never real ones: a pod scheduled onto one becomes
// Running and Ready and stays so until the test reports its end with
// EndPod (as a kubelet would) or deletes it; a deleted pod ends Failed
// with exit code 143, as on SIGTERM, before it is removed. kwok's
// pod-complete stage, which finishes every Job's pod at once, is left out
// (kwok-stages.yaml). A deleted node's pods are ended by the real pod
// garbage collector, about a minute later. With Options.ExecDir, exec on a
// pod through the API server runs the command on this machine.
//
// With Options.RunPods, pods on the simulated (kwok) nodes run: the test
// plays a kubelet's part for them with a real OCI runtime, runc, on this
// machine. That is still not a real node (no kubelet, no CRI, no image,
// no pod network); what it gives and what it does not:
//   - When kwok has made a pod Running, its single container runs in the
//     foreground of `runc run`, a child of the test: rootfs an overlay
//     whose lower layer is this machine's / or Options.PodRoot (the pod's
//     image is not pulled or used), upper and work in the test's
//     directory, read-only when the container asks; mount, pid, ipc and uts namespaces, the host's
//     network; command and args, env, workingDir, the pod's user, group,
//     fsGroup and supplemental groups, capabilities (none when it drops
//     ALL), no new privileges when it forbids privilege escalation,
//     seccomp RuntimeDefault as containerd's CRI applies it (its default
//     profile, copied in seccomp_default.go), the CPU request as shares
//     and the CPU and memory limits in the container's own cgroup
//     (kubetest-<pod uid>, under the test's).
//   - Volumes: a claim is one directory per namespace and claim
//     (Cluster.VolumeDir), kept across pods, group fsGroup, setgid; a
//     Secret's data is written as files (root, group fsGroup, its
//     defaultMode) and mounted read-only; an emptyDir is the pod's own
//     directory, a tmpfs for medium Memory. Other volumes (projected ones,
//     such as the service account token a pod gets unless
//     automountServiceAccountToken is false), envFrom, valueFrom,
//     privileged containers and init containers are refused: the pod ends
//     Failed with exit code 128, reason StartError, and the test fails.
//   - Its exit is reported as EndPod does, with reason OOMKilled when
//     the kernel's OOM killer killed it in its cgroup. A pod deleted, or
//     ended by someone else (the pod garbage collector ends a lost node's
//     pods), has its container killed (runc kill KILL, runc delete
//     --force); a deleted pod's end is then kwok's (exit code 143). At
//     the test's end every container is killed, every mount it made
//     unmounted and every cgroup removed, by the ids the runner made.
//   - exec and pods/log go through the API server to kwok, which reads a
//     kwok Exec and Logs made per pod (kwok --enable-crds=Exec,Logs; its
//     CRDs are installed first). exec does not enter the container: it
//     runs the command on this machine, as the container's uid and gid
//     (kwok requires both to exist in this machine's /etc/passwd and
//     /etc/group), in the host directory of the container's working
//     directory, with the container's env whose values that are paths
//     under a volume mount are rewritten to the host's. A per-pod Exec
//     wins over Options.ExecDir's ClusterExec (kwok looks it up first), so
//     both can be set. pods/log reads the container's output, which the
//     runner writes in the CRI log format (a follow does not end with
//     the container: kwok's reader, k8s.io/cri-client/pkg/logs, asks no
//     runtime whether it still runs, so the client ends it).
//   - Not applied: a Localhost seccomp profile (refused), AppArmor, the
//     memory request (cgroup v1 has no place for it), other resources,
//     the pod's overhead and QoS cgroups, $(VAR) expansion in command,
//     args and env, probes, image pulls.
//
// The API server authenticates by static tokens: the admin (Cluster.Config,
// Kubeconfig; group system:masters) and RestrictedUser (RestrictedConfig;
// no group, no role), and authorizes with Node and RBAC.
//
// It owns the cluster's processes, keys, certificates, tokens and
// kubeconfig. It never reaches a cluster it did not start, never reads
// the user's kubeconfig, and is for tests only: nothing that ships
// imports it (internal/layout checks that).
package kubetest

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// Context is the name of the kubeconfig context (and cluster, and user)
// that Start writes.
const Context = "legion-test"

// RestrictedUser is the user of Cluster.RestrictedConfig: authenticated,
// in no group, bound to no role, so RBAC refuses it everything but
// discovery and self-review.
const RestrictedUser = "legion-restricted"

// KwokNodeAnnotation marks the nodes kwok manages (the annotation its
// --manage-nodes-with-annotation-selector selects); AddNode sets it.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// serviceCIDR is the cluster's service IP range; its first address is the
// kubernetes service's, which the serving certificate names.
const serviceCIDR = "10.96.0.0/16"

// readyTimeout bounds each wait of Start (the API server ready, nodes
// ready, the default service account): generous for 2 shared cores; a
// healthy start takes far less (see the test's log).
const readyTimeout = 3 * time.Minute

// installScript is the script that builds the binaries, relative to the
// module's root.
const installScript = "scripts/install-kube-control-plane"

//go:embed kwok-stages.yaml
var kwokStages []byte

// Options configures Start.
type Options struct {
	// Nodes is how many kwok nodes Start adds (kwok-node-0, kwok-node-1,
	// ...); 0 means 1. Use -1 for none.
	Nodes int
	// NodeCPU and NodeMemory are each node's capacity and allocatable,
	// as resource quantities ("8", "16Gi"); empty means 32 CPUs and 64Gi.
	NodeCPU, NodeMemory string
	// ExecDir, if set, makes exec on any pod (through the API server, as
	// kubectl exec and client-go's tools/remotecommand do it, with or
	// without a TTY, whose size the client sets) run the requested command
	// as a local process, a child of kwok, in ExecDir with kwok's
	// environment: kwok's ClusterExec with a Local target. A test can thus
	// attach through the real API server to a worker it started on this
	// machine. Unset, exec on a pod fails (kwok finds no exec target).
	// A pod the runner runs (RunPods) has its own kwok Exec, which kwok
	// prefers to this ClusterExec.
	ExecDir string
	// ExecEnv is added to the environment of every such command. Its
	// PATH is also kwok's own, which kwok finds any exec's command on
	// (a RunPods pod's too).
	ExecEnv map[string]string
	// RunPods makes the cluster's pods on simulated (kwok) nodes run:
	// the test runs each Running pod's container with runc and reports
	// its end, exec and pods/log reach it through the API server (see
	// the package doc). It needs root and runc: without them the test
	// skips, or fails with CI=true.
	RunPods bool
	// PodBinds are directories of this machine that the runner binds,
	// read-only and at the same path, into every container it runs,
	// after the pod's own volumes: where a test built the programs a pod
	// runs (sdtest builds them under /tmp, which a pod's /tmp emptyDir
	// would hide). A real node would have them from the image. The pod's
	// user must be able to reach and read them: a pod whose user cannot
	// (a directory above one is 0700, say) ends Failed with reason
	// StartError and the test fails, naming the directory.
	PodBinds []string
	// PodRoot is the lower layer of every container's root: "" for this
	// machine's /, else a directory holding an image's root (the worker
	// image's layers extracted, say), so a container runs what that
	// image holds. PodEnv is the image's environment (its config's Env,
	// such as PATH), which the container's env overrides as a kubelet
	// merges them.
	PodRoot string
	PodEnv  []string
	// RealNode adds a real node, RealNodeName: a real kubelet with
	// containerd and runc on this machine (realnode.go; the settings of
	// scripts/probe-real-node), built by scripts/install-kubelet. Its pods
	// run their images, loaded with LoadImage. It needs root, runc, ctr
	// and ip: without them, or without the node's binaries, the test
	// skips, or fails with CI=true. Set Nodes to -1 for it alone.
	RealNode bool
}

// Cluster is a running control plane.
type Cluster struct {
	// Kubeconfig is a kubeconfig file for the admin user (system:masters),
	// context Context.
	Kubeconfig string
	// Config and Client are the admin's. Config has no client-side rate
	// limit (QPS -1); code under test sets its own.
	Config *rest.Config
	Client kubernetes.Interface
	// RestrictedConfig is RestrictedUser's: for checking RBAC refusals.
	RestrictedConfig *rest.Config
	// Dir holds the cluster's state: etcd's data, pki/, the token file,
	// kwok's configuration and each component's log, <name>.log.
	Dir string

	opts       Options
	runner     *podRunner // with Options.RunPods
	node       *realNode  // with Options.RealNode
	nodeToken  string     // the real node's kubelet's bearer token
	components []*component
	extraArgs  map[string][]string // more arguments by component, for this package's tests
}

// Binaries returns the directory of the control plane's binaries, running
// scripts/install-kube-control-plane, which returns at once when they are
// cached and otherwise builds them (several CPU-minutes). Its error says
// what failed and carries the script's output.
func Binaries() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("find %s: %w", installScript, err)
	}
	script := filepath.Join(root, installScript)
	var stderr strings.Builder
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s failed (%w); run it by hand to see why:\n%s", script, err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	for _, b := range binaryNames {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s printed %s, which has no %s: %w", script, dir, b, err)
		}
	}
	return dir, nil
}

// binaryNames are the programs Start runs.
var binaryNames = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// KubeVersion is the Kubernetes version of the binaries: the KUBE_VERSION
// that scripts/install-kube-control-plane builds (a test checks they agree).
const KubeVersion = "v1.37.2"

// cached says whether the binaries are where the install script puts them
// ($LEGION_KUBE_DIR/bin, else ${XDG_CACHE_HOME:-$HOME/.cache}/legion/kube/
// KubeVersion/bin), without running it.
func cached() bool {
	dir := os.Getenv("LEGION_KUBE_DIR")
	if dir == "" {
		dir = filepath.Join(sdtest.StartCacheDir, "legion", "kube", KubeVersion)
	}
	for _, b := range binaryNames {
		if _, err := os.Stat(filepath.Join(dir, "bin", b)); err != nil {
			return false
		}
	}
	return true
}

// moduleRoot walks up from the working directory (a test runs in its
// package's directory) to the directory that holds installScript.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, installScript)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s above the working directory", installScript)
		}
		dir = parent
	}
}

// Start runs a control plane for the test and returns once it serves:
// the API server ready (/readyz), opts.Nodes kwok nodes Ready, and the
// default service account of namespace "default" created (pods can be
// admitted). It ends everything in t.Cleanup and, if the test failed,
// first logs what the test's namespaces held (Describe) and the end of
// each component's log.
//
// Without the binaries it skips the test, saying how to build them; with
// CI=true it builds them instead, and fails the test if that fails.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	var runc string
	if opts.RunPods {
		runc = runnerRequirements(t)
	}
	var nodeBin, nodeRunc, ctr string
	if opts.RealNode {
		nodeBin, nodeRunc, ctr = realNodeRequirements(t)
	}
	bin := binaries(t)
	c := &Cluster{Dir: t.TempDir(), opts: opts}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.components {
				t.Logf("the end of %s's log (%s):\n%s", p.name, p.log, tail(p.log, logTail))
			}
		}
	})
	if err := c.start(t, bin); err != nil {
		t.Fatal(err)
	}
	if opts.RunPods {
		if err := c.startRunner(t, runc); err != nil {
			t.Fatal(err)
		}
	}
	if opts.RealNode {
		if err := c.startRealNode(t, nodeBin, nodeRunc, ctr, c.nodeToken, filepath.Join(c.Dir, "pki", "ca.crt")); err != nil {
			t.Fatal(err)
		}
	}
	c.logOnFailure(t)
	return c
}

// binaries is Binaries for a test: without the binaries it skips the
// test, saying how to build them, unless CI=true; then it builds them and
// fails the test if that fails.
func binaries(t testing.TB) string {
	t.Helper()
	if !cached() && os.Getenv("CI") != "true" {
		t.Skipf("the Kubernetes control plane's binaries are not built: run %s (several CPU-minutes, cached after); with CI=true the test builds them", installScript)
	}
	bin, err := Binaries()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func (c *Cluster) start(t testing.TB, bin string) error {
	t.Helper()
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort, kubeletPort := ports[0], ports[1], ports[2], ports[3]
	_, svcNet, err := net.ParseCIDR(serviceCIDR)
	if err != nil {
		return err
	}
	svcIP := append(net.IP(nil), svcNet.IP.To4()...)
	svcIP[3]++
	pki, err := newPKI(filepath.Join(c.Dir, "pki"), svcIP)
	if err != nil {
		return err
	}
	adminToken, restrictedToken := randomToken(), randomToken()
	tokens := filepath.Join(c.Dir, "tokens.csv")
	csv := fmt.Sprintf("%s,legion-admin,legion-admin,\"system:masters\"\n%s,%s,%s\n", adminToken, restrictedToken, RestrictedUser, RestrictedUser)
	if c.opts.RealNode {
		// The real node's kubelet: the identity the Node authorizer knows.
		c.nodeToken = randomToken()
		csv += fmt.Sprintf("%s,system:node:%s,system:node:%s,\"system:nodes\"\n", c.nodeToken, RealNodeName, RealNodeName)
	}
	if err := os.WriteFile(tokens, []byte(csv), 0o600); err != nil {
		return err
	}
	server := "https://" + hostPort(apiPort)
	// QPS -1: no client-side rate limit (client-go's default, 5 requests a
	// second, would make a test of a thousand Jobs take minutes).
	c.Config = &rest.Config{Host: server, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{CAData: pki.caPEM}, QPS: -1}
	c.RestrictedConfig = &rest.Config{Host: server, BearerToken: restrictedToken, TLSClientConfig: rest.TLSClientConfig{CAData: pki.caPEM}}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters[Context] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: pki.CACert}
	kc.AuthInfos[Context] = &clientcmdapi.AuthInfo{Token: adminToken}
	kc.Contexts[Context] = &clientcmdapi.Context{Cluster: Context, AuthInfo: Context, Namespace: "default"}
	kc.CurrentContext = Context
	if err := clientcmd.WriteToFile(*kc, c.Kubeconfig); err != nil {
		return fmt.Errorf("write %s: %w", c.Kubeconfig, err)
	}

	run := func(name string, args ...string) error {
		var env []string
		if path, ok := c.opts.ExecEnv["PATH"]; ok && name == "kwok" {
			// kwok looks the exec's command up on its own PATH.
			env = append(os.Environ(), "PATH="+path)
		}
		p, err := start(t, c.Dir, name, filepath.Join(bin, name), env, append(args, c.extraArgs[name]...)...)
		if err != nil {
			return err
		}
		c.components = append(c.components, p)
		return nil
	}
	if err := run("etcd",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=http://"+hostPort(etcdClient),
		"--listen-peer-urls=http://"+hostPort(etcdPeer)); err != nil {
		return err
	}
	if err := run("kube-apiserver",
		"--etcd-servers=http://"+hostPort(etcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // the lease reconciler refuses a loopback address
		"--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+pki.ServingCert,
		"--tls-private-key-file="+pki.ServingKey,
		"--client-ca-file="+pki.CACert,
		"--token-auth-file="+tokens,
		"--authorization-mode=Node,RBAC",
		"--service-account-key-file="+pki.SAPublicKey,
		"--service-account-signing-key-file="+pki.SAPrivateKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range="+serviceCIDR,
		"--kubelet-client-certificate="+pki.KubeletCert,
		"--kubelet-client-key="+pki.KubeletKey,
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
	); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := c.waitReadyz(ctx); err != nil {
		return err
	}
	if err := run("kube-controller-manager",
		"--kubeconfig="+c.Kubeconfig,
		"--service-account-private-key-file="+pki.SAPrivateKey,
		"--root-ca-file="+pki.CACert,
		"--controllers=*",
		"--leader-elect=false",
		"--kube-api-qps=1000", // default 20: the Job controller would make 1,000 pods in a minute
		"--kube-api-burst=2000",
		// default 5m: a quota's use that the quota controller's recount
		// from a stale cache set back (a pod admitted just before) was
		// counted again only after minutes (TestQuotaRefused, on busy
		// cores); a test's quota is counted again within seconds.
		"--resource-quota-sync-period=5s",
		"--secure-port=0",
		"--profiling=false",
	); err != nil {
		return err
	}
	if err := run("kube-scheduler",
		"--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
		"--secure-port=0",
		"--profiling=false",
	); err != nil {
		return err
	}
	kwokConfig := filepath.Join(c.Dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, kwokConfiguration(c.opts.ExecDir, c.opts.ExecEnv), 0o600); err != nil {
		return err
	}
	var crds []string
	if c.opts.RunPods {
		if err := c.installKwokCRDs(ctx); err != nil {
			return err
		}
		crds = []string{"--enable-crds=Exec,Logs"}
	}
	if err := run("kwok", append(crds,
		"--kubeconfig="+c.Kubeconfig,
		"--config="+kwokConfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"=fake",
		"--node-ip=127.0.0.1",
		"--node-port="+strconv.Itoa(kubeletPort),
		"--server-address="+hostPort(kubeletPort),
		"--tls-cert-file="+pki.ServingCert,
		"--tls-private-key-file="+pki.ServingKey,
		"--cidr=10.0.0.0/16",
		// kwok renews each node's Lease, so the node lifecycle controller
		// never sees a node go silent (without it, it marks a node Unknown
		// every 50 s and kwok makes it Ready again: a flapping node).
		"--node-lease-duration-seconds=40",
	)...); err != nil {
		return err
	}
	n := c.opts.Nodes
	if n == 0 {
		n = 1
	}
	for i := range max(n, 0) {
		if err := c.addNode(ctx, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return err
		}
	}
	for i := range max(n, 0) {
		if err := c.waitNodeReady(ctx, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return err
		}
	}
	return c.poll(ctx, "the default service account in namespace default", func() error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// kwokConfiguration is kwok's configuration file: its stages and, if
// execDir is set, a ClusterExec that runs every exec locally in execDir
// with env added to kwok's environment.
func kwokConfiguration(execDir string, env map[string]string) []byte {
	if execDir == "" {
		return kwokStages
	}
	type envVar struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	local := struct {
		WorkDir string   `json:"workDir"`
		Envs    []envVar `json:"envs,omitempty"`
	}{WorkDir: execDir}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		local.Envs = append(local.Envs, envVar{k, env[k]})
	}
	b, err := json.Marshal(local) // JSON is YAML
	if err != nil {
		panic(err) // strings always marshal
	}
	return fmt.Appendf(append([]byte(nil), kwokStages...), `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: local
spec:
  execs:
  - local: %s
`, b)
}

// poll calls cond until it returns nil, a component exits (its log then
// says why) or ctx ends.
func (c *Cluster) poll(ctx context.Context, what string, cond func() error) error {
	deadline, _ := ctx.Deadline()
	return waitfor.Until(time.Until(deadline), what, func() error {
		for _, p := range c.components {
			if err := p.exited(); err != nil {
				return waitfor.Stop(err)
			}
		}
		return cond()
	})
}

// waitReadyz waits until the API server's /readyz answers 200.
func (c *Cluster) waitReadyz(ctx context.Context) error {
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return err
	}
	return c.poll(ctx, "the API server's /readyz", func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Config.Host+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
}

// AddNode adds a kwok node named name, with the cluster's node capacity,
// and waits until it is Ready and the node lifecycle controller has lifted
// its not-ready taint. kwok renews the node's Lease in kube-node-lease, so
// it stays Ready until deleted.
func (c *Cluster) AddNode(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	if err := c.addNode(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := c.waitNodeReady(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// DeleteNode deletes the node named name and waits until it is gone. Its
// pods stay until the pod garbage collector deletes them as orphans (about
// 40 s later), as when a real node is removed.
func (c *Cluster) DeleteNode(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	if err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete node %s: %v", name, err)
	}
	if err := c.poll(ctx, "node "+name+" deleted", func() error {
		_, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("node %s still exists", name)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func (c *Cluster) addNode(ctx context.Context, name string) error {
	cpu, mem := c.opts.NodeCPU, c.opts.NodeMemory
	if cpu == "" {
		cpu = "32"
	}
	if mem == "" {
		mem = "64Gi"
	}
	res := corev1.ResourceList{}
	for k, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: "110"} {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("kubetest.Options: node %s %q: %w", k, v, err)
		}
		res[k] = q
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels:      map[string]string{corev1.LabelHostname: name, "type": "kwok", corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"},
		},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

func (c *Cluster) waitNodeReady(ctx context.Context, name string) error {
	return c.poll(ctx, "node "+name+" Ready", func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				return fmt.Errorf("node %s has taint %s", name, taint.ToString())
			}
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s has conditions %v", name, n.Status.Conditions)
	})
}
