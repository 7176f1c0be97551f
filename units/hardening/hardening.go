// Package hardening is the catalog of systemd sandboxing directives that
// Legion writes into its units: the fixed sets of the helper
// (legion.service), the controllers (legion@.service) and the dashboard
// (legion-web.service), and the worker
// set, which a team may relax or tighten in legion.toml
// ([teams.<name>.hardening]). Each directive carries why it is there, or
// why it is only optional for workers.
//
// The sets follow the rules of a systemd 252 user manager, which differ
// from system units: PrivateTmp=, ProtectHome= and ProtectSystem= are
// silently ignored unless PrivateUsers=yes; PrivateDevices= and
// CapabilityBoundingSet= without it fail the start (218/CAPABILITIES); and
// inside a container, ProtectKernelLogs= and ProtectProc= with
// PrivateUsers=yes fail it (226/NAMESPACE). So every set has PrivateUsers=,
// and the last two are never defaults.
//
// The package is plain data with no dependencies, so that package config
// can check names against it and package units can render it.
package hardening

import (
	"fmt"
	"slices"
	"strings"
)

// Directive is one sandboxing setting of a [Service] section.
type Directive struct {
	Key   string // unit-file key, e.g. "NoNewPrivileges"
	Value string // unit-file value, e.g. "yes"; "" for an empty assignment (CapabilityBoundingSet=)
	// Doc says what the directive takes away and why Legion can do without
	// it (or, for an optional worker directive, what an agent would lose).
	Doc string
	// NeedsPrivateUsers: a user manager ignores or refuses the directive
	// unless PrivateUsers=yes is set too.
	NeedsPrivateUsers bool
	// Specifiers: Value holds systemd specifiers (%t), written as they
	// are rather than escaped.
	Specifiers bool
}

// String is the directive as a unit-file line without the newline.
func (d Directive) String() string { return d.Key + "=" + d.Value }

// The directives, by the name used in legion.toml (the unit-file key).
var (
	// PrivateUsers gives the unit a user namespace mapping only the user
	// (and root to nobody): capabilities inside mean nothing outside, and
	// setuid programs cannot gain privileges. A user manager applies the
	// mount-namespace directives below only with it.
	privateUsers = Directive{Key: "PrivateUsers", Value: "yes",
		Doc: "a user namespace that maps only you: other users' files show as nobody, sudo and setuid programs cannot raise privileges; needed by every directive marked \"needs PrivateUsers\""}
	// NoNewPrivileges: no setuid, setgid or file capabilities on exec.
	noNewPrivileges = Directive{Key: "NoNewPrivileges", Value: "yes",
		Doc: "exec never gains privileges (setuid, setgid, file capabilities): sudo and su fail, and so does ping where it relies on a file capability"}
	// ProtectSystem=full: /usr, /boot, /efi and /etc read-only. An ordinary
	// user cannot write them anyway; home, /tmp and /var stay writable.
	protectSystemFull = Directive{Key: "ProtectSystem", Value: "full", NeedsPrivateUsers: true,
		Doc: "/usr, /boot, /efi and /etc read-only (your home, /tmp, /var stay writable): a package manager run as root cannot install system-wide"}
	// PrivateDevices: a private /dev with only the pseudo devices (null,
	// zero, random, tty, ptmx and pts): no disks, GPUs, /dev/kvm or
	// /dev/fuse.
	privateDevices = Directive{Key: "PrivateDevices", Value: "yes", NeedsPrivateUsers: true,
		Doc: "a private /dev with only the pseudo devices (null, zero, random, tty, ptmx, pts): no disks, GPUs, /dev/kvm or /dev/fuse"}
	protectKernelTunables = Directive{Key: "ProtectKernelTunables", Value: "yes", NeedsPrivateUsers: true,
		Doc: "/proc/sys, /sys and friends read-only: no sysctl changes"}
	protectKernelModules = Directive{Key: "ProtectKernelModules", Value: "yes", NeedsPrivateUsers: true,
		Doc: "no loading of kernel modules, /usr/lib/modules hidden"}
	protectControlGroups = Directive{Key: "ProtectControlGroups", Value: "yes", NeedsPrivateUsers: true,
		Doc: "/sys/fs/cgroup read-only: nothing can move itself out of the unit's limits"}
	protectClock = Directive{Key: "ProtectClock", Value: "yes", NeedsPrivateUsers: true,
		Doc: "the system clock cannot be set"}
	protectHostname = Directive{Key: "ProtectHostname", Value: "yes", NeedsPrivateUsers: true,
		Doc: "the host name cannot be changed (a private UTS namespace)"}
	restrictRealtime = Directive{Key: "RestrictRealtime", Value: "yes",
		Doc: "no realtime scheduling, which could starve the machine"}
	restrictSUIDSGID = Directive{Key: "RestrictSUIDSGID", Value: "yes",
		Doc: "no creating setuid or setgid files"}
	lockPersonality = Directive{Key: "LockPersonality", Value: "yes",
		Doc: "the execution domain (personality(2)) is locked: gdb cannot turn off address-space randomization, setarch fails"}
	keyringModePrivate = Directive{Key: "KeyringMode", Value: "private",
		Doc: "a session keyring of its own rather than the user's"}
	capabilityBoundingSetEmpty = Directive{Key: "CapabilityBoundingSet", Value: "", NeedsPrivateUsers: true,
		Doc: "no capabilities at all, even for a process running as root, nor in a user namespace of its own, which sandboxes such as Codex's (bubblewrap) need: a team that runs Codex keeps the bounding set"}
	memoryDenyWriteExecute = Directive{Key: "MemoryDenyWriteExecute", Value: "yes",
		Doc: "no memory both writable and executable: breaks every JIT, Node.js (Claude Code) included"}
	systemCallArchitectures = Directive{Key: "SystemCallArchitectures", Value: "native",
		Doc: "only native system calls: 32-bit (i386) programs fail"}
	systemCallFilterService = Directive{Key: "SystemCallFilter", Value: "@system-service",
		Doc: "only the system calls of ordinary services: ptrace, mount, perf, reboot and the like fail (strace, gdb, containers)"}
	// The controllers and the dashboard probe whether the sandbox policy
	// holds (ptyworker/confine's Probe, in a child under this filter):
	// Landlock's version query, which systemd 252's @system-service
	// leaves out.
	systemCallFilterProbe = Directive{Key: "SystemCallFilter", Value: "@system-service landlock_create_ruleset",
		Doc: "only the system calls of ordinary services, and landlock_create_ruleset, which asks the kernel's Landlock version (whether the sandbox policy holds): ptrace, mount, perf, reboot and the like fail"}
	// The workers' filter adds Landlock's calls, which systemd 252's
	// @system-service leaves out: a worker builds its agent's sandbox,
	// and the agent's trampoline enters it.
	systemCallFilterWorker = Directive{Key: "SystemCallFilter", Value: "@system-service landlock_create_ruleset landlock_add_rule landlock_restrict_self",
		Doc: "only the system calls of ordinary services (and Landlock's, for the sandbox policy): ptrace, mount, perf, reboot and the like fail (strace, gdb, containers)"}
	restrictNamespaces = Directive{Key: "RestrictNamespaces", Value: "yes",
		Doc: "no new namespaces: sandboxes such as bubblewrap and rootless containers fail"}
	protectKernelLogs = Directive{Key: "ProtectKernelLogs", Value: "yes", NeedsPrivateUsers: true,
		Doc: "no kernel log (dmesg); with PrivateUsers it fails the start inside a container (226/NAMESPACE)"}
	protectProcInvisible = Directive{Key: "ProtectProc", Value: "invisible", NeedsPrivateUsers: true,
		Doc: "other users' processes hidden in /proc; with PrivateUsers it fails the start inside a container (226/NAMESPACE)"}
	privateTmp = Directive{Key: "PrivateTmp", Value: "yes", NeedsPrivateUsers: true,
		Doc: "a /tmp and /var/tmp of its own, removed when the unit stops: what an agent leaves there is out of your sight, and tmux or X servers there out of its reach"}
	umaskPrivate = Directive{Key: "UMask", Value: "0077",
		Doc: "new files readable by the user only"}
	// The address families differ by unit; see Helper and Controller.
	addressFamiliesUnix = Directive{Key: "RestrictAddressFamilies", Value: "AF_UNIX",
		Doc: "unix sockets only: no network"}
	// The sockets under $XDG_RUNTIME_DIR (%t) through which a process of
	// the user's reaches beyond its unit: the session bus and the user
	// manager's private socket (systemd-run --user runs anything, outside
	// any sandbox), the key agents' (gpg-agent, gnome-keyring's ssh agent)
	// and the container engines'. Landlock below ABI 9 does not stop
	// connections to pathname unix sockets; a mount namespace does. The
	// worker itself needs none of them (it talks to systemd by
	// NOTIFY_SOCKET, to Legion by its own sockets).
	runtimeSocketsHidden = Directive{Key: "InaccessiblePaths", Value: "-%t/bus -%t/systemd/private -%t/gnupg -%t/keyring -%t/podman -%t/docker.sock", NeedsPrivateUsers: true, Specifiers: true,
		Doc: "the user's D-Bus session bus, the user manager's private socket and the key agents' and container engines' sockets under $XDG_RUNTIME_DIR out of reach: an agent cannot have systemd run something outside its unit (systemd-run --user), sign with your keys or drive your containers"}
	// The workers' default: what agents use (netlink for the network
	// interfaces that Node.js and ip(8) list, and that sandboxes such as
	// bubblewrap use to bring up a loopback).
	addressFamiliesAgent = Directive{Key: "RestrictAddressFamilies", Value: "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
		Doc: "unix, IP and netlink sockets only: no packet sockets (tcpdump), bluetooth, vsock or other families"}
	addressFamiliesInet = Directive{Key: "RestrictAddressFamilies", Value: "AF_UNIX AF_INET AF_INET6",
		Doc: "unix and IP sockets only: no netlink, packet or bluetooth sockets (ip, tcpdump)"}
)

// Helper is the set of legion.service. The helper talks to the user manager
// over D-Bus and to its clients and workers over unix sockets under
// $XDG_RUNTIME_DIR, and writes its state under $XDG_STATE_HOME: it needs
// no network, devices, privileges, or W+X memory (it is Go). It has no
// PrivateTmp: a helper with a /tmp of its own put the tmux server of
// `legion tmux` out of reach. ProtectHome is left out because its state
// lives in the home directory.
func Helper() []Directive {
	return append(common(), umaskPrivate, addressFamiliesUnix)
}

// Controller is the set of legion@.service. Like the helper, plus IP
// sockets for the trackers' APIs (Linear, GitHub), and without UMask=0077:
// it checks out each issue's worktree (git worktree add), whose files
// would otherwise be readable by the user only, unlike the rest of the
// repository. It runs git in the team's workspace, anywhere under the home
// directory, so the home stays writable.
func Controller() []Directive {
	return append(withFilter(common(), systemCallFilterProbe), addressFamiliesInet)
}

// Web is the set of legion-web.service, the dashboard's server. Like the
// controller (it reads the teams' trackers over IP through the controller's
// code, and runs git in their workspaces for diffs), with UMask=0077 like
// the helper (it writes only its token). It listens on the sockets that
// legion-web.socket hands it, so it creates no listening socket itself.
func Web() []Directive {
	return append(withFilter(common(), systemCallFilterProbe), umaskPrivate, addressFamiliesInet)
}

// withFilter is set with its SystemCallFilter= replaced by filter: one
// line per key, as systemd-analyze and people read a unit.
func withFilter(set []Directive, filter Directive) []Directive {
	out := slices.Clone(set)
	for i, d := range out {
		if d.Key == filter.Key {
			out[i] = filter
		}
	}
	return out
}

// common is what the helper and the controllers share: everything but the
// address families and the umask. Both are Go programs that run no agent:
// no JIT, no 32-bit code, no namespaces, only the system calls of ordinary
// services.
func common() []Directive {
	return []Directive{
		privateUsers,
		noNewPrivileges,
		protectSystemFull,
		privateDevices,
		protectKernelTunables,
		protectKernelModules,
		protectControlGroups,
		protectClock,
		protectHostname,
		restrictRealtime,
		restrictSUIDSGID,
		restrictNamespaces,
		lockPersonality,
		memoryDenyWriteExecute,
		systemCallArchitectures,
		systemCallFilterService,
		keyringModePrivate,
		capabilityBoundingSetEmpty,
	}
}

// WorkerDefaults is the default set of the worker units: only what an
// agent cannot need. An agent runs git, compilers, package managers, test
// suites, a browser, sandboxes of its own, and the network, in your home
// and /tmp; Claude Code is Node.js (a JIT). So workers keep W+X memory, all
// system calls of the native architecture, namespaces, unix, IP and
// netlink sockets, /tmp and the home directory; they lose privileges,
// devices, the kernel's and the system's settings, /usr and /etc writes,
// 32-bit programs, personality changes, and the other socket families.
// (LockPersonality, SystemCallArchitectures and RestrictAddressFamilies
// joined the defaults with the sandbox policy, which turns the agents'
// own prompts off: systemd-analyze rates the worker 4.6 rather than 5.2.)
func WorkerDefaults() []Directive {
	return []Directive{
		privateUsers,
		noNewPrivileges,
		protectSystemFull,
		privateDevices,
		protectKernelTunables,
		protectKernelModules,
		protectControlGroups,
		protectClock,
		protectHostname,
		restrictRealtime,
		restrictSUIDSGID,
		lockPersonality,
		systemCallArchitectures,
		addressFamiliesAgent,
		runtimeSocketsHidden,
		keyringModePrivate,
		capabilityBoundingSetEmpty,
	}
}

// WorkerOptional are the directives a team may add to its workers
// (hardening.add): each takes something away that some agents need.
// RestrictAddressFamilies here (no netlink) replaces the default's.
func WorkerOptional() []Directive {
	return []Directive{
		systemCallFilterWorker,
		restrictNamespaces,
		addressFamiliesInet,
		memoryDenyWriteExecute,
		privateTmp,
		protectKernelLogs,
		protectProcInvisible,
		umaskPrivate,
	}
}

// Worker is the worker set of a team: WorkerDefaults without the keys in
// relax, then the WorkerOptional directives named in add, in catalog
// order. It fails, naming the key and what is allowed, on an unknown or
// repeated name, a name in both lists, and a set in which a directive
// needs PrivateUsers while relax removes it.
func Worker(relax, add []string) ([]Directive, error) {
	defaults, optional := WorkerDefaults(), WorkerOptional()
	if err := CheckNames("relax", relax, defaults); err != nil {
		return nil, err
	}
	if err := CheckNames("add", add, WorkerAddable()); err != nil {
		return nil, err
	}
	for _, k := range relax {
		if slices.Contains(add, k) {
			return nil, fmt.Errorf("%s is in both relax and add: keep it in one", k)
		}
	}
	var out []Directive
	for _, d := range defaults {
		if !slices.Contains(relax, d.Key) {
			out = append(out, d)
		}
	}
	for _, d := range optional {
		if !slices.Contains(add, d.Key) {
			continue
		}
		if i := slices.IndexFunc(out, func(o Directive) bool { return o.Key == d.Key }); i >= 0 {
			out[i] = d // the narrower value replaces the default's
		} else {
			out = append(out, d)
		}
	}
	if slices.Contains(relax, privateUsers.Key) {
		var need []string
		for _, d := range out {
			if d.NeedsPrivateUsers {
				need = append(need, d.Key)
			}
		}
		if len(need) > 0 {
			return nil, fmt.Errorf("relax: PrivateUsers is needed by %s (a user manager ignores or refuses them without it): relax them too, or keep PrivateUsers", strings.Join(need, ", "))
		}
	}
	return out, nil
}

// WorkerAddable are the names hardening.add accepts: WorkerOptional's, and
// the defaults that were optional before (LockPersonality,
// SystemCallArchitectures), so that a legion.toml that adds them still
// loads; adding them changes nothing.
func WorkerAddable() []Directive {
	return append(WorkerOptional(), lockPersonality, systemCallArchitectures)
}

// CheckNames checks that names are keys of set, each once; list names the
// list in the error ("relax", "add").
func CheckNames(list string, names []string, set []Directive) error {
	var keys []string
	for _, d := range set {
		keys = append(keys, d.Key)
	}
	for i, n := range names {
		if !slices.Contains(keys, n) {
			return fmt.Errorf("%s: unknown directive %q: expected one of %s", list, n, strings.Join(keys, ", "))
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("%s: %s is listed twice", list, n)
		}
	}
	return nil
}

// Unsupported is what the host's user manager cannot apply (package
// units/hostprobe finds out): unit-file key → what a unit with it showed.
// Besides the directives above it may name the resource keys (MemoryMax,
// MemorySwapMax, CPUQuota, CPUWeight, TasksMax).
type Unsupported map[string]string

// Supported is set without the directives u names.
func (u Unsupported) Supported(set []Directive) []Directive {
	if len(u) == 0 {
		return set
	}
	var out []Directive
	for _, d := range set {
		if _, no := u[d.Key]; !no {
			out = append(out, d)
		}
	}
	return out
}

// Left is the keys of set that u leaves out, in set's order.
func (u Unsupported) Left(set []Directive) []string {
	var out []string
	for _, d := range set {
		if _, no := u[d.Key]; no {
			out = append(out, d.Key)
		}
	}
	return out
}
