package kubetest

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
)

// defaultPath is the PATH of a container whose pod and image env
// (Options.PodEnv) set none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// defaultCaps are the capabilities a container runtime grants a container
// that drops none (containerd's and CRI-O's default set); a container that
// drops ALL, as Legion's does, starts from none.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// maskedPaths and readonlyPaths are containerd's defaults for an
// unprivileged container.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// volumeMount is where one of the container's mounts comes from on this
// machine.
type volumeMount struct {
	host      string // the host directory (a volume's, joined with the subPath)
	container string // the mount path in the container
	readOnly  bool
}

// containerMounts maps the container's volume mounts to host directories,
// given each volume's host directory by name; a secret volume is always
// read-only, as a kubelet mounts it.
func containerMounts(pod *corev1.Pod, ctr *corev1.Container, volumeDirs map[string]string) ([]volumeMount, error) {
	secret := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		secret[v.Name] = v.Secret != nil
	}
	var ms []volumeMount
	for _, m := range ctr.VolumeMounts {
		dir, ok := volumeDirs[m.Name]
		if !ok {
			return nil, fmt.Errorf("container %s mounts volume %q, which the pod does not declare", ctr.Name, m.Name)
		}
		if !path.IsAbs(m.MountPath) {
			return nil, fmt.Errorf("container %s mounts volume %q at %q: want an absolute path", ctr.Name, m.Name, m.MountPath)
		}
		if m.SubPath != "" {
			if path.IsAbs(m.SubPath) || strings.HasPrefix(path.Clean(m.SubPath), "..") {
				return nil, fmt.Errorf("container %s mounts volume %q with subPath %q: want a relative path inside the volume", ctr.Name, m.Name, m.SubPath)
			}
			dir = path.Join(dir, m.SubPath)
		}
		ms = append(ms, volumeMount{host: dir, container: path.Clean(m.MountPath), readOnly: m.ReadOnly || secret[m.Name]})
	}
	return ms, nil
}

// hostPath returns where the container's path p is on this machine: under
// the deepest mount that holds it, or "" when no mount holds it (it is in
// the container's root).
func hostPath(mounts []volumeMount, p string) string {
	if !path.IsAbs(p) {
		return ""
	}
	p = path.Clean(p)
	best := -1
	for i, m := range mounts {
		if (p == m.container || strings.HasPrefix(p, m.container+"/")) && (best < 0 || len(m.container) > len(mounts[best].container)) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return mounts[best].host + strings.TrimPrefix(p, mounts[best].container)
}

// ociSpec is the OCI runtime configuration (runc's config.json) of the
// pod's single container, rootfs the bundle's "rootfs" directory. It
// carries what the pod asks for and the runner honours: command and args,
// env, workingDir, user, group, fsGroup and supplemental groups,
// capabilities, no new privileges, a read-only root, seccomp
// RuntimeDefault (containerd's default profile), CPU and memory limits,
// the volume mounts; and mount, pid, ipc and uts namespaces (the host's
// network). What the runner cannot honour is an error naming the field,
// never silently dropped; what it does not apply (AppArmor, probes) is
// listed in the package doc.
func ociSpec(pod *corev1.Pod, imageEnv []string, mounts []volumeMount, cgroupsPath string) (*specs.Spec, error) {
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 || len(pod.Spec.EphemeralContainers) != 0 {
		return nil, fmt.Errorf("pod %s/%s has %d containers and %d init containers: the runner runs pods of exactly one container", pod.Namespace, pod.Name, len(pod.Spec.Containers), len(pod.Spec.InitContainers))
	}
	ctr := &pod.Spec.Containers[0]
	field := func(f string) string {
		return fmt.Sprintf("pod %s/%s container %s: %s", pod.Namespace, pod.Name, ctr.Name, f)
	}
	if len(ctr.Command) == 0 {
		return nil, fmt.Errorf("%s is empty: the runner runs the host's root, which has no image entrypoint; give the command", field("command"))
	}
	if pod.Spec.HostPID || pod.Spec.HostIPC {
		return nil, fmt.Errorf("pod %s/%s asks for the host's PID or IPC namespace: not supported", pod.Namespace, pod.Name)
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := ctr.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	if sc.Privileged != nil && *sc.Privileged {
		return nil, fmt.Errorf("%s is true: not supported", field("securityContext.privileged"))
	}
	if len(ctr.EnvFrom) != 0 {
		return nil, fmt.Errorf("%s is set: not supported; give each variable's value", field("envFrom"))
	}

	var user specs.User
	if u := cmpOr(sc.RunAsUser, psc.RunAsUser); u != nil {
		user.UID = uint32(*u)
	}
	if g := cmpOr(sc.RunAsGroup, psc.RunAsGroup); g != nil {
		user.GID = uint32(*g)
	}
	if nonRoot := cmpOr(sc.RunAsNonRoot, psc.RunAsNonRoot); nonRoot != nil && *nonRoot && user.UID == 0 {
		return nil, fmt.Errorf("%s: runAsNonRoot is true and the user is root (uid 0): a kubelet refuses to start it", field("securityContext"))
	}
	if psc.FSGroup != nil {
		user.AdditionalGids = append(user.AdditionalGids, uint32(*psc.FSGroup))
	}
	for _, g := range psc.SupplementalGroups {
		user.AdditionalGids = append(user.AdditionalGids, uint32(g))
	}

	// The image's env, then HOSTNAME, then the container's, each name
	// once, a later value replacing an earlier one in its place.
	var env []string
	at := map[string]int{}
	set := func(name, value string) {
		if i, ok := at[name]; ok {
			env[i] = name + "=" + value
			return
		}
		at[name] = len(env)
		env = append(env, name+"="+value)
	}
	for _, kv := range imageEnv {
		name, value, _ := strings.Cut(kv, "=")
		set(name, value)
	}
	set("HOSTNAME", hostname(pod))
	for _, e := range ctr.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("%s uses valueFrom: not supported; give a value", field("env "+e.Name))
		}
		set(e.Name, e.Value)
	}
	if _, ok := at["PATH"]; !ok {
		env = append([]string{"PATH=" + defaultPath}, env...)
	}

	caps := defaultCaps
	if sc.Capabilities != nil {
		if slices.Contains(sc.Capabilities.Drop, "ALL") {
			caps = nil
		}
		for _, c := range sc.Capabilities.Drop {
			caps = slices.DeleteFunc(slices.Clone(caps), func(x string) bool { return x == "CAP_"+string(c) })
		}
		for _, c := range sc.Capabilities.Add {
			caps = append(slices.Clone(caps), "CAP_"+string(c))
		}
	}
	cwd := ctr.WorkingDir
	if cwd == "" {
		cwd = "/"
	}
	if !path.IsAbs(cwd) {
		return nil, fmt.Errorf("%s %q: want an absolute path", field("workingDir"), cwd)
	}

	spec := &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: "rootfs", Readonly: sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		Process: &specs.Process{
			User: user,
			Args: append(slices.Clone(ctr.Command), ctr.Args...),
			Env:  env,
			Cwd:  cwd,
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			NoNewPrivileges: sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		},
		Hostname: hostname(pod),
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.MountNamespace}, {Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
			},
			CgroupsPath: cgroupsPath,
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
			},
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
		},
	}
	if spec.Process.Capabilities.Bounding == nil {
		spec.Process.Capabilities = &specs.LinuxCapabilities{}
	}
	spec.Linux.Resources = withLimits(spec.Linux.Resources, ctr.Resources)
	// Seccomp as containerd's CRI does it: after the capabilities, which
	// the profile reads.
	if prof := seccompProfile(psc, sc); prof != nil {
		switch prof.Type {
		case corev1.SeccompProfileTypeRuntimeDefault:
			spec.Linux.Seccomp = runtimeDefaultSeccomp(spec)
		case corev1.SeccompProfileTypeUnconfined:
		default:
			return nil, fmt.Errorf("%s %s: not supported; use RuntimeDefault or Unconfined", field("seccompProfile"), prof.Type)
		}
	}
	for _, m := range mounts {
		opts := []string{"rbind", "nosuid", "nodev"}
		if m.readOnly {
			opts = append(opts, "ro")
		} else {
			opts = append(opts, "rw")
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: m.container, Type: "bind", Source: m.host, Options: opts})
	}
	return spec, nil
}

// cpuPeriod is the CFS period a kubelet sets with a CPU limit (100 ms).
const cpuPeriod = 100000

// withLimits adds the container's resources to res as a kubelet asks a
// runtime for them: CPU shares from the CPU request (1024 per CPU, at
// least 2), a CFS quota from the CPU limit, the memory limit.
func withLimits(res *specs.LinuxResources, r corev1.ResourceRequirements) *specs.LinuxResources {
	if q, ok := r.Requests[corev1.ResourceCPU]; ok {
		shares := uint64(max(q.MilliValue()*1024/1000, 2))
		res.CPU = &specs.LinuxCPU{Shares: &shares}
	}
	if q, ok := r.Limits[corev1.ResourceCPU]; ok {
		if res.CPU == nil {
			res.CPU = &specs.LinuxCPU{}
		}
		period, quota := uint64(cpuPeriod), max(q.MilliValue()*cpuPeriod/1000, 1000) // the kernel's minimum quota is 1 ms
		res.CPU.Period, res.CPU.Quota = &period, &quota
	}
	if q, ok := r.Limits[corev1.ResourceMemory]; ok {
		limit := q.Value()
		res.Memory = &specs.LinuxMemory{Limit: &limit}
	}
	return res
}

// seccompProfile is the container's seccomp profile, else the pod's; nil
// (Unconfined, as a kubelet without --seccomp-default) when neither sets
// one.
func seccompProfile(psc *corev1.PodSecurityContext, sc *corev1.SecurityContext) *corev1.SeccompProfile {
	if sc.SeccompProfile != nil {
		return sc.SeccompProfile
	}
	return psc.SeccompProfile
}

// hostname is the pod's hostname as a kubelet sets it: spec.hostname, else
// the pod's name, cut to 63 bytes.
func hostname(pod *corev1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// cmpOr returns the first non-nil pointer.
func cmpOr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// reachable says why user uid, in groups gids, could not reach and read
// directory dir of this machine by its mode bits: the first directory on
// the way that it may not search, or dir itself that it may not read. It
// is nil when it can, and always for uid 0 (a container's root keeps
// CAP_DAC_OVERRIDE unless it drops it). A bound directory (Options.
// PodBinds) it cannot reach makes the container's start fail with no
// word of why: runc reports a program on it as "executable file not
// found in $PATH".
func reachable(dir string, uid uint32, gids []uint32) error {
	if uid == 0 {
		return nil
	}
	dir = filepath.Clean(dir)
	var walk []string
	for d := dir; ; d = filepath.Dir(d) {
		walk = append(walk, d)
		if d == "/" || d == "." {
			break
		}
	}
	slices.Reverse(walk)
	for _, d := range walk {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("stat %s: no owner", d)
		}
		perm := uint32(fi.Mode().Perm())
		var bits uint32
		switch {
		case st.Uid == uid:
			bits = perm >> 6
		case slices.Contains(gids, st.Gid):
			bits = perm >> 3
		default:
			bits = perm
		}
		want, what := uint32(1), "search"
		if d == dir {
			want, what = 5, "read"
		}
		if bits&want != want {
			return fmt.Errorf("user %d (groups %v) may not %s %s (mode %04o, owner %d:%d)", uid, gids, what, d, perm, st.Uid, st.Gid)
		}
	}
	return nil
}
