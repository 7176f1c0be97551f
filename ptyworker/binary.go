package ptyworker

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/legion-dev/legion/internal/journal"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// RunSpecFile is the worker's main: it reads the spec at path and runs the
// session until the agent exits or the unit is stopped, logging to the
// journal with the session's fields (internal/journal; text on stderr
// outside systemd).
func RunSpecFile(ctx context.Context, path, version string) error {
	spec, err := proto.ReadSpec(path)
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
