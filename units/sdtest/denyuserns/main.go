// Command denyuserns runs a program with user namespace creation denied to
// it and to everything it starts: a seccomp filter makes unshare(2) and
// clone(2) with CLONE_NEWUSER fail with EPERM, and clone3(2) (whose flags
// a filter cannot read) fail with ENOSYS, on which libc and systemd fall
// back to clone. Filters are inherited and cannot be removed, so a user
// manager started under it sees a host that refuses it user namespaces, as
// Ubuntu 24.04's kernel.apparmor_restrict_unprivileged_userns=1 and
// user.max_user_namespaces=0 do.
//
// Usage: denyuserns PROGRAM [ARG...]
//
// It is a test tool (units/sdtest builds it for sdtest.Options
// DenyUserNamespaces), never shipped.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // the low 32 bits on a little-endian machine
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: denyuserns PROGRAM [ARG...]")
		os.Exit(2)
	}
	prog, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "denyuserns: %v\n", err)
		os.Exit(127)
	}
	if err := deny(); err != nil {
		fmt.Fprintf(os.Stderr, "denyuserns: %v\n", err)
		os.Exit(1)
	}
	err = syscall.Exec(prog, os.Args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "denyuserns: exec %s: %v\n", prog, err)
	os.Exit(126)
}

// deny installs the filter on every thread of this process (TSYNC), so the
// exec that follows, from whichever thread, keeps it.
func deny() error {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return fmt.Errorf("no filter for %s", runtime.GOARCH)
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	eperm := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	enosys := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	prog := []unix.SockFilter{
		/* 0 */ {Code: ld, K: offArch},
		/* 1 */ {Code: jeq, K: arch, Jt: 1, Jf: 0},
		/* 2 */ {Code: ret, K: allow}, // another ABI: leave it alone
		/* 3 */ {Code: ld, K: offNr},
		/* 4 */ {Code: jeq, K: unix.SYS_CLONE3, Jt: 0, Jf: 1},
		/* 5 */ {Code: ret, K: enosys},
		/* 6 */ {Code: jeq, K: unix.SYS_UNSHARE, Jt: 2, Jf: 0},
		/* 7 */ {Code: jeq, K: unix.SYS_CLONE, Jt: 1, Jf: 0},
		/* 8 */ {Code: ret, K: allow},
		/* 9 */ {Code: ld, K: offArg0},
		/* 10 */ {Code: jset, K: unix.CLONE_NEWUSER, Jt: 0, Jf: 1},
		/* 11 */ {Code: ret, K: eperm},
		/* 12 */ {Code: ret, K: allow},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// No new privileges is required of a process without CAP_SYS_ADMIN;
	// root keeps setuid programs working without it.
	if os.Geteuid() != 0 {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no new privileges: %w", err)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("install the seccomp filter: %w", errno)
	}
	return nil
}
