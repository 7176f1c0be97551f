package activation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/privdir"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/unitname"
)

// Recovery joins three sources at every start of the helper:
//
//   - systemd's view: the loaded units named legion-*.service, with their
//     ActiveState, SubState and MainPID;
//   - the registry files under <state>/registry, one per session, written
//     by the workers (daemon instance id, token, socket, worker lease);
//   - hello and watch (which answers with the session's info) on each
//     worker's socket; the connection stays, and the helper follows the
//     worker's state events on it from then on.
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
//   - its unit runs                          → hello + watch: adopted; refused
//     (token/owner) or another rpc version → quarantined, never killed;
//     no answer → retried with backoff RecoveryAttempts times, then
//     quarantined
//
// Recovery runs in two phases, so that `legion sessions list` answers
// before every worker did. The first reads only systemd's listing and the
// files, and settles every entry the rules above settle without a worker;
// an entry whose unit runs is listed at once, marked checking
// (api.Session.Checking), with the state (and agent PID) its unit and
// registry entry give, and counted as recovered until its check says
// otherwise.
// Then sessions.list is served (every other command still answers
// "recovering"), while the second phase says hello + watch to those
// workers, in parallel (checkParallel at a time), and adopts, retries
// or quarantines each as above; a checked session is no longer marked,
// one quarantined or pruned leaves the list. When the last is checked,
// recovery is done: every command is served and every session published.
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
	checking // its worker must answer first: see check
)

type entryResult struct {
	kind outcome
	s    *session        // adopted; with checking, the session listed meanwhile (nil: none)
	q    api.Quarantined // quarantined
	unit string          // the unit the entry is about, when known
	chk  *check          // checking
}

// check is an entry the first phase of recovery left to its worker:
// hello + watch, with retries, settles it (checkEntry, checkOrphan).
type check struct {
	path string          // the registry entry; the spec's path for an orphan
	r    *proto.Registry // the entry, or for an orphan the one its spec gives
	us   units.State     // the unit's state in the first phase's listing
	// orphan: a running unit without a registry entry, named by a spec of
	// this helper (recoverOrphan).
	orphan bool
	log    *slog.Logger
}

// recover runs recovery and fills the session table. It fails only when
// systemd cannot be asked at all (then nothing can be classified safely).
func (h *Helper) recover(ctx context.Context) (api.RecoveryCounts, error) {
	regDir := filepath.Join(h.opts.StateDir, registryDir)
	if err := privdir.Ensure(regDir); err != nil {
		return api.RecoveryCounts{}, err
	}
	t0 := time.Now()
	// systemd's listing and the registry files are read at once: the
	// rules hold whichever comes first (a change between the two is
	// marked by the unit subscription, taken before recovery started, and
	// refreshed once recovery is done).
	var (
		unitStates map[string]units.State
		listErr    error
		tList      time.Duration
	)
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		unitStates, listErr = h.unitStates(ctx)
		tList = time.Since(t0)
	}()
	paths, err := readRegistryDir(regDir)
	var entries []registryEntry
	if err == nil {
		entries = readEntries(ctx, paths)
	}
	tRead := time.Since(t0)
	<-listed
	if listErr != nil {
		return api.RecoveryCounts{}, fmt.Errorf("recovery: list legion-*.service units: %w", listErr)
	}
	if err != nil {
		return api.RecoveryCounts{}, fmt.Errorf("recovery: %w", err)
	}

	var (
		mu      sync.Mutex
		counts  api.RecoveryCounts
		quar    []api.Quarantined
		covered = map[string]bool{}
		checks  []entryResult
		// nChecking counts the checks not done yet: each was counted as
		// recovered in the first phase.
		nChecking int
	)
	// record counts r, the outcome of an entry; checked, when not nil, is
	// the first phase's result that r settles (its session, listed while
	// its worker was checked, is replaced by r's or leaves the table).
	record := func(r entryResult, checked *entryResult) {
		mu.Lock()
		defer mu.Unlock()
		if r.unit != "" {
			covered[r.unit] = true
		}
		if checked != nil {
			nChecking--
			counts.Recovered-- // counted again below if adopted
			if checked.s != nil && r.kind != adopted && r.kind != lost {
				h.sessions.drop(checked.s) // an adopted or lost session replaces it at once
			}
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
		case checking:
			// Counted as recovered until its check says otherwise.
			counts.Recovered++
			nChecking++
			checks = append(checks, r)
			if r.s != nil {
				h.sessions.put(r.s)
			}
		}
	}
	publishCounts := func() {
		mu.Lock()
		defer mu.Unlock()
		h.sessions.mu.Lock()
		defer h.sessions.mu.Unlock()
		h.sessions.counts = counts
		h.sessions.checking = nChecking
		h.sessions.quarantined = slices.Clone(quar)
	}

	// The first phase: files and systemd's listing only. What an entry's
	// rules read or move (a lease in /proc, a rename) blocks a thread: a
	// few at a time is all the parallelism they have.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(registryReads)
	for _, e := range entries {
		g.Go(func() error {
			record(h.recoverEntry(gctx, e, unitStates), nil)
			return nil
		})
	}
	g.Wait()
	if ctx.Err() != nil {
		return counts, ctx.Err()
	}
	tEntries := time.Since(t0)

	// Units nobody's registry entry named.
	var orphans []units.State
	for name, st := range unitStates {
		if !covered[name] && st.ActiveState != units.StateInactive {
			orphans = append(orphans, st)
		}
	}
	if len(orphans) > 0 {
		specs := h.specsByUnit()
		for _, st := range orphans {
			record(h.recoverOrphan(st, specs[st.Name]), nil)
		}
	}
	publishCounts()
	tListed := time.Since(t0)
	h.listable.Store(true)
	h.log.Info("recovery: sessions listed; checking their workers", "checking", nChecking, "took", time.Since(h.started).Round(time.Millisecond))

	if h.opts.beforeChecks != nil {
		if err := h.opts.beforeChecks(ctx); err != nil {
			return counts, err
		}
	}
	// The second phase: the workers. A fresh group: the first one's
	// context ended with its Wait.
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(checkParallel)
	for _, c := range checks {
		g.Go(func() error {
			var r entryResult
			if c.chk.orphan {
				r = h.checkOrphan(gctx, c.chk)
			} else {
				r = h.checkEntry(gctx, c.chk)
			}
			record(r, &c)
			publishCounts()
			return nil
		})
	}
	g.Wait()
	publishCounts()
	h.log.Debug("recovery phases", "list_units", tList, "read_entries", tRead, "entries", tEntries-max(tRead, tList),
		"orphans", tListed-tEntries, "workers", time.Since(t0)-tListed)
	return counts, ctx.Err()
}

// recoverEntry classifies one registry file by the first phase's rules
// (states is systemd's view from the start of recovery); an entry whose
// worker must answer is returned as checking, listed meanwhile when its
// unit runs.
func (h *Helper) recoverEntry(ctx context.Context, e registryEntry, states map[string]units.State) entryResult {
	path, r, err := e.path, e.r, e.err
	log := h.log.With("registry", path)
	if err != nil {
		if !errors.Is(err, proto.ErrCorruptRegistry) {
			log.Error("recovery: cannot read registry entry", "err", err)
			return entryResult{kind: failed}
		}
		dst, qerr := proto.QuarantineRegistry(path)
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

	if r.DaemonInstanceID != h.daemonID {
		if !unitRuns(us) && !us.AutoRestart() && !r.Owner.Alive() {
			// Reclaim: the entry's worker is provably gone, so moving the
			// entry aside harms no process.
			res.kind = h.prune(log, path, "stale entry of another daemon instance "+r.DaemonInstanceID)
			return res
		}
		res = h.quarantine(log, path, r, fmt.Sprintf("owned by daemon instance %s, not this helper's %s: left running, not adopted", r.DaemonInstanceID, h.daemonID))
		res.unit = r.Unit
		return res
	}
	if res, ok := h.settleEntry(log, path, r, us); ok {
		return res
	}
	res.kind, res.chk = checking, &check{path: path, r: r, us: us, log: log}
	if unitRuns(us) {
		// Listed while its worker is checked: the state its unit and its
		// entry give (deriveState with no info), marked checking.
		s := newSession(h, r, path)
		s.us, s.checking = us, true
		res.s = s
	}
	return res
}

// settleEntry applies the rules that need no worker to the entry r of
// this helper, whose unit is in state us: it reports false when the
// worker must answer (the unit runs, or a live worker has no unit).
func (h *Helper) settleEntry(log *slog.Logger, path string, r *proto.Registry, us units.State) (entryResult, bool) {
	switch {
	case us.Gone():
		leaseAlive := r.Owner.Alive()
		if !leaseAlive && cutByReboot(r, h.bootID) {
			if res, ok := h.markLost(log, r, path); ok {
				return res, true
			}
		}
		if !leaseAlive {
			return entryResult{kind: h.prune(log, path, "worker gone and unit "+unitGoneText(us)), unit: r.Unit}, true
		}
		// A live worker without its unit (run by hand): adopt it only
		// if it answers as ours.
		return entryResult{}, false
	case us.Failed():
		log.Info("recovery: adopted a failed session", "run", r.Run)
		return h.adopt(r, path, us, nil, 0, nil, r.Unit), true
	case us.AutoRestart():
		log.Info("recovery: adopted a session waiting to restart")
		return h.adopt(r, path, us, nil, 0, nil, r.Unit), true
	}
	return entryResult{}, false
}

// checkEntry settles an entry of this helper that the first phase left
// to its worker: hello + watch adopts it; a refusal quarantines it; no
// answer is retried with backoff (the unit and the entry read again each
// time) RecoveryAttempts times, then quarantined.
func (h *Helper) checkEntry(ctx context.Context, c *check) entryResult {
	log, path, r, us := c.log, c.path, c.r, c.us
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if res, ok := h.settleEntry(log, path, r, us); ok {
				return res
			}
		}
		wc, hr, in, err := watchWorker(ctx, r.SocketPath, h.daemonID, r.Token)
		if err == nil {
			if in.SessionID == r.SessionID && hr.SessionID == r.SessionID {
				log.Debug("recovery: adopted", "worker_pid", hr.WorkerPID)
				return h.adopt(r, path, us, wc, hr.WorkerPID, in, r.Unit)
			}
			wc.Close()
			res := h.quarantine(log, path, r, fmt.Sprintf("socket %s hosts session %s, not %s", r.SocketPath, in.SessionID, r.SessionID))
			res.unit = r.Unit
			return res
		}
		switch {
		case proto.IsCode(err, proto.CodeUnauthorized), proto.IsCode(err, proto.CodeSessionNotFound):
			res := h.quarantine(log, path, r, "the worker refused this helper's hello: "+err.Error())
			res.unit = r.Unit
			return res
		case proto.IsCode(err, proto.CodeUnsupportedVersion):
			res := h.quarantine(log, path, r, "rpc version mismatch: "+err.Error())
			res.unit = r.Unit
			return res
		}
		if ctx.Err() != nil {
			return entryResult{kind: failed, unit: r.Unit} // shutting down: move nothing
		}
		if attempt >= h.opts.RecoveryAttempts {
			res := h.quarantine(log, path, r, fmt.Sprintf("worker unreachable after %d attempts: %v", attempt, err))
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
		if nr, rerr := proto.ReadRegistry(path); rerr == nil && nr.SessionID == r.SessionID && nr.DaemonInstanceID == r.DaemonInstanceID {
			r = nr
		}
	}
}

// registryReads bounds the registry files recovery reads at once. A file
// read blocks its thread (the network calls do not), and with 128 entries
// at a time the Go runtime started a thread for many of them: 64 threads
// and half of recovery's CPU time in the kernel with 300 workers.
const registryReads = 4

// registryEntry is one registry file as recovery read it: r, or the
// error reading it.
type registryEntry struct {
	path string
	r    *proto.Registry
	err  error
}

// readEntries reads the registry files at paths, registryReads at a time;
// those not read when ctx ended have ctx's error.
func readEntries(ctx context.Context, paths []string) []registryEntry {
	out := make([]registryEntry, len(paths))
	var g errgroup.Group
	g.SetLimit(registryReads)
	for i, p := range paths {
		g.Go(func() error {
			out[i].path = p
			if out[i].err = ctx.Err(); out[i].err == nil {
				out[i].r, out[i].err = proto.ReadRegistry(p)
			}
			return nil
		})
	}
	g.Wait()
	return out
}

// recoverOrphan is the first phase for a running unit that no registry
// entry names, in state us: without a spec of this helper it is reported
// as quarantined; with one it is adopted when it waits to restart or
// failed, else listed and left to checkOrphan.
func (h *Helper) recoverOrphan(us units.State, spec *proto.Spec) entryResult {
	unit := us.Name
	log := h.log.With("unit", unit)
	if spec == nil || spec.DaemonInstanceID != h.daemonID {
		log.Warn("recovery: a legion-*.service unit has no registry entry or spec of this helper; left alone")
		return entryResult{kind: quarantined, unit: unit, q: api.Quarantined{Name: unit, Path: "",
			Reason: "unit has no registry entry or spec of this helper: left running, not adopted"}}
	}
	r := &proto.Registry{
		Version: proto.RegistryVersion, SessionID: spec.SessionID, AgentSession: spec.AgentSession, Name: spec.Name, Team: spec.Team,
		Issue: spec.Issue, Mode: spec.Mode, Role: spec.Role, Unit: spec.Unit, DaemonInstanceID: spec.DaemonInstanceID,
		Token: spec.Token, SocketPath: spec.SocketPath(), TranscriptPath: spec.TranscriptPath(),
	}
	path := spec.RegistryPath()
	if us.Failed() || us.AutoRestart() {
		return h.adopt(r, path, us, nil, 0, nil, unit)
	}
	s := newSession(h, r, path)
	s.us, s.checking = us, true
	return entryResult{kind: checking, unit: unit, s: s, chk: &check{path: path, r: r, us: us, orphan: true, log: log}}
}

// checkOrphan settles an orphan that recoverOrphan left to its worker:
// adopted when it answers, retried with backoff, then reported as
// quarantined (nothing is moved: it has no entry).
func (h *Helper) checkOrphan(ctx context.Context, c *check) entryResult {
	log, r, path, unit, us := c.log, c.r, c.path, c.r.Unit, c.us
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			states, err := h.unitStates(ctx)
			if err != nil {
				log.Error("recovery: cannot list units", "err", err)
				return entryResult{kind: failed, unit: unit}
			}
			us = unitState(states, unit)
			if us.Gone() {
				return entryResult{kind: pruned, unit: unit}
			}
			if us.Failed() || us.AutoRestart() {
				return h.adopt(r, path, us, nil, 0, nil, unit)
			}
		}
		wc, hr, in, err := watchWorker(ctx, r.SocketPath, h.daemonID, r.Token)
		if err == nil {
			return h.adopt(r, path, us, wc, hr.WorkerPID, in, unit)
		}
		if ctx.Err() != nil {
			return entryResult{kind: failed, unit: unit}
		}
		if attempt >= h.opts.RecoveryAttempts {
			log.Warn("recovery: worker without a registry entry is unreachable; left alone", "err", err)
			return entryResult{kind: quarantined, unit: unit, q: api.Quarantined{Name: r.Name, Reason: fmt.Sprintf("unit %s without a registry entry, unreachable after %d attempts: %v", unit, attempt, err)}}
		}
		sleepCtx(ctx, h.opts.RecoveryBackoff<<(attempt-1))
	}
}

// adopt makes a session of r. wc, when not nil, is a connection that
// watches its worker (pid), with the info of its watch call: the session
// follows the worker on it from now on.
func (h *Helper) adopt(r *proto.Registry, path string, us units.State, wc *proto.Client, pid int, in *proto.Info, unit string) entryResult {
	s := newSession(h, r, path)
	s.us, s.seen = us, time.Now()
	if wc != nil {
		s.setConnLocked(h, wc, pid, in) // s is not shared yet
	}
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
}, path string, r *proto.Registry, why string) entryResult {
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
