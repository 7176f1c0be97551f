package ptyworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/legion-dev/legion/internal/journal"
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
// -ldflags "-X github.com/legion-dev/legion/ptyworker.LibexecDir=DIR".
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
// legion uses: BinaryName beside it (a build tree, go install), else in
// LibexecDir.
func FindBinaryFor(legion string) (string, error) {
	dirs := []string{filepath.Dir(legion)}
	if LibexecDir != "" {
		dirs = append(dirs, LibexecDir)
	}
	for _, d := range dirs {
		p := filepath.Join(d, BinaryName)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w in %s: install it with `make install` (or `make build` for bin/), or `go install github.com/legion-dev/legion/cmd/%s`", ErrNoBinary, strings.Join(dirs, " or "), BinaryName)
}

// RunSpecFile is the worker's main: it reads the spec at path and runs the
// session until the agent exits or the unit is stopped, logging to the
// journal with the session's fields (internal/journal; text on stderr
// outside systemd).
func RunSpecFile(ctx context.Context, path, version string) error {
	spec, err := ReadSpec(path)
	if err != nil {
		return err
	}
	// SIGTERM is systemd stopping the unit; its watchdog action sends
	// SIGABRT: either ends the agent cleanly (recording the reason) instead
	// of killing the worker (with a Go stack dump, for SIGABRT).
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt, syscall.SIGABRT, syscall.SIGHUP)
	defer stop()
	log := journal.NewLogger(journal.IdentWorker, slog.LevelInfo)
	return Run(ctx, spec, Options{Logger: log, Version: version})
}
