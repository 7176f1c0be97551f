package units

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// JobError is a start or stop job that ended with a result other than
// "done": "failed" (the unit failed to start), "timeout", "canceled"
// (replaced by another job), "dependency", "skipped".
type JobError struct {
	Op     string // "start", "stop"
	Unit   string
	Result string
}

func (e *JobError) Error() string {
	return fmt.Sprintf("%s unit %s: job result %q, not \"done\" (see `systemctl --user status %s`)", e.Op, e.Unit, e.Result, e.Unit)
}

// StartTransient starts u as a transient unit, with u.Properties(), in job
// mode "fail", and waits for the start job. A nil error means systemd
// reported the job "done": for Type=notify that is after READY=1. It says
// nothing about later: follow the unit with State or Changes.
//
// When the name is still loaded from an earlier run that failed, it resets
// the failed unit and tries once more; if the name is still loaded after
// that (the unit is running or stopping), the error wraps ErrUnitExists. A
// job result other than "done" is a *JobError. The wait ends at ctx's
// deadline, or after DefaultJobTimeout (then the error wraps ErrJobTimeout).
func (m *Manager) StartTransient(ctx context.Context, u Unit) error {
	props, err := u.Properties()
	if err != nil {
		return fmt.Errorf("start transient unit: %w", err)
	}
	err = m.startTransient(ctx, u.Name, props)
	if !errors.Is(err, ErrUnitExists) {
		return err
	}
	if err := m.ResetFailed(ctx, u.Name); err != nil && !errors.Is(err, ErrNoSuchUnit) {
		return fmt.Errorf("start unit %s: name still loaded, and %w", u.Name, err)
	}
	return m.startTransient(ctx, u.Name, props)
}

func (m *Manager) startTransient(ctx context.Context, name string, props []sddbus.Property) error {
	// Buffered: go-systemd sends the result under a lock, and an unread
	// unbuffered channel would block the connection (go-systemd #429).
	ch := make(chan string, 1)
	err := m.do(ctx, func(c *conns) error {
		_, err := c.sd.StartTransientUnitContext(ctx, name, "fail", props, ch)
		return err
	})
	if err != nil {
		return unitError("start", name, err)
	}
	return waitJob(ctx, "start", name, ch)
}

// waitJob waits for a job's result on ch.
func waitJob(ctx context.Context, op, name string, ch <-chan string) error {
	var timeout <-chan time.Time // nil: ctx's deadline decides
	if _, ok := ctx.Deadline(); !ok {
		timer := time.NewTimer(DefaultJobTimeout)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case result := <-ch:
		if result == "done" {
			return nil
		}
		return &JobError{Op: op, Unit: name, Result: result}
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%s unit %s: %w: %w", op, name, ErrJobTimeout, ctx.Err())
		}
		return fmt.Errorf("%s unit %s: %w", op, name, ctx.Err())
	case <-timeout:
		return fmt.Errorf("%s unit %s: %w (waited %v)", op, name, ErrJobTimeout, DefaultJobTimeout)
	}
}

// Start starts a unit from its unit file (job mode "replace") and waits
// for the start job like StartTransient. The error wraps ErrNoSuchUnit when
// there is no such unit file.
func (m *Manager) Start(ctx context.Context, name string) error {
	ch := make(chan string, 1)
	err := m.do(ctx, func(c *conns) error {
		_, err := c.sd.StartUnitContext(ctx, name, "replace", ch)
		return err
	})
	if err != nil {
		return unitError("start", name, err)
	}
	return waitJob(ctx, "start", name, ch)
}

// Stop stops the unit (job mode "replace") and waits for the stop job like
// StartTransient waits for a start. Stopping a unit that is not loaded is
// not an error: it is already stopped.
func (m *Manager) Stop(ctx context.Context, name string) error {
	ch := make(chan string, 1)
	err := m.do(ctx, func(c *conns) error {
		_, err := c.sd.StopUnitContext(ctx, name, "replace", ch)
		return err
	})
	if dbusErrorName(err) == errNameNoSuch {
		return nil
	}
	if err != nil {
		return unitError("stop", name, err)
	}
	return waitJob(ctx, "stop", name, ch)
}

// Kill sends sig to every process of the unit. systemd does not stop the
// unit for it: what follows depends on how the processes react and on the
// unit's Restart=. The error wraps ErrNoSuchUnit when the unit is not loaded.
func (m *Manager) Kill(ctx context.Context, name string, sig syscall.Signal) error {
	err := m.do(ctx, func(c *conns) error {
		return c.sd.KillUnitWithTarget(ctx, name, sddbus.All, int32(sig))
	})
	if err != nil {
		return unitError("kill", name, err)
	}
	return nil
}

// ResetFailed resets the unit's failed state and its start-limit counter;
// a failed transient unit is then unloaded. The error wraps ErrNoSuchUnit
// when the unit is not loaded.
func (m *Manager) ResetFailed(ctx context.Context, name string) error {
	err := m.do(ctx, func(c *conns) error { return c.sd.ResetFailedUnitContext(ctx, name) })
	if err != nil {
		return unitError("reset failed", name, err)
	}
	return nil
}

// Reload is `systemctl --user daemon-reload`: the manager re-reads unit
// files. It returns when the reload is done. Running transient units
// survive it.
func (m *Manager) Reload(ctx context.Context) error {
	err := m.do(ctx, func(c *conns) error { return c.sd.ReloadContext(ctx) })
	if err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	return nil
}

// Enable enables unit files (names, or absolute paths) in the user's
// persistent configuration, replacing conflicting links: it makes the links
// their [Install] sections ask for, like `systemctl --user enable`. It does
// not reload: call Reload afterwards so the manager sees the new
// dependencies. No names is a no-op.
func (m *Manager) Enable(ctx context.Context, files ...string) error {
	if len(files) == 0 {
		return nil
	}
	err := m.do(ctx, func(c *conns) error {
		_, _, err := c.sd.EnableUnitFilesContext(ctx, files, false, true)
		return err
	})
	if err != nil {
		return fmt.Errorf("enable %s: %w", strings.Join(files, ", "), err)
	}
	return nil
}

// Disable removes the links of the named units from the user's persistent
// configuration, like `systemctl --user disable`. It does not reload
// either. No names is a no-op.
func (m *Manager) Disable(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	err := m.do(ctx, func(c *conns) error {
		_, err := c.sd.DisableUnitFilesContext(ctx, names, false)
		return err
	})
	if err != nil {
		return fmt.Errorf("disable %s: %w", strings.Join(names, ", "), err)
	}
	return nil
}

// List returns the loaded units whose names match any of the shell-style
// patterns ("legion-*", "legion@*.service"), or all loaded units without
// patterns, sorted by name. Only Name, LoadState, ActiveState and SubState
// are filled in; ask State for the rest. Units that are not loaded
// (garbage-collected, or only on disk) are not listed.
func (m *Manager) List(ctx context.Context, patterns ...string) ([]State, error) {
	var units []sddbus.UnitStatus
	err := m.do(ctx, func(c *conns) error {
		var err error
		units, err = c.sd.ListUnitsByPatternsContext(ctx, nil, patterns)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list units %s: %w", strings.Join(patterns, " "), err)
	}
	states := make([]State, len(units))
	for i, u := range units {
		states[i] = State{Name: u.Name, LoadState: u.LoadState, ActiveState: u.ActiveState, SubState: u.SubState}
	}
	slices.SortFunc(states, func(a, b State) int { return strings.Compare(a.Name, b.Name) })
	return states, nil
}

// Job returns the type of the job pending on unit name ("start", "stop",
// "restart", ...), or "" when there is none. A service that gets SIGTERM
// asks this to tell `systemctl stop` (job "stop") from a restart.
func (m *Manager) Job(ctx context.Context, name string) (string, error) {
	var jobs []sddbus.JobStatus
	err := m.do(ctx, func(c *conns) error {
		var err error
		jobs, err = c.sd.ListJobsContext(ctx)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("list jobs of %s: %w", name, err)
	}
	for _, j := range jobs {
		if j.Unit == name {
			return j.JobType, nil
		}
	}
	return "", nil
}
