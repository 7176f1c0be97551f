package kubetest

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/legion-dev/legion/internal/waitfor"
)

//go:embed kwok-crds.yaml
var kwokCRDs []byte

var (
	crdGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	execGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "execs"}
	logsGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}
)

// stopTimeout bounds the wait for a container's runc to exit after
// SIGKILL: it exits at once unless something is badly wrong.
const stopTimeout = time.Minute

// podRunner plays a kubelet's part for the pods on kwok's simulated nodes:
// it runs each Running pod's container with runc and reports its end. One
// goroutine, started by startRunner, handles the pod events one at a time;
// each container has one goroutine waiting for its runc (wait). The
// test's cleanup ends them all, and the informer's.
type podRunner struct {
	c     *Cluster
	t     testing.TB
	runc  string // the runc binary
	root  string // runc's --root: the state of this runner's containers
	dyn   dynamic.Interface
	queue *workqueue.Typed[string] // pod keys, namespace/name
	done  chan struct{}            // closed when the event goroutine returns

	mu   sync.Mutex
	ctrs map[types.UID]*container
}

// container is one pod's container, run by runc.
type container struct {
	id        string // runc's container id: the pod's UID
	namespace string
	name      string
	dir       string // the OCI bundle: config.json, rootfs/, upper/, work/, v/<volume>/
	log       string // its output in the CRI log format (kwok's Logs reads it)
	cgroups   string // the cgroupsPath in config.json, relative to the runner's cgroup
	mountsMu  sync.Mutex
	mounts    []string // host mount points made for it, unmounted in reverse order
	cmd       *exec.Cmd
	done      chan struct{} // closed once runc run has exited and the mounts are gone
	killed    bool          // the runner killed it (the pod was deleted or ended): no EndPod
	exitCode  int
	startedAt time.Time
}

// runnerRequirements checks what running pods needs: root (runc, mounts)
// and runc itself. It returns the runc binary, or skips the test (fails
// it with CI=true) naming what is missing.
func runnerRequirements(t testing.TB) string {
	t.Helper()
	miss := func(msg string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", msg)
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		miss("kubetest.Options.RunPods runs containers with runc, which needs root")
	}
	// kwok runs an exec into a pod as the pod's user of this machine
	// (Legion's pods: 1000).
	if _, err := user.LookupId("1000"); err != nil {
		miss("no user with uid 1000 here, as whom kwok runs an exec into a pod: scripts/check-deps adds one (legion-pod)")
	}
	if _, err := user.LookupGroupId("1000"); err != nil {
		miss("no group with gid 1000 here, as whom kwok runs an exec into a pod: scripts/check-deps adds one (legion-pod)")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		runc, err = exec.LookPath("/usr/sbin/runc") // Debian's, off a user's PATH
	}
	if err != nil {
		miss("runc is missing: install the Debian package runc (scripts/check-deps does)")
	}
	return runc
}

// installKwokCRDs creates kwok's Exec and Logs CRDs and waits until the
// API server serves them, so that kwok --enable-crds=Exec,Logs can watch
// them from its start.
func (c *Cluster) installKwokCRDs(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(kwokCRDs), 4096)
	var names []string
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("kwok-crds.yaml: %w", err)
		}
		if obj.Object == nil {
			continue
		}
		if _, err := dyn.Resource(crdGVR).Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	for _, name := range names {
		if err := c.poll(ctx, "CRD "+name+" Established", func() error {
			crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("CRD %s has conditions %v", name, conds)
		}); err != nil {
			return err
		}
	}
	return nil
}

// startRunner starts the pod runner for the test; it stops in t.Cleanup
// (registered after the cluster's, so it runs first).
func (c *Cluster) startRunner(t testing.TB, runc string) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	r := &podRunner{
		c: c, t: t, runc: runc, dyn: dyn,
		root:  filepath.Join(c.Dir, "runc"),
		queue: workqueue.NewTyped[string](),
		done:  make(chan struct{}),
		ctrs:  map[types.UID]*container{},
	}
	if err := os.MkdirAll(r.root, 0o700); err != nil {
		return err
	}
	// exec runs as the container's user on this machine, in the host
	// directories of the pod's volumes: the test's temporary directories
	// (0700) must let it pass (o+x, not read).
	for _, d := range []string{c.Dir, filepath.Dir(c.Dir)} {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
			return err
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName!=" }))
	inf := factory.Core().V1().Pods()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			r.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	lister := inf.Lister()
	// The runner's API calls end with the test's cleanup (t.Context ends
	// before the cleanup that must still kill the containers).
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	c.runner = r
	go func() {
		defer close(r.done)
		for {
			key, shutdown := r.queue.Get()
			if shutdown {
				return
			}
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			pod, err := lister.Pods(ns).Get(name)
			if apierrors.IsNotFound(err) {
				pod, err = nil, nil
			}
			if err != nil {
				t.Errorf("pod runner: look up pod %s: %v", key, err)
			} else {
				r.reconcile(ctx, ns, name, pod)
			}
			r.queue.Done(key)
		}
	}()
	t.Cleanup(func() {
		cancel()
		r.queue.ShutDown()
		<-r.done
		factory.Shutdown()
		r.mu.Lock()
		ctrs := make([]*container, 0, len(r.ctrs))
		for _, ctr := range r.ctrs {
			ctrs = append(ctrs, ctr)
		}
		r.mu.Unlock()
		for _, ctr := range ctrs {
			if err := r.stop(ctr); err != nil {
				t.Error(err)
			}
			if err := removeCgroups(ctr.cgroups); err != nil {
				t.Errorf("pod %s/%s: %v", ctr.namespace, ctr.name, err)
			}
		}
	})
	return nil
}

// reconcile brings pod namespace/name's container in line with the pod
// (nil: gone): it starts the container of a Running pod that has none, and
// kills the container of a pod deleted, being deleted, or ended by
// someone else (the pod garbage collector ends the pods of a lost node).
func (r *podRunner) reconcile(ctx context.Context, ns, name string, pod *corev1.Pod) {
	r.mu.Lock()
	var mine []*container
	for _, ctr := range r.ctrs {
		if ctr.namespace == ns && ctr.name == name && (pod == nil || types.UID(ctr.id) != pod.UID) {
			mine = append(mine, ctr) // an earlier pod of that name, now gone
		}
	}
	var ctr *container
	if pod != nil {
		ctr = r.ctrs[pod.UID]
	}
	r.mu.Unlock()
	for _, old := range mine {
		if err := r.stop(old); err != nil {
			r.t.Error(err)
		}
	}
	if pod == nil {
		return
	}
	ending := pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	switch {
	case ctr != nil && ending:
		if err := r.stop(ctr); err != nil {
			r.t.Error(err)
		}
	case ctr == nil && !ending && pod.Status.Phase == corev1.PodRunning:
		if err := r.start(ctx, pod); err != nil {
			r.t.Errorf("pod runner: %v", err)
			if err := r.c.endPod(ctx, pod.Namespace, pod.Name, 128, "StartError", err.Error()); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				r.t.Errorf("pod runner: %v", err)
			}
		}
	}
}

// start makes pod's bundle (an overlay of the root, its volumes),
// its kwok Exec and Logs, and runs `runc run` in the foreground, its output
// into the pod's log. A goroutine waits for runc and reports the end.
func (r *podRunner) start(ctx context.Context, pod *corev1.Pod) (err error) {
	ctr := &container{
		id: string(pod.UID), namespace: pod.Namespace, name: pod.Name,
		dir:     filepath.Join(r.c.Dir, "pods", string(pod.UID)[:8]),
		cgroups: "kubetest-" + string(pod.UID),
		done:    make(chan struct{}),
	}
	ctr.log = filepath.Join(ctr.dir, "container.log")
	r.mu.Lock()
	r.ctrs[pod.UID] = ctr
	r.mu.Unlock()
	defer func() {
		if err != nil {
			ctr.exitCode = 128 // as containerd reports a container that could not start
			if uerr := ctr.unmount(); uerr != nil {
				err = errors.Join(err, uerr)
			}
			close(ctr.done)
		}
	}()
	what := fmt.Sprintf("run pod %s/%s", pod.Namespace, pod.Name)
	for _, d := range []string{"rootfs", "upper", "work", "v"} {
		if err := os.MkdirAll(filepath.Join(ctr.dir, d), 0o755); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	rootfs := filepath.Join(ctr.dir, "rootfs")
	lower := "/"
	if r.c.opts.PodRoot != "" {
		if !filepath.IsAbs(r.c.opts.PodRoot) {
			return fmt.Errorf("%s: kubetest.Options.PodRoot %q: want an absolute path", what, r.c.opts.PodRoot)
		}
		lower = r.c.opts.PodRoot
	}
	opts := "lowerdir=" + lower + ",upperdir=" + filepath.Join(ctr.dir, "upper") + ",workdir=" + filepath.Join(ctr.dir, "work")
	if err := syscall.Mount("overlay", rootfs, "overlay", 0, opts); err != nil {
		return fmt.Errorf("%s: mount an overlay of %s on %s (%s): %w", what, lower, rootfs, opts, err)
	}
	ctr.addMount(rootfs)
	vols, err := r.volumes(ctx, pod, ctr)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(pod.Spec.Containers) == 0 {
		return fmt.Errorf("%s: the pod has no container", what)
	}
	mounts, err := containerMounts(pod, &pod.Spec.Containers[0], vols)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, d := range r.c.opts.PodBinds {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("%s: kubetest.Options.PodBinds has %q: want an absolute path", what, d)
		}
		mounts = append(mounts, volumeMount{host: filepath.Clean(d), container: filepath.Clean(d), readOnly: true})
	}
	spec, err := ociSpec(pod, r.c.opts.PodEnv, mounts, ctr.cgroups)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	gids := append([]uint32{spec.Process.User.GID}, spec.Process.User.AdditionalGids...)
	for _, d := range r.c.opts.PodBinds {
		if err := reachable(d, spec.Process.User.UID, gids); err != nil {
			return fmt.Errorf("%s: kubetest.Options.PodBinds has %s, which the pod's user cannot reach: %w (the directory and every one above it must let that user through)", what, d, err)
		}
	}
	b, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ctr.dir, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	logf, err := os.OpenFile(ctr.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := r.kwokObjects(ctx, pod, spec, mounts, ctr); err != nil {
		logf.Close()
		return fmt.Errorf("%s: %w", what, err)
	}

	// --keep: the stopped container and its cgroup stay until wait has
	// read whether the kernel killed it for memory, then deletes it.
	ctr.cmd = exec.Command(r.runc, "--root", r.root, "run", "--keep", "--bundle", ctr.dir, ctr.id)
	ctr.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out := &criLog{f: logf}
	stdout, err := ctr.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	stderr, err := ctr.cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return err
	}
	ctr.startedAt = time.Now()
	if err := startOnSpawner(ctr.cmd); err != nil {
		logf.Close()
		return fmt.Errorf("%s: start %s: %w", what, r.runc, err)
	}
	var copies sync.WaitGroup
	for stream, rd := range map[string]io.Reader{"stdout": stdout, "stderr": stderr} {
		copies.Go(func() { out.copy(stream, rd) })
	}
	go r.wait(ctx, ctr, &copies, logf)
	return nil
}

// wait waits for ctr's runc run, reads whether the kernel killed the
// container for memory, deletes it, unmounts what start mounted and,
// unless the runner killed it, reports the end with EndPod's status
// (reason OOMKilled after an OOM kill in its cgroup).
func (r *podRunner) wait(ctx context.Context, ctr *container, copies *sync.WaitGroup, logf *os.File) {
	copies.Wait() // the pipes reach EOF when runc and the container are gone
	err := ctr.cmd.Wait()
	code := ctr.cmd.ProcessState.ExitCode()
	if code < 0 {
		code = 128 + int(ctr.cmd.ProcessState.Sys().(syscall.WaitStatus).Signal()) // runc itself killed
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		r.t.Errorf("pod runner: wait for runc of pod %s/%s: %v", ctr.namespace, ctr.name, err)
	}
	if err := logf.Close(); err != nil {
		r.t.Errorf("pod runner: %v", err)
	}
	oom, oomErr := oomKilled(ctr.cgroups)
	if oomErr != nil {
		r.t.Errorf("pod runner: pod %s/%s: %v", ctr.namespace, ctr.name, oomErr)
	}
	if out, err := exec.Command(r.runc, "--root", r.root, "delete", "--force", ctr.id).CombinedOutput(); err != nil && !gone(out) {
		r.t.Errorf("pod runner: pod %s/%s: runc delete --force %s: %v: %s", ctr.namespace, ctr.name, ctr.id, err, out)
	}
	if err := ctr.unmount(); err != nil {
		r.t.Errorf("pod runner: pod %s/%s: %v", ctr.namespace, ctr.name, err)
	}
	r.mu.Lock()
	killed := ctr.killed
	ctr.exitCode = code
	r.mu.Unlock()
	if !killed {
		reason := "Completed"
		switch {
		case oom:
			reason = "OOMKilled" // as a kubelet says it, whatever the exit code
		case code != 0:
			reason = "Error"
		}
		if err := r.c.endPod(ctx, ctr.namespace, ctr.name, int32(code), reason, ""); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			r.t.Errorf("pod runner: %v", err)
		}
	}
	close(ctr.done)
}

// stop kills ctr's container (runc kill KILL), waits for its runc run to
// exit and deletes it (runc delete --force). A container that has already
// exited is left as it is.
func (r *podRunner) stop(ctr *container) error {
	r.mu.Lock()
	select {
	case <-ctr.done:
		r.mu.Unlock()
		return nil
	default:
	}
	ctr.killed = true
	r.mu.Unlock()
	if out, err := exec.Command(r.runc, "--root", r.root, "kill", ctr.id, "KILL").CombinedOutput(); err != nil && !gone(out) {
		return fmt.Errorf("pod %s/%s: runc kill %s KILL: %v: %s", ctr.namespace, ctr.name, ctr.id, err, out)
	}
	select {
	case <-ctr.done:
	case <-time.After(stopTimeout):
		return fmt.Errorf("pod %s/%s: runc run %s still running %v after runc kill KILL", ctr.namespace, ctr.name, ctr.id, stopTimeout)
	}
	if out, err := exec.Command(r.runc, "--root", r.root, "delete", "--force", ctr.id).CombinedOutput(); err != nil && !gone(out) {
		return fmt.Errorf("pod %s/%s: runc delete --force %s: %v: %s", ctr.namespace, ctr.name, ctr.id, err, out)
	}
	return nil
}

// gone says whether runc's output says the container is not there (runc
// run removes a container once it has exited) or not running.
func gone(out []byte) bool {
	return bytes.Contains(out, []byte("does not exist")) || bytes.Contains(out, []byte("not running"))
}

// volumes makes each of pod's volumes on this machine and returns their
// host directories by name: a claim's directory is the same for every pod
// (Cluster.VolumeDir); a Secret's data is written as files, root-owned,
// group fsGroup, mode defaultMode; an emptyDir is the pod's own
// directory, a tmpfs for medium Memory.
func (r *podRunner) volumes(ctx context.Context, pod *corev1.Pod, ctr *container) (map[string]string, error) {
	gid := -1
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		gid = int(*sc.FSGroup)
	}
	dirs := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(ctr.dir, "v", v.Name)
		switch {
		case v.PersistentVolumeClaim != nil:
			dir = r.c.VolumeDir(pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			if gid >= 0 { // as a kubelet applies fsGroup: group-owned, group-writable, setgid
				if err := os.Chown(dir, -1, gid); err != nil {
					return nil, err
				}
				if err := os.Chmod(dir, 0o2775); err != nil {
					return nil, err
				}
			}
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, err
			}
			if v.EmptyDir.Medium == corev1.StorageMediumMemory {
				if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0777"); err != nil {
					return nil, fmt.Errorf("volume %s: mount a tmpfs on %s: %w", v.Name, dir, err)
				}
				ctr.addMount(dir)
			}
			if err := os.Chmod(dir, 0o777); err != nil { // a kubelet's emptyDir is world-writable
				return nil, err
			}
			if gid >= 0 {
				if err := os.Chown(dir, -1, gid); err != nil {
					return nil, err
				}
			}
		case v.Secret != nil:
			if err := r.secretVolume(ctx, pod.Namespace, v.Secret, dir, gid); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		default: // a projected one too, such as the service account token's
			return nil, fmt.Errorf("volume %s: only persistentVolumeClaim, emptyDir and secret volumes are supported (a pod that mounts no service account token has automountServiceAccountToken: false)", v.Name)
		}
		dirs[v.Name] = dir
	}
	return dirs, nil
}

// secretVolume writes the Secret's data into dir as a kubelet does: each
// key (or each item's path) a file of mode defaultMode (the item's mode
// if set), owned by root and group gid (fsGroup; -1: root's).
func (r *podRunner) secretVolume(ctx context.Context, ns string, src *corev1.SecretVolumeSource, dir string, gid int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s, err := r.c.Client.CoreV1().Secrets(ns).Get(ctx, src.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && src.Optional != nil && *src.Optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read secret %s/%s: %w", ns, src.SecretName, err)
	}
	mode := int32(corev1.SecretVolumeSourceDefaultMode)
	if src.DefaultMode != nil {
		mode = *src.DefaultMode
	}
	type file struct {
		key, path string
		mode      int32
	}
	var files []file
	if len(src.Items) == 0 {
		for k := range s.Data {
			files = append(files, file{k, k, mode})
		}
	}
	for _, it := range src.Items {
		m := mode
		if it.Mode != nil {
			m = *it.Mode
		}
		if _, ok := s.Data[it.Key]; !ok {
			return fmt.Errorf("secret %s/%s has no key %q", ns, src.SecretName, it.Key)
		}
		files = append(files, file{it.Key, it.Path, m})
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.Clean("/"+f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, s.Data[f.key], 0o600); err != nil {
			return err
		}
		if err := os.Chown(p, 0, max(gid, 0)); err != nil {
			return err
		}
		if err := os.Chmod(p, os.FileMode(f.mode)&os.ModePerm); err != nil {
			return err
		}
	}
	return nil
}

// kwokObjects creates the pod's kwok Exec (exec runs the command on this
// machine, with the container's env whose paths under a mount are the
// host's, in the host directory of its working directory, as its user and
// group) and Logs (pods/log reads the container's log). Both are owned by
// the pod: the garbage collector removes them with it.
func (r *podRunner) kwokObjects(ctx context.Context, pod *corev1.Pod, spec *specs.Spec, mounts []volumeMount, ctr *container) error {
	var envs []any
	for _, kv := range spec.Process.Env {
		name, value, _ := strings.Cut(kv, "=")
		if h := hostPath(mounts, value); h != "" {
			value = h
		}
		envs = append(envs, map[string]any{"name": name, "value": value})
	}
	workDir := hostPath(mounts, spec.Process.Cwd)
	if workDir == "" { // in the container's root: the overlay, mounted on this machine
		workDir = filepath.Join(ctr.dir, "rootfs", spec.Process.Cwd)
	}
	local := map[string]any{"workDir": workDir, "envs": envs}
	if u := spec.Process.User; u.UID != 0 || u.GID != 0 {
		local["securityContext"] = map[string]any{"runAsUser": int64(u.UID), "runAsGroup": int64(u.GID)}
	}
	owner := []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID)}}
	meta := func() map[string]any {
		return map[string]any{"name": pod.Name, "namespace": pod.Namespace, "ownerReferences": owner}
	}
	objs := []struct {
		gvr schema.GroupVersionResource
		obj *unstructured.Unstructured
	}{
		{execGVR, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Exec", "metadata": meta(),
			"spec": map[string]any{"execs": []any{map[string]any{"local": local}}},
		}}},
		{logsGVR, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs", "metadata": meta(),
			"spec": map[string]any{"logs": []any{map[string]any{"logsFile": ctr.log}}},
		}}},
	}
	for _, o := range objs {
		_, err := r.dyn.Resource(o.gvr).Namespace(pod.Namespace).Create(ctx, o.obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // an earlier pod of that name: replace it
			if err = r.dyn.Resource(o.gvr).Namespace(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
				_, err = r.dyn.Resource(o.gvr).Namespace(pod.Namespace).Create(ctx, o.obj, metav1.CreateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("create kwok %s %s/%s: %w", o.obj.GetKind(), pod.Namespace, pod.Name, err)
		}
	}
	return nil
}

func (ctr *container) addMount(p string) {
	ctr.mountsMu.Lock()
	defer ctr.mountsMu.Unlock()
	ctr.mounts = append(ctr.mounts, p)
}

// unmount unmounts what start mounted for ctr, the last first.
func (ctr *container) unmount() error {
	ctr.mountsMu.Lock()
	defer ctr.mountsMu.Unlock()
	var errs []error
	for i := len(ctr.mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(ctr.mounts[i], 0); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", ctr.mounts[i], err))
		}
	}
	ctr.mounts = nil
	return errors.Join(errs...)
}

// criLog writes a container's output to its log file in the CRI log
// format a kubelet's runtime writes and kwok's Logs reads
// (k8s.io/cri-client/pkg/logs): one line per output line,
// "<RFC 3339 time> <stdout|stderr> <F|P> <text>", P for a partial line.
type criLog struct {
	mu sync.Mutex
	f  *os.File
}

// copy copies r, the stream's output, until EOF or an error reading it.
func (l *criLog) copy(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			tag := "P"
			if line[len(line)-1] == '\n' {
				tag, line = "F", line[:len(line)-1]
			}
			l.mu.Lock()
			fmt.Fprintf(l.f, "%s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, line)
			l.mu.Unlock()
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// oomKilled says whether the kernel's OOM killer killed a process of the
// cgroup at cgroupsPath inner (relative to this process's cgroup): the
// oom_kill count of its memory.oom_control (cgroup v1) or memory.events
// (v2) is not 0. A cgroup with neither file is an error naming it.
func oomKilled(inner string) (bool, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		file := "memory.oom_control"
		switch {
		case parts[1] == "":
			file = "memory.events"
		case !slices.Contains(strings.Split(parts[1], ","), "memory"):
			continue
		}
		for _, dir := range cgroupDirs(parts[1], parts[2], inner) {
			data, err := os.ReadFile(filepath.Join(dir, file))
			if errors.Is(err, os.ErrNotExist) {
				continue // not this hierarchy's (a v2 root on a v1 machine)
			}
			if err != nil {
				return false, err
			}
			n, err := counter(data, "oom_kill")
			if err != nil {
				return false, fmt.Errorf("%s: %w", filepath.Join(dir, file), err)
			}
			return n > 0, nil
		}
	}
	return false, fmt.Errorf("no memory.oom_control or memory.events of cgroup %s below this process's (runc removes the cgroup of a container that failed to start: its log says why)", inner)
}

// counter is the value of key in a cgroup file of "key value" lines.
func counter(data []byte, key string) (uint64, error) {
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: want a count: %w", key, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no %q line: want lines of \"key value\"", key)
}

// removeCgroups removes the cgroup directories of cgroupsPath inner, a
// path relative to this process's cgroup, in every hierarchy: runc removes
// them when a container is deleted; this removes what it left.
func removeCgroups(inner string) error {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, dir := range cgroupDirs(parts[1], parts[2], inner) {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cgroupDirs is where cgroupsPath inner is for one line of
// /proc/self/cgroup (controllers, own path): under /sys/fs/cgroup/<name>
// for a v1 hierarchy (name=systemd's is "systemd"), /sys/fs/cgroup/unified
// or /sys/fs/cgroup itself for v2.
func cgroupDirs(controllers, own, inner string) []string {
	var roots []string
	switch {
	case controllers == "":
		roots = []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}
	case strings.HasPrefix(controllers, "name="):
		roots = []string{filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(controllers, "name="))}
	default:
		for _, c := range strings.Split(controllers, ",") {
			roots = append(roots, filepath.Join("/sys/fs/cgroup", c))
		}
		roots = append(roots, filepath.Join("/sys/fs/cgroup", controllers))
	}
	var dirs []string
	for _, r := range roots {
		if _, err := os.Stat(filepath.Join(r, own)); err == nil {
			dirs = append(dirs, filepath.Join(r, own, inner))
		}
	}
	return dirs
}

// VolumeDir is the directory on this machine that holds the data of the
// claim named claim in namespace: every pod the runner runs that mounts
// the claim mounts this directory, so a pod that replaces another sees
// what the first wrote (what a persistent volume gives). Nothing checks
// that the claim is bound or how big it is.
func (c *Cluster) VolumeDir(namespace, claim string) string {
	return filepath.Join(c.Dir, "volumes", namespace, claim)
}

// ContainerPID waits until the runner runs the container of pod
// namespace/name and returns the host PID of its first process (runc
// state's pid: PID 1 in the container's PID namespace). It fails the test
// without Options.RunPods, or when the container ends before it runs.
func (c *Cluster) ContainerPID(t testing.TB, namespace, name string) int {
	t.Helper()
	r := c.runner
	if r == nil {
		t.Fatal("kubetest: ContainerPID needs a cluster started with Options.RunPods")
	}
	var pid int
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	if err := c.poll(ctx, fmt.Sprintf("the container of pod %s/%s running", namespace, name), func() error {
		r.mu.Lock()
		var ctr *container
		for _, x := range r.ctrs {
			if x.namespace == namespace && x.name == name {
				ctr = x
			}
		}
		r.mu.Unlock()
		if ctr == nil {
			return fmt.Errorf("no container yet for pod %s/%s", namespace, name)
		}
		out, err := exec.Command(r.runc, "--root", r.root, "state", ctr.id).Output()
		if err != nil {
			select {
			case <-ctr.done:
				return waitfor.Stop(fmt.Errorf("the container of pod %s/%s ended (exit code %d) before it was seen running", namespace, name, ctr.exitCode))
			default:
			}
			return fmt.Errorf("runc state %s: %w", ctr.id, err)
		}
		var st struct {
			Status string `json:"status"`
			PID    int    `json:"pid"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			return waitfor.Stop(fmt.Errorf("runc state %s printed %q: want JSON with status and pid: %w", ctr.id, out, err))
		}
		if st.Status != "running" || st.PID <= 0 {
			return fmt.Errorf("container %s is %s (pid %d)", ctr.id, st.Status, st.PID)
		}
		pid = st.PID
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return pid
}
