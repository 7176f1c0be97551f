package ptyworker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// ErrAgentNotStartable is wrapped by Run's error when the agent could not
// be started and a restart would fail the same way (see
// ExitAgentNotStartable). The error says why, e.g. "exec claude:
// executable file not found in $PATH (PATH=/usr/bin:/bin)".
var ErrAgentNotStartable = errors.New("the agent cannot be started")

// startError is why argv could not be started in dir, for people: the
// program and, when it was looked up in PATH, the PATH searched (the
// worker's, which is the user manager's, not the user's shell's). It
// wraps ErrAgentNotStartable when the failure is one a restart repeats.
func startError(argv []string, dir string, err error) error {
	var why error
	switch {
	case errors.Is(err, exec.ErrNotFound):
		why = fmt.Errorf("exec %s: executable file not found in $PATH (PATH=%s)", argv[0], os.Getenv("PATH"))
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission),
		errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
		// exec reports a missing working directory as the program's
		// error: look at the directory to tell which.
		if _, serr := os.Stat(dir); serr != nil {
			why = fmt.Errorf("exec %s: its working directory: %w", argv[0], serr)
		} else {
			why = fmt.Errorf("exec %s in %s: %w", argv[0], dir, unwrapPath(err))
		}
	default:
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	return fmt.Errorf("%w: %w", ErrAgentNotStartable, why)
}

// unwrapPath drops exec's "fork/exec PROGRAM:" wrapping, which repeats
// the program.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		return pe.Err
	}
	return err
}
