package proto

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BinaryName is the executable worker units run: a program of its own
// (cmd/legion-pty-worker) rather than a subcommand of the legion CLI. Every
// session has one resident worker; the CLI links cobra, HTTP and GraphQL
// clients and the helper, whose startup alone maps pages a worker never
// needs (an idle worker of the CLI binary measured 9.2 MiB RSS built
// static, 11 MiB with cgo; this one 5.2 MiB, see BenchmarkIdleWorkerRSS).
const BinaryName = "legion-pty-worker"

// LibexecDir is where an installed Legion keeps BinaryName (make install,
// the packages); set at build time with
// -ldflags "-X github.com/legion-dev/legion/ptyworker/proto.LibexecDir=DIR".
var LibexecDir string

// ErrNoBinary means the worker executable is not installed.
var ErrNoBinary = errors.New(BinaryName + " not found")

// FindBinary returns the worker executable for units started by this
// process: see FindBinaryFor.
func FindBinary() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the legion executable: %w", err)
	}
	return FindBinaryFor(exe)
}

// FindBinaryFor returns the worker executable that the legion program at
// legion uses: see FindProgram.
func FindBinaryFor(legion string) (string, error) {
	return findProgram(legion, BinaryName, ErrNoBinary)
}

// FindProgram returns Legion's program name (legion-pty-worker,
// legion-kube) that the legion program at legion uses: name beside it (a
// build tree, go install), else in LibexecDir.
func FindProgram(legion, name string) (string, error) {
	return findProgram(legion, name, errors.New(name+" not found"))
}

func findProgram(legion, name string, notFound error) (string, error) {
	dirs := []string{filepath.Dir(legion)}
	if LibexecDir != "" {
		dirs = append(dirs, LibexecDir)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w in %s: install it with `make install` (or `make build` for bin/), or `go install github.com/legion-dev/legion/cmd/%s`", notFound, strings.Join(dirs, " or "), name)
}

// ExitAgentNotStartable is the worker's exit status when the agent cannot
// be started at all and trying again cannot help: its program is not
// found or not executable, or its working directory is missing. The
// worker unit lists it in RestartPreventExitStatus=, so systemd marks the
// unit failed at once instead of restarting it until its start limit.
// 78 is EX_CONFIG of sysexits.h: a configuration error.
const ExitAgentNotStartable = 78

// ExitSpecUnreadable is the worker's exit status when its spec file cannot
// be read or is not a valid spec (garbled, truncated, missing): nothing
// in it can be trusted, so the worker cannot even say which session it
// is. It moves a corrupt spec aside (QuarantineSpec) and exits with this
// status, which the worker unit lists in RestartPreventExitStatus= beside
// ExitAgentNotStartable: a restart would read the same file. The helper
// reads the failed unit's ExecMainStatus= and takes the session as ended,
// not failed (api.StateExited, ExitReasonSpecUnreadable), so the
// controller dispatches the phase again and the helper starts a fresh
// worker on a new spec, resuming the same agent conversation. 65 is
// EX_DATAERR of sysexits.h: the input data was incorrect.
const ExitSpecUnreadable = 65

// ExitReasonSpecUnreadable begins the exit reason the helper reports for
// a worker that exited with ExitSpecUnreadable.
const ExitReasonSpecUnreadable = "spec unreadable"

// StartFailedPrefix begins the ExitInfo.Reason of a run whose agent could
// not be started; the rest is the cause.
const StartFailedPrefix = "start failed: "
