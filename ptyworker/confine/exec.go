package confine

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// ExecFlag is the first argument of the worker program run as the
// trampoline: `legion-pty-worker --landlock-exec FLAGS -- ARGV...`, with
// the ruleset on descriptor 3.
const ExecFlag = "--landlock-exec"

// rulesetFD is the trampoline's descriptor of the ruleset (the first of
// exec.Cmd's ExtraFiles).
const rulesetFD = 3

// Command is the argv that runs argv confined by the ruleset that the
// caller passes as the trampoline's descriptor 3 (exec.Cmd.ExtraFiles[0]):
// self (the worker's own program) run with ExecFlag.
func Command(self string, flags uint32, argv []string) []string {
	return append([]string{self, ExecFlag, strconv.FormatUint(uint64(flags), 10), "--"}, argv...)
}

// Exec is the trampoline's main, for args as Command made them (os.Args
// from ExecFlag on): it sets no_new_privs and restricts every thread of
// this process with the ruleset on descriptor 3, closes it, and execs the
// agent, looked up in this environment's PATH. It returns only on error,
// which the caller prints (to the agent's terminal) before exiting 126
// (127: the program was not found), as a shell would.
func Exec(args []string) (code int, err error) {
	if len(args) < 4 || args[0] != ExecFlag || args[2] != "--" {
		return 2, fmt.Errorf("usage: %s FLAGS -- PROGRAM [ARG...], with the ruleset on descriptor 3", ExecFlag)
	}
	flags, err := strconv.ParseUint(args[1], 10, 32)
	if err != nil {
		return 2, fmt.Errorf("%s: flags %q: %w", ExecFlag, args[1], err)
	}
	argv := args[3:]
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return 127, fmt.Errorf("sandbox: %w", err)
	}
	runtime.LockOSThread() // never unlocked: the exec follows on this thread
	if err := ll.AllThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 126, fmt.Errorf("sandbox: set no_new_privs: %w", err)
	}
	if err := ll.AllThreadsLandlockRestrictSelf(rulesetFD, uint32(flags)); err != nil {
		return 126, fmt.Errorf("sandbox: landlock restrict: %w", err)
	}
	unix.Close(rulesetFD)
	err = syscall.Exec(prog, argv, os.Environ())
	return 126, fmt.Errorf("sandbox: exec %s: %w", prog, err)
}
