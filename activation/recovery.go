package activation

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/privdir"
	"github.com/legion-dev/legion/ptyworker"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/unitname"
)

// Recovery joins three sources at every start of the helper:
//
//   - systemd's view: the loaded units named legion-*.service, with their
//     ActiveState, SubState and MainPID;
//   - the registry files under <state>/registry, one per session, written
//     by the workers (daemon instance id, token, socket, worker lease);
//   - hello and info on each worker's socket.
//
// The rules, per registry entry:
//
//   - corrupt (bad JSON, other version)      → quarantined (renamed *.corrupt-<time>)
//   - another daemon instance's entry        → quarantined (moved to registry/quarantine),
//     its worker left alone; reclaimed (moved to registry/pruned) only when
//     its worker lease is provably stale (that PID is gone or has another
//     start time) and its unit is not running
//   - its unit is gone (or inactive) and the worker lease is stale
//     → pruned (moved to registry/pruned; the transcript stays), but for
//     a `legion spawn` session a reboot cut (lost.go) → kept in place,
//     listed as lost
//   - its unit failed (systemd gave up)      → adopted, state failed
//   - its unit waits out a restart cooldown  → adopted, state starting
//   - its unit runs                          → hello + info: adopted; refused
//     (token/owner) or another rpc version → quarantined, never killed;
//     no answer → retried with backoff RecoveryAttempts times, then
//     quarantined
//
// A running legion-*.service without a registry entry is adopted when a
// spec of this helper names it (the worker has not written its entry
// yet), else reported as quarantined; nothing is moved or stopped. Errors
// reading a file or asking systemd about a unit count as failed. Recovery
// never stops, kills or removes a worker.

// outcome is what recovery did with one entry.
type outcome int

const (
	adopted outcome = iota
	pruned
	lost // kept, listed as lost: a reboot cut it (lost.go)
	quarantined
	failed
)

type entryResult struct {
	kind outcome
	s    *session        // adopted
	q    api.Quarantined // quarantined
	unit string          // the unit the entry is about, when known
}

// recover runs recovery and fills the session table. It fails only when
// systemd cannot be asked at all (then nothing can be classified safely).
func (h *Helper) recover(ctx context.Context) (api.RecoveryCounts, error) {
	regDir := filepath.Join(h.opts.StateDir, registryDir)
	if err := privdir.Ensure(regDir); err != nil {
		return api.RecoveryCounts{}, err
	}
	unitStates, err := h.unitStates(ctx)
	if err != nil {
		return api.RecoveryCounts{}, fmt.Errorf("recovery: list legion-*.service units: %w", err)
	}
	paths, err := readRegistryDir(regDir)
	if err != nil {
		return api.RecoveryCounts{}, fmt.Errorf("recovery: %w", err)
	}

	var (
		mu      sync.Mutex
		counts  api.RecoveryCounts
		quar    []api.Quarantined
		covered = map[string]bool{}
	)
	record := func(r entryResult) {
		mu.Lock()
		defer mu.Unlock()
		if r.unit != "" {
			covered[r.unit] = true
		}
		switch r.kind {
		case adopted:
			counts.Recovered++
			h.sessions.put(r.s)
		case pruned:
			counts.Pruned++
		case lost:
			counts.Lost++
			h.sessions.put(r.s)
		case quarantined:
			counts.Quarantined++
			quar = append(quar, r.q)
		case failed:
			counts.Failed++
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(refreshParallel)
	for _, p := range paths {
		g.Go(func() error {
			record(h.recoverEntry(gctx, p, unitStates))
			return nil
		})
	}
	g.Wait()
	if ctx.Err() != nil {
		return counts, ctx.Err()
	}

	// Units nobody's registry entry named.
	var orphans []units.State
	for name, st := range unitStates {
		if !covered[name] && st.ActiveState != units.StateInactive {
			orphans = append(orphans, st)
		}
	}
	if len(orphans) > 0 {
		// A fresh group: the first one's context ended with its Wait.
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(refreshParallel)
		specs := h.specsByUnit()
		for _, st := range orphans {
			g.Go(func() error {
				record(h.recoverOrphan(gctx, st.Name, specs[st.Name]))
				return nil
			})
		}
		g.Wait()
	}
	h.sessions.mu.Lock()
	h.sessions.counts = counts
	h.sessions.quarantined = quar
	h.sessions.mu.Unlock()
	return counts, ctx.Err()
}

// recoverEntry classifies one registry file; states is systemd's view
// from the start of recovery (re-read only when a worker must be retried).
func (h *Helper) recoverEntry(ctx context.Context, path string, states map[string]units.State) entryResult {
	log := h.log.With("registry", path)
	r, err := ptyworker.ReadRegistry(path)
	if err != nil {
		if !errors.Is(err, ptyworker.ErrCorruptRegistry) {
			log.Error("recovery: cannot read registry entry", "err", err)
			return entryResult{kind: failed}
		}
		dst, qerr := ptyworker.QuarantineRegistry(path)
		if qerr != nil {
			log.Error("recovery: cannot quarantine corrupt registry entry", "err", qerr)
			return entryResult{kind: failed}
		}
		log.Warn("recovery: quarantined a corrupt registry entry", "moved_to", dst, "err", err)
		return entryResult{kind: quarantined, q: api.Quarantined{Name: filepath.Base(path), Path: dst, Reason: "corrupt registry entry: " + err.Error()}}
	}
	log = sessionLogger(log, r)
	if r.Unit == "" || !unitname.ValidName(r.Unit, unitname.NamePlain) {
		return h.quarantine(log, path, r, "registry entry names no valid unit")
	}
	us := unitState(states, r.Unit)
	res := entryResult{unit: r.Unit}
	leaseAlive := r.Owner.Alive()

	if r.DaemonInstanceID != h.daemonID {
		if !leaseAlive && !unitRuns(us) && !us.AutoRestart() {
			// Reclaim: the entry's worker is provably gone, so moving the
			// entry aside harms no process.
			res.kind = h.prune(log, path, "stale entry of another daemon instance "+r.DaemonInstanceID)
			return res
		}
		res = h.quarantine(log, path, r, fmt.Sprintf("owned by daemon instance %s, not this helper's %s: left running, not adopted", r.DaemonInstanceID, h.daemonID))
		res.unit = r.Unit
		return res
	}

	for attempt := 1; ; attempt++ {
		switch {
		case us.Gone():
			if !leaseAlive && cutByReboot(r, h.bootID) {
				if res, ok := h.markLost(log, r, path); ok {
					return res
				}
			}
			if !leaseAlive {
				res.kind = h.prune(log, path, "worker gone and unit "+unitGoneText(us))
				return res
			}
			// A live worker without its unit (run by hand): adopt it only
			// if it answers as ours.
		case us.Failed():
			log.Info("recovery: adopted a failed session", "run", r.Run)
			return h.adopt(r, path, us, nil, nil, r.Unit)
		case us.AutoRestart():
			log.Info("recovery: adopted a session waiting to restart")
			return h.adopt(r, path, us, nil, nil, r.Unit)
		}

		wc, hr, err := dialWorker(ctx, r.SocketPath, h.daemonID, r.Token)
		if err == nil {
			ictx, cancel := context.WithTimeout(ctx, workerCallTimeout)
			in, ierr := wc.Info(ictx)
			cancel()
			switch {
			case ierr == nil && in.SessionID == r.SessionID && hr.SessionID == r.SessionID:
				log.Debug("recovery: adopted", "worker_pid", hr.WorkerPID)
				s := h.adopt(r, path, us, wc, in, r.Unit)
				s.s.wcPID = hr.WorkerPID
				return s
			case ierr == nil:
				wc.Close()
				res = h.quarantine(log, path, r, fmt.Sprintf("socket %s hosts session %s, not %s", r.SocketPath, in.SessionID, r.SessionID))
				res.unit = r.Unit
				return res
			}
			wc.Close()
			err = ierr
		}
		switch {
		case ptyworker.IsCode(err, ptyworker.CodeUnauthorized), ptyworker.IsCode(err, ptyworker.CodeSessionNotFound):
			res = h.quarantine(log, path, r, "the worker refused this helper's hello: "+err.Error())
			res.unit = r.Unit
			return res
		case ptyworker.IsCode(err, ptyworker.CodeUnsupportedVersion):
			res = h.quarantine(log, path, r, "rpc version mismatch: "+err.Error())
			res.unit = r.Unit
			return res
		}
		if ctx.Err() != nil {
			return entryResult{kind: failed, unit: r.Unit} // shutting down: move nothing
		}
		if attempt >= h.opts.RecoveryAttempts {
			res = h.quarantine(log, path, r, fmt.Sprintf("worker unreachable after %d attempts: %v", attempt, err))
			res.unit = r.Unit
			return res
		}
		log.Debug("recovery: worker did not answer; retrying", "attempt", attempt, "err", err)
		if sleepCtx(ctx, h.opts.RecoveryBackoff<<(attempt-1)) {
			return entryResult{kind: failed, unit: r.Unit}
		}
		// The unit may have moved on (restart, failure): ask again.
		if st, err := h.unitStates(ctx); err == nil {
			us = unitState(st, r.Unit)
		}
		if nr, rerr := ptyworker.ReadRegistry(path); rerr == nil && nr.SessionID == r.SessionID && nr.DaemonInstanceID == r.DaemonInstanceID {
			r = nr
			leaseAlive = r.Owner.Alive()
		}
	}
}

// recoverOrphan handles a running unit that no registry entry names.
func (h *Helper) recoverOrphan(ctx context.Context, unit string, spec *ptyworker.Spec) entryResult {
	log := h.log.With("unit", unit)
	if spec == nil || spec.DaemonInstanceID != h.daemonID {
		log.Warn("recovery: a legion-*.service unit has no registry entry or spec of this helper; left alone")
		return entryResult{kind: quarantined, unit: unit, q: api.Quarantined{Name: unit, Path: "",
			Reason: "unit has no registry entry or spec of this helper: left running, not adopted"}}
	}
	r := &ptyworker.Registry{
		Version: ptyworker.RegistryVersion, SessionID: spec.SessionID, AgentSession: spec.AgentSession, Name: spec.Name, Team: spec.Team,
		Issue: spec.Issue, Mode: spec.Mode, Role: spec.Role, Unit: spec.Unit, DaemonInstanceID: spec.DaemonInstanceID,
		Token: spec.Token, SocketPath: spec.SocketPath(), TranscriptPath: spec.TranscriptPath(),
	}
	path := spec.RegistryPath()
	for attempt := 1; ; attempt++ {
		states, err := h.unitStates(ctx)
		if err != nil {
			log.Error("recovery: cannot list units", "err", err)
			return entryResult{kind: failed, unit: unit}
		}
		us := unitState(states, unit)
		if us.Gone() {
			return entryResult{kind: pruned, unit: unit}
		}
		if us.Failed() || us.AutoRestart() {
			return h.adopt(r, path, us, nil, nil, unit)
		}
		wc, hr, err := dialWorker(ctx, r.SocketPath, h.daemonID, r.Token)
		if err == nil {
			ictx, cancel := context.WithTimeout(ctx, workerCallTimeout)
			in, ierr := wc.Info(ictx)
			cancel()
			if ierr == nil {
				res := h.adopt(r, path, us, wc, in, unit)
				res.s.wcPID = hr.WorkerPID
				return res
			}
			wc.Close()
			err = ierr
		}
		if ctx.Err() != nil {
			return entryResult{kind: failed, unit: unit}
		}
		if attempt >= h.opts.RecoveryAttempts {
			log.Warn("recovery: worker without a registry entry is unreachable; left alone", "err", err)
			return entryResult{kind: quarantined, unit: unit, q: api.Quarantined{Name: spec.Name, Reason: fmt.Sprintf("unit %s without a registry entry, unreachable after %d attempts: %v", unit, attempt, err)}}
		}
		sleepCtx(ctx, h.opts.RecoveryBackoff<<(attempt-1))
	}
}

func (h *Helper) adopt(r *ptyworker.Registry, path string, us units.State, wc *ptyworker.Client, in *ptyworker.Info, unit string) entryResult {
	s := newSession(h, r, path)
	s.us, s.info, s.wc, s.seen = us, in, wc, time.Now()
	return entryResult{kind: adopted, s: s, unit: unit}
}

// prune moves an entry to registry/pruned (its session ended for good;
// status and logs still find it there) and removes its spec.
func (h *Helper) prune(log interface {
	Info(string, ...any)
	Error(string, ...any)
}, path, why string) outcome {
	dst, err := moveAside(path, filepath.Join(h.opts.StateDir, prunedDir))
	if err != nil {
		log.Error("recovery: cannot prune registry entry", "err", err)
		return failed
	}
	h.removeSpecFor(filepath.Base(path))
	log.Info("recovery: pruned", "why", why, "moved_to", dst)
	return pruned
}

func (h *Helper) quarantine(log interface {
	Warn(string, ...any)
	Error(string, ...any)
}, path string, r *ptyworker.Registry, why string) entryResult {
	dst, err := moveAside(path, filepath.Join(h.opts.StateDir, quarantineDir))
	if err != nil {
		log.Error("recovery: cannot quarantine registry entry", "err", err)
		return entryResult{kind: failed}
	}
	log.Warn("recovery: quarantined", "why", why, "moved_to", dst)
	return entryResult{kind: quarantined, q: api.Quarantined{Name: r.Name, Path: dst, Reason: why}}
}

func unitGoneText(us units.State) string {
	if !us.Exists() {
		return "gone"
	}
	return units.StateInactive
}

// sleepCtx waits d or until ctx is done; it reports whether ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-t.C:
		return false
	}
}
