// Package hostprobe finds out which of the directives Legion writes the
// user manager can apply on this host, by trying them: each group of
// directives goes into a transient unit (systemd-run --user --wait) that
// runs `legion --probe-effect CHECK`, which looks, from inside the unit, for
// the group's effect (a user namespace, a read-only /usr, a seccomp
// filter, its own cgroup's limits, a journal stream). A group whose unit
// fails to start (217/USER where user namespaces are denied, 218 or 226
// where a namespace cannot be set up) or whose effect is missing (a user
// manager ignores ProtectSystem= without a user namespace) is not
// supported, with the reason and the fix.
//
// It is not a guess from version strings or sysctls: Ubuntu 24.04's
// kernel.apparmor_restrict_unprivileged_userns, user.max_user_namespaces,
// a cgroup v1 host, a container without journald and an old systemd all
// show as what they do to a unit.
//
// `legion install` writes units with what is supported (package units,
// GenerateOptions.Unsupported) and names the rest; `legion doctor` probes
// again, so a fix shows as units out of date until install runs again.
package hostprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/legion-dev/legion/internal/envlist"
	"github.com/legion-dev/legion/units/hardening"
)

// Check is what `legion --probe-effect` looks for inside a probe unit.
type Check string

// The checks (see Observe).
const (
	CheckStarted     Check = "started"      // the unit started at all
	CheckMount       Check = "mount"        // awk(1) finds a line of its mount table for which ARG holds
	CheckUserNS      Check = "userns"       // in a user namespace of its own
	CheckReadOnlyUsr Check = "readonly-usr" // /usr is mounted read-only
	CheckSeccomp     Check = "seccomp"      // no new privileges, a seccomp filter
	CheckMemory      Check = "memory"       // its cgroup's memory limit is ARG bytes
	CheckCPU         Check = "cpu"          // its cgroup's CPU quota is ARG µs per 100 ms
	CheckTasks       Check = "tasks"        // its cgroup's task limit is ARG
	CheckJournal     Check = "journal"      // its stdout is a stream to the journal
)

// Exit statuses of `legion --probe-effect`.
const (
	ExitHolds  = 0 // the effect is there
	ExitAbsent = 3 // the unit ran without the effect
	ExitError  = 4 // the check itself failed (a file it reads is missing)
)

// The fixes, shared by the groups they lift.
const (
	fixUserNS = "let the user manager create user namespaces. On Ubuntu 23.10 and later AppArmor denies them to unprivileged programs: " +
		"either `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (for every program; persist it in /etc/sysctl.d/), " +
		"or an AppArmor profile for the user manager that allows them (contrib/apparmor/legion-systemd-user, see the README). " +
		"Elsewhere `sysctl user.max_user_namespaces` must be above 0. Then run `legion install` again"
	fixCgroup = "boot with the unified cgroup hierarchy (cgroup v2: systemd.unified_cgroup_hierarchy=1 on the kernel command line) " +
		"with the controllers delegated to user managers (if `cat /sys/fs/cgroup/user.slice/user-$UID.slice/user@$UID.service/cgroup.controllers` lacks cpu, memory or pids: " +
		"a drop-in for user@.service with Delegate=cpu memory pids). Then run `legion install` again"
	fixNamespace = "the user manager could not set up the namespace the directives need (inside a container it may lack the privileges): " +
		"run Legion where a user manager can, or accept the units without them"
	fixJournal = "run systemd-journald (a booted system has it; a container may not): until then units' output goes to the manager's console, " +
		"`legion logs` and `journalctl --user` show nothing, and Legion's own transcripts and log files are unaffected"
)

// Group is directives tried together in one transient unit.
type Group struct {
	Name  string   // what it is, for people: "user namespaces"
	Keys  []string // the unit-file keys it decides, as Legion writes them
	Props []string // the systemd-run --property assignments
	Check Check
	Arg   string // the check's argument, if any
	// UserNS: tried with PrivateUsers=yes when the host has user
	// namespaces (a user manager applies these only in one).
	UserNS bool
	// Kept: written even where not supported. The resource limits are:
	// systemd keeps them and enforces them once the cgroup controller is
	// there, without a new install; install and doctor say they are not
	// enforced. (The journal has no keys of its own.)
	Kept bool
	Fix  string
}

// runtimeDirMark stands for $XDG_RUNTIME_DIR in a group's Props and Arg.
const runtimeDirMark = "@RUNTIME@"

// Groups are the groups probed, user namespaces first (the others depend on
// it). KeyringMode= and UMask= need no kernel feature and are not probed.
func Groups() []Group {
	return []Group{
		{Name: "user namespaces", Keys: []string{"PrivateUsers"}, Props: []string{"PrivateUsers=yes"}, Check: CheckUserNS, Fix: fixUserNS},
		{
			Name: "mount and device namespaces",
			Keys: []string{"ProtectSystem", "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups", "ProtectClock", "ProtectHostname", "CapabilityBoundingSet"},
			Props: []string{"ProtectSystem=full", "PrivateDevices=yes", "ProtectKernelTunables=yes", "ProtectKernelModules=yes",
				"ProtectControlGroups=yes", "ProtectClock=yes", "ProtectHostname=yes", "CapabilityBoundingSet="},
			Check: CheckReadOnlyUsr, UserNS: true,
			Fix: fixNamespace,
		},
		// The workers hide the sockets under $XDG_RUNTIME_DIR (the session
		// bus, the manager's private socket): tried on the private socket,
		// which every user manager has. Props and Arg get the runtime dir
		// (a transient unit's properties have no specifiers).
		{Name: "hidden sockets", Keys: []string{"InaccessiblePaths"}, Props: []string{"InaccessiblePaths=-" + runtimeDirMark + "/systemd/private"}, Check: CheckMount,
			Arg: `$5 == "` + runtimeDirMark + `/systemd/private"`, UserNS: true, Fix: fixNamespace},
		// Each its own group, looked for in the unit's mount table by
		// awk(1) rather than legion: a /tmp of its own hides a legion
		// binary that lives in /tmp (as a test's does). A user manager
		// ignores them without a user namespace; inside a container it
		// may fail them (226/NAMESPACE).
		{Name: "a private /tmp", Keys: []string{"PrivateTmp"}, Props: []string{"PrivateTmp=yes"}, Check: CheckMount,
			Arg: `$5 == "/tmp" && $4 ~ /systemd-private-/`, UserNS: true, Fix: fixNamespace},
		{Name: "a hidden kernel log", Keys: []string{"ProtectKernelLogs"}, Props: []string{"ProtectKernelLogs=yes"}, Check: CheckMount,
			Arg: `$5 == "/proc/kmsg"`, UserNS: true, Fix: fixNamespace + "; or leave it out of hardening.add"},
		{Name: "hidden processes", Keys: []string{"ProtectProc"}, Props: []string{"ProtectProc=invisible"}, Check: CheckMount,
			Arg: `$5 == "/proc" && /hidepid=(invisible|2)/`, UserNS: true, Fix: fixNamespace + "; or leave it out of hardening.add"},
		{
			Name: "system call filters",
			Keys: []string{"NoNewPrivileges", "SystemCallFilter", "SystemCallArchitectures", "RestrictNamespaces", "RestrictRealtime",
				"RestrictSUIDSGID", "LockPersonality", "MemoryDenyWriteExecute", "RestrictAddressFamilies"},
			Props: []string{"NoNewPrivileges=yes", "SystemCallFilter=@system-service", "SystemCallArchitectures=native", "RestrictNamespaces=yes",
				"RestrictRealtime=yes", "RestrictSUIDSGID=yes", "LockPersonality=yes", "MemoryDenyWriteExecute=yes", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"},
			Check: CheckSeccomp,
			Fix:   "a kernel with seccomp (CONFIG_SECCOMP_FILTER) and a systemd built with it (systemctl --version lists +SECCOMP)",
		},
		{Name: "memory limits", Keys: []string{"MemoryMax", "MemorySwapMax"}, Props: []string{"MemoryMax=64M"}, Check: CheckMemory, Arg: strconv.Itoa(64 << 20), Kept: true, Fix: fixCgroup},
		{Name: "CPU limits", Keys: []string{"CPUQuota", "CPUWeight"}, Props: []string{"CPUQuota=50%"}, Check: CheckCPU, Arg: "50000", Kept: true, Fix: fixCgroup},
		{Name: "task limits", Keys: []string{"TasksMax"}, Props: []string{"TasksMax=77"}, Check: CheckTasks, Arg: "77", Kept: true, Fix: fixCgroup},
		{Name: "the journal", Props: []string{"StandardOutput=journal"}, Check: CheckJournal, Kept: true, Fix: fixJournal},
	}
}

// Result is one group's outcome.
type Result struct {
	Group
	OK  bool
	Why string // when not OK: what the unit showed
}

// Report is what a probe found.
type Report struct {
	// Results are the groups' outcomes, in Groups order; empty when the
	// probe could not run.
	Results []Result
	// Err is why the probe could not run (no user manager, no
	// systemd-run); the units are then written with every directive.
	Err error
}

// Unsupported is the directives the host cannot apply, each with why, for
// units.GenerateOptions: those of the failed groups that are not Kept.
func (r Report) Unsupported() hardening.Unsupported {
	u := hardening.Unsupported{}
	for _, res := range r.Results {
		if res.OK || res.Kept {
			continue
		}
		for _, k := range res.Keys {
			u[k] = res.Why
		}
	}
	return u
}

// Failed is the results that are not OK.
func (r Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if !res.OK {
			out = append(out, res)
		}
	}
	return out
}

// Options say what to run.
type Options struct {
	// Bin is the legion binary that runs in the probe units (with
	// EffectFlag): the one the units run. Required.
	Bin string
	// Env is the environment of systemd-run (it finds the user manager by
	// XDG_RUNTIME_DIR and DBUS_SESSION_BUS_ADDRESS); nil means this
	// process's.
	Env []string
}

// Probe tries every group and reports. User namespaces go first; the
// rest run at once, each with PrivateUsers=yes where it needs it and the
// host has it.
func Probe(ctx context.Context, o Options) Report {
	run, err := exec.LookPath("systemd-run")
	if err != nil {
		return Report{Err: fmt.Errorf("systemd-run not found (it comes with systemd): %w", err)}
	}
	if st, err := os.Stat(o.Bin); err != nil || st.Mode()&0o111 == 0 || !filepath.IsAbs(o.Bin) {
		return Report{Err: fmt.Errorf("the legion binary %q to run in the probe units: not an absolute path to an executable file (%v)", o.Bin, err)}
	}
	awk, err := exec.LookPath("awk")
	if err != nil {
		return Report{Err: fmt.Errorf("awk(1), which reads the probe units' mount tables: %w", err)}
	}
	p := prober{o: o, run: run, awk: awk}
	groups := Groups()
	first := p.try(ctx, groups[0], false)
	if first.err != nil {
		return Report{Err: first.err}
	}
	rep := Report{Results: make([]Result, len(groups))}
	rep.Results[0] = first.Result
	var wg sync.WaitGroup
	errs := make([]error, len(groups))
	for i, g := range groups[1:] {
		wg.Go(func() {
			out := p.try(ctx, g, first.OK && g.UserNS)
			if !out.OK && g.UserNS && !first.OK {
				// Tried without a user namespace, which is what it
				// lacked: the fix is the user namespaces'.
				out.Fix = "they need a user namespace (" + first.Why + "): " + fixUserNS
			}
			rep.Results[i+1], errs[i+1] = out.Result, out.err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Report{Err: err}
	}
	return rep
}

type outcome struct {
	Result
	err error // the probe could not run at all
}

// prober runs the probe units: systemd-run, and in them legion or awk.
type prober struct {
	o        Options
	run, awk string
}

// runtimeDir is XDG_RUNTIME_DIR of the environment systemd-run gets.
func (p prober) runtimeDir() string {
	env := p.o.Env
	if env == nil {
		env = os.Environ()
	}
	v, _ := envlist.Lookup(env, "XDG_RUNTIME_DIR")
	return v
}

// try runs one group's unit and reads its exit status.
func (p prober) try(ctx context.Context, g Group, userns bool) outcome {
	props := slices.Clone(g.Props)
	arg := g.Arg
	if strings.Contains(strings.Join(props, " ")+arg, runtimeDirMark) {
		rt := p.runtimeDir()
		if rt == "" || strings.ContainsAny(rt, "\" \\\n") {
			return outcome{Result: Result{Group: g, Why: fmt.Sprintf("not tried: XDG_RUNTIME_DIR %q is not a plain path", rt)}}
		}
		for i := range props {
			props[i] = strings.ReplaceAll(props[i], runtimeDirMark, rt)
		}
		arg = strings.ReplaceAll(arg, runtimeDirMark, rt)
	}
	if userns {
		props = append(props, "PrivateUsers=yes")
	}
	args := []string{"--user", "--wait", "--quiet", "--collect", "--description=Legion host probe: " + g.Name}
	for _, p := range props {
		args = append(args, "--property="+p)
	}
	switch g.Check {
	case CheckMount:
		args = append(args, p.awk, arg+" { found = 1 } END { exit found ? 0 : 3 }", "/proc/self/mountinfo")
	default:
		args = append(args, p.o.Bin, EffectFlag, string(g.Check))
		if arg != "" {
			args = append(args, arg)
		}
	}
	cmd := exec.CommandContext(ctx, p.run, args...)
	cmd.Env = p.o.Env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	res := Result{Group: g}
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.OK = true
		return outcome{Result: res}
	case errors.As(err, &ee):
		res.Why = why(g, ee.ExitCode(), strings.TrimSpace(stderr.String()))
		if ee.ExitCode() == 1 && isManagerError(stderr.String()) {
			return outcome{err: fmt.Errorf("systemd-run --user: %s", strings.TrimSpace(stderr.String()))}
		}
		return outcome{Result: res}
	default:
		return outcome{err: fmt.Errorf("systemd-run --user: %w", err)}
	}
}

// isManagerError: systemd-run's own failure to reach the user manager,
// rather than the unit's.
func isManagerError(stderr string) bool {
	for _, s := range []string{"Failed to connect to bus", "Failed to create bus connection", "No such file or directory"} {
		if strings.Contains(stderr, s) && !strings.Contains(stderr, "Unknown assignment") {
			return true
		}
	}
	return false
}

// why says what a group's unit showed, by its exit status.
func why(g Group, status int, stderr string) string {
	switch status {
	case ExitAbsent:
		return "the unit ran without it: " + absent(g.Check)
	case ExitError:
		return "the probe could not look: exit status 4 (see `journalctl --user` or the manager's log)"
	case 1:
		if stderr != "" {
			return "systemd refused it: " + stderr
		}
	case 217:
		return "a unit with it failed to start with 217/USER: the user manager cannot create a user namespace"
	case 218:
		return "a unit with it failed to start with 218/CAPABILITIES"
	case 226:
		return "a unit with it failed to start with 226/NAMESPACE"
	}
	return fmt.Sprintf("a unit with it exited with status %d (see the user manager's log)", status)
}

// absent is what a missing effect means.
func absent(c Check) string {
	switch c {
	case CheckUserNS:
		return "no user namespace"
	case CheckMount:
		return "its mount table does not show it (a user manager ignores it without a user namespace)"
	case CheckReadOnlyUsr:
		return "/usr stayed writable (a user manager ignores these without a user namespace)"
	case CheckSeccomp:
		return "no seccomp filter"
	case CheckMemory, CheckCPU, CheckTasks:
		return "its cgroup has no such limit (the user manager has no such cgroup controller)"
	case CheckJournal:
		return "its output did not reach a journal (no systemd-journald socket)"
	}
	return "no effect"
}

// Notes are what install and doctor tell a person about r, one entry per
// group that is not supported and has a key in used (the keys the units
// written have; nil means every key), or no keys (the journal): "left out
// KEYS: why", "not enforced: ...", "no journal: ...", each with its fix on
// a second line; or why the probe could not run.
func (r Report) Notes(used map[string]bool) []string {
	if r.Err != nil {
		return []string{"the host probe did not run, so every directive is written: " + r.Err.Error() +
			"\n  fix: see `legion doctor`, then run `legion install` again"}
	}
	var out []string
	for _, res := range r.Failed() {
		keys := res.UsedKeys(used)
		var head string
		switch {
		case len(res.Keys) == 0:
			head = "no " + strings.TrimPrefix(res.Name, "the ")
		case len(keys) == 0:
			continue
		case res.Kept:
			head = "not enforced here: " + strings.Join(keys, ", ") + " (" + res.Name + ")"
		default:
			head = "left out " + strings.Join(keys, ", ") + " (" + res.Name + ")"
		}
		out = append(out, head+": "+res.Why+"\n  fix: "+res.Fix)
	}
	return out
}

// UsedKeys are the group's keys in used; nil used means all.
func (g Group) UsedKeys(used map[string]bool) []string {
	if used == nil {
		return g.Keys
	}
	var out []string
	for _, k := range g.Keys {
		if used[k] {
			out = append(out, k)
		}
	}
	return out
}
