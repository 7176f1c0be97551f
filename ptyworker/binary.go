package ptyworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/legion-dev/legion/internal/journal"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// ErrSpecUnreadable is wrapped by RunSpecFile's error when the spec file
// could not be read or is not a valid spec: the worker exits with
// proto.ExitSpecUnreadable, which systemd does not restart.
var ErrSpecUnreadable = errors.New("the session's spec is unreadable")

// RunSpecFile is the worker's main: it reads the spec at path and runs the
// session until the agent exits or the unit is stopped, logging to the
// journal with the session's fields (internal/journal; text on stderr
// outside systemd). A spec it cannot read is ErrSpecUnreadable; a corrupt
// one is moved aside first (proto.QuarantineSpec), and the error names
// where.
func RunSpecFile(ctx context.Context, path, version string) error {
	spec, err := proto.ReadVolumeSpec(path)
	if errors.Is(err, proto.ErrCorruptSpec) {
		q, qerr := proto.QuarantineSpec(path)
		if qerr != nil {
			return fmt.Errorf("%w: %w", ErrSpecUnreadable, errors.Join(err, qerr))
		}
		return fmt.Errorf("%w: %w; moved aside to %s", ErrSpecUnreadable, err, q)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSpecUnreadable, err)
	}
	// SIGTERM is systemd stopping the unit; its watchdog action sends
	// SIGABRT: either ends the agent cleanly (recording the reason) instead
	// of killing the worker (with a Go stack dump, for SIGABRT).
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt, syscall.SIGABRT, syscall.SIGHUP)
	defer stop()
	log := journal.NewLogger(journal.IdentWorker, slog.LevelInfo)
	return Run(ctx, spec, Options{Logger: log, Version: version})
}
