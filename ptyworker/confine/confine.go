// Package confine confines an agent to the files of its sandbox
// (api.Sandbox) with Landlock, which needs no namespace, so that it holds
// where a user manager may not use user namespaces (Ubuntu 24.04's
// AppArmor). The worker builds the Landlock ruleset ([Ruleset]) and starts
// its own program again as a trampoline ([Command], [Exec]) that restricts
// itself, every thread, and execs the agent: the agent and all it starts
// are confined, the worker never is.
//
// It owns the translation of a sandbox into Landlock rules and the probe
// of the kernel's support ([Probe]). It never decides what a sandbox holds
// (package agent does, from the team's policy) and never restricts the
// process that calls Ruleset.
package confine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/legion-dev/legion/activation/api"
)

// MinABI is the Landlock ABI a sandbox needs: 2 for renames and links
// between directories (git moves its objects into place), 3 for truncate.
// Newer rights are used where the kernel has them: ioctl on devices (5),
// signals and abstract sockets scoped to the agent's own processes (6),
// connections to pathname unix sockets (9).
const MinABI = 3

// Status says whether the sandbox holds on this machine, and why.
type Status struct {
	ABI   int    // the kernel's Landlock ABI; 0 without Landlock
	Holds bool   // ABI >= MinABI
	Why   string // one line a person can act on
}

// ProbeFlag is the only argument of this process's program run as a
// probe (ProbeMain): Probe's child under a seccomp filter.
const ProbeFlag = "--landlock-probe"

// Probe asks the kernel for its Landlock ABI. A process under a seccomp
// filter (Legion's controller: SystemCallFilter=, whose @system-service
// in systemd 252 leaves out Landlock's calls and kills the caller; a
// container's, which may refuse them) asks through a child, its own
// program run with ProbeFlag, which the filter kills or answers as it
// would the process itself; only when the child is killed (a unit written
// before its filter allowed the probe) is the ABI inferred from the
// kernel's release and its list of security modules. The worker, which
// asks the kernel itself, has the last word.
func Probe() Status {
	if seccompFiltered() {
		return probeChild()
	}
	return probeSelf()
}

// probeSelf is Probe by the system call.
func probeSelf() Status {
	v, err := ll.LandlockGetABIVersion()
	switch {
	case err != nil:
		return Status{Why: fmt.Sprintf("Landlock is not available (%v): the kernel lacks it or it is not enabled at boot (add landlock to the lsm= kernel parameter)", err)}
	case v < MinABI:
		return Status{ABI: v, Why: fmt.Sprintf("the kernel's Landlock ABI is %d; the sandbox needs %d (Linux 6.2 or newer)", v, MinABI)}
	}
	return Status{ABI: v, Holds: true, Why: fmt.Sprintf("Landlock ABI %d (the sandbox needs %d)", v, MinABI)}
}

// ProbeMain is the probe's main: it prints Probe's answer as JSON and
// returns the exit status.
func ProbeMain(w io.Writer) int {
	if err := json.NewEncoder(w).Encode(probeSelf()); err != nil {
		return 1
	}
	return 0
}

// probeChild is Probe through a child (see Probe).
func probeChild() Status {
	self, err := os.Executable()
	if err != nil {
		return inferred()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, self, ProbeFlag).Output()
	var st Status
	if err != nil || json.Unmarshal(out, &st) != nil {
		return inferred() // killed by the filter (SIGSYS), or an older program
	}
	return st
}

// seccompFiltered says whether this process runs under a seccomp filter
// (/proc/self/status "Seccomp: 2").
func seccompFiltered() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v) == "2"
		}
	}
	return false
}

// abiByRelease is the Landlock ABI of each kernel release that raised it.
var abiByRelease = []struct{ major, minor, abi int }{
	{6, 15, 7}, {6, 12, 6}, {6, 10, 5}, {6, 7, 4}, {6, 2, 3}, {5, 19, 2}, {5, 13, 1},
}

// inferred is Probe's answer without Landlock's system calls: the ABI of
// the kernel's release (uname), unless /sys/kernel/security/lsm, where
// readable, does not list landlock.
func inferred() Status {
	if b, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil && !slices.Contains(strings.Split(strings.TrimSpace(string(b)), ","), "landlock") {
		return Status{Why: fmt.Sprintf("Landlock is not enabled at boot (security modules: %s; add landlock to the lsm= kernel parameter)", strings.TrimSpace(string(b)))}
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return Status{Why: fmt.Sprintf("cannot tell the kernel's Landlock ABI: uname: %v", err)}
	}
	release := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	fmt.Sscanf(release, "%d.%d", &major, &minor)
	v := 0
	for _, r := range abiByRelease {
		if major > r.major || major == r.major && minor >= r.minor {
			v = r.abi
			break
		}
	}
	if v < MinABI {
		return Status{ABI: v, Why: fmt.Sprintf("kernel %s has Landlock ABI %d; the sandbox needs %d (Linux 6.2 or newer)", release, v, MinABI)}
	}
	return Status{ABI: v, Holds: true, Why: fmt.Sprintf("Landlock ABI %d, inferred from kernel %s (the sandbox needs %d)", v, release, MinABI)}
}

// within says whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// rights of the rules, on top of go-landlock's RODirs and RWDirs.
const (
	// Read: RODirs (read files and directories, execute).
	// Write: RWDirs, plus moving and linking files between directories
	// (refer) and ioctl on devices (the terminal). Not connecting to unix
	// sockets made outside the sandbox (ABI 9), but those of Connect: a
	// server the agent starts itself stays reachable to it.
	dirWrite = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir |
		ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
		ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSTruncate | ll.AccessFSRefer | ll.AccessFSIoctlDev
	fileWrite = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate |
		ll.AccessFSIoctlDev
	fileRead = ll.AccessFSExecute | ll.AccessFSReadFile
	dirRead  = fileRead | ll.AccessFSReadDir
)

// config is what a sandbox restricts: every filesystem right of ABI 9
// (connect to pathname unix sockets included) and the scopes of ABI 6
// (signals and abstract unix sockets reach only the agent's own
// processes), each only where the kernel has it. Not the network: an
// agent reaches its model's API.
var config = landlock.Config{HandledAccessFS: dirWrite | ll.AccessFSResolveUnix, Scoped: ll.ScopeAbstractUnixSocket | ll.ScopeSignal}.BestEffort()

// Ruleset creates the Landlock ruleset of s, to be passed to the
// trampoline (see Command): the calling process stays unrestricted.
// Directories of s.MakeDirs that are missing are created first (0700).
// Paths that do not exist are skipped. A path to hide below a readable
// tree is left out by walking down to it: each of its siblings, and each
// sibling of its ancestors up to the tree, is granted instead of the
// tree (a file or directory made there later is not readable; symlinks
// are not followed: what they point to is granted or not by its own
// path). The caller closes fd.
func Ruleset(s *api.Sandbox) (fd int, flags uint32, err error) {
	if st := Probe(); !st.Holds {
		return -1, 0, fmt.Errorf("sandbox does not hold: %s", st.Why)
	}
	if err := s.Check(); err != nil {
		return -1, 0, err
	}
	for _, d := range s.MakeDirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return -1, 0, fmt.Errorf("sandbox: create %s: %w", d, err)
		}
	}
	rules, err := rulesFor(s)
	if err != nil {
		return -1, 0, err
	}
	fd, flags, err = config.NewRulesetFD(rules...)
	if err != nil {
		return -1, 0, fmt.Errorf("sandbox: landlock ruleset: %w", err)
	}
	if fd < 0 {
		return -1, 0, errors.New("sandbox: Landlock would restrict nothing on this kernel")
	}
	return fd, flags, nil
}

// Devices are what every agent writes besides its sandbox: the pseudo
// devices, its terminal (a reopened /dev/tty, new PTYs of its own) and
// POSIX shared memory.
var Devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm"}

// rulesFor is the rules of s, each path once with the rights of the
// widest list that names it.
func rulesFor(s *api.Sandbox) ([]landlock.Rule, error) {
	var rules []landlock.Rule
	add := func(p string, dirRights, fileRights landlock.AccessFSSet) error {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		r := dirRights
		if !fi.IsDir() {
			r = fileRights
		}
		rules = append(rules, landlock.PathAccess(r, p).IgnoreIfMissing())
		return nil
	}
	for _, p := range slices.Concat(Devices, s.Write) {
		if err := add(p, dirWrite, fileWrite); err != nil {
			return nil, err
		}
	}
	for _, p := range s.Connect {
		if err := add(p, ll.AccessFSResolveUnix, ll.AccessFSResolveUnix); err != nil {
			return nil, err
		}
	}
	var reads, lists []string
	for _, root := range s.Read {
		rs, ls, err := readable(root, s.Hide)
		if err != nil {
			return nil, err
		}
		reads, lists = append(reads, rs...), append(lists, ls...)
	}
	for _, p := range reads {
		if err := add(p, dirRead, fileRead); err != nil {
			return nil, err
		}
	}
	for _, p := range lists {
		if err := add(p, ll.AccessFSReadDir, 0); err != nil {
			return nil, err
		}
	}
	return rules, nil
}

// readable is the paths to grant read on so that everything below root
// is readable but hide and what is below it, and the directories walked
// through to reach what it hides, which may be listed: Landlock grants a
// directory's right to everything below it, so a hidden directory's
// entries can be listed (their names, not their content), as programs
// that list the home (a shell's completion, Claude Code) need.
func readable(root string, hide []string) (reads, lists []string, err error) {
	var below bool
	for _, h := range hide {
		if within(root, h) {
			return nil, nil, nil // root itself is hidden
		}
		if within(h, root) {
			below = true
		}
	}
	if !below {
		return []string{root}, nil, nil
	}
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: walk down to what it hides: %w", err)
	}
	lists = []string{root}
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		rs, ls, err := readable(filepath.Join(root, e.Name()), hide)
		if err != nil {
			return nil, nil, err
		}
		reads, lists = append(reads, rs...), append(lists, ls...)
	}
	return reads, lists, nil
}
