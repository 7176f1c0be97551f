package activation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/privdir"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/ptyworker/workerunit"
	"github.com/legion-dev/legion/units"
)

// Supervision of every worker unit that is the worker's own, not a team's
// policy: the worker feeds WatchdogSec= from its event loop (staleness of
// the agent is stale_after, a team setting), and gets TimeoutStopSec= to
// record the agent's end.
const (
	workerWatchdog    = 30 * time.Second
	workerStopTimeout = 15 * time.Second
)

// Roles of a launch (proto.Spec.Role).
const (
	roleWorker  = "worker"  // an agent dispatched for an issue
	roleCommand = "command" // a command started with `legion spawn`
)

func (h *Helper) cmdSpawn(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	var a api.SpawnArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	l, err := checkLaunch(a)
	if err != nil {
		return nil, nil, err
	}
	if a.Kubernetes != nil {
		res, err := h.spawnKube(ctx, l, *a.Kubernetes)
		return res, nil, err
	}
	if h.mgr == nil {
		return nil, nil, api.Errorf(api.CodeBadRequest, "spawn %s: %v", l.name, ErrNoSystemd)
	}
	res, err := h.launch(ctx, l)
	return res, nil, err
}

// launch is one session to start as a worker unit: a spawn request that
// checkLaunch accepted, with its unit name and team.
type launch struct {
	name, id, unit        string
	team                  string
	teamID                uuid.UUID
	agentSession          string // the agent's conversation when not id (a retro's); see proto.Spec.AgentSessionID
	issue, mode, role     string
	instructions          string // what the agent was told, for sessions.status
	cwd                   string
	env, argvNew, argvRes []string
	prepare               [][]string        // proto.Spec.Prepare
	envFiles              map[string]string // proto.Spec.EnvFiles
	kubeFiles             map[string][]byte // on a cluster: more files of the spec Secret (never logged)
	watch                 string
	resumeMarker          string
	staleAfter            time.Duration
	agent                 string // proto.AgentClaude or AgentCustom ("": custom)
	ownCommands           []string
	dialogMarkers         []string
	legion                string
	sandbox               *api.Sandbox
	cooldown              time.Duration
	startLimitBurst       uint32
	startLimitInterval    time.Duration
	startupGrace          time.Duration
	ringSize              int
	// reuseLive makes a live session of the same name and team a success
	// (dispatch is idempotent) instead of an exists error.
	reuseLive bool
	// maxLive is the machine's cap on live sessions (api.SpawnArgs.MaxLive).
	maxLive int
}

// teamShort is the first 8 hex digits of the team UUID.
func (l launch) teamShort() string { return l.teamID.String()[:8] }

// launch writes the spec of l and starts its transient unit. The result's
// Started is false when l.reuseLive and the session already runs.
func (h *Helper) launch(ctx context.Context, l launch) (api.SpawnResult, error) {
	name := l.name
	// One start per name at a time; the name is reserved in the table.
	s, release, err := h.sessions.reserve(name)
	if err != nil {
		return api.SpawnResult{}, err
	}
	defer release()
	if s != nil {
		h.sessions.refresh(ctx, []*session{s})
		if v := s.view(); !v.State.Ended() {
			if l.reuseLive && v.Team != l.team {
				// Names are unique across teams, dispatch names are
				// <issue>-<mode>: two teams whose trackers share issue ids
				// (or an ad-hoc session that took the name) cannot both
				// have the session. Reporting the other team's session as
				// this team's would be a lie; the caller retries once the
				// name is free.
				return api.SpawnResult{}, api.Errorf(api.CodeExists, "spawn: session name %s is taken by a live session of team %s (unit %s), not of team %s: wait for it to end, or `legion sessions kill %s`", name, v.Team, v.Unit, l.team, name)
			}
			if l.reuseLive {
				return api.SpawnResult{Name: name, ID: v.ID, Unit: v.Unit}, nil
			}
			return api.SpawnResult{}, api.Errorf(api.CodeExists, "session %s already exists (%s, unit %s): pick another --name, or `legion sessions kill %s` first", name, v.State, v.Unit, name)
		}
	}

	if l.maxLive > 0 {
		// Spawns with a cap are admitted one at a time, and each counts
		// the live sessions, its own start included once it is in the
		// table: two controllers that passed their own count at once
		// cannot both start.
		h.admitMu.Lock()
		defer h.admitMu.Unlock()
		live := len(h.sessions.where(func(s *session) bool { return !s.view().State.Ended() }))
		if live >= l.maxLive {
			return api.SpawnResult{}, api.Errorf(api.CodeNoRoom, "spawn %s: the machine's session_limit %d is reached (%d sessions of all teams live): it waits for one to end", name, l.maxLive, live)
		}
	}

	id, unit := l.id, l.unit
	// The unit may be alive while the table says otherwise (waiting out
	// its restart cooldown, quarantined, not yet adopted): then its spec
	// and registry belong to it and must not be touched. A failed unit
	// stays loaded, and anyone may start it again on its spec (`systemctl
	// --user start`, once its start limit has run out): so it is unloaded
	// (reset-failed) and looked at again before the spec and the registry
	// are written. Once it is gone, no one can start it but by creating it.
	st, err := h.unitStateOf(ctx, unit)
	if err == nil && st.Failed() && l.reuseLive && !h.specUnreadable(ctx, unit) {
		// A dispatch never unloads a failed unit: the controller would
		// reset the start limit at every tick and the session would fail
		// in a loop. It stays failed until a person acts. But a worker that
		// could not read its spec (proto.ExitSpecUnreadable) failed its
		// unit at once, on its first start: the fresh spec written below
		// is the cure, and the session resumes.
		return api.SpawnResult{}, failedErr(name, unit, s)
	}
	if err == nil && st.Failed() {
		if err := h.mgr.ResetFailed(ctx, unit); err != nil && !errors.Is(err, units.ErrNoSuchUnit) {
			return api.SpawnResult{}, fmt.Errorf("spawn: unload the failed unit %s: %w", unit, err)
		}
		st, err = h.unitStateOf(ctx, unit)
	}
	if err != nil {
		return api.SpawnResult{}, fmt.Errorf("spawn: read unit %s: %w", unit, err)
	}
	if !st.Stopped() {
		if l.reuseLive && st.ActiveState == units.StateActive && !h.owns(unit) {
			// It runs and is no session of the table: recovery could not
			// prove it this helper's (its registry entry and spec
			// unreadable) and left it running. Reported as started, the
			// dispatch would be made again at every tick, the controller
			// listing no worker of the issue; it will not end by itself.
			return api.SpawnResult{}, heldErr(l, unit)
		}
		if l.reuseLive {
			return api.SpawnResult{Name: name, ID: id, Unit: unit}, nil
		}
		return api.SpawnResult{}, api.Errorf(api.CodeExists, "spawn: unit %s is %s (%s): `legion sessions kill %s` or wait", unit, st.ActiveState, st.SubState, name)
	}
	if l.reuseLive && l.issue != "" {
		if err := h.issueFree(ctx, l, unit); err != nil {
			return api.SpawnResult{}, err
		}
	}
	token, err := proto.NewToken()
	if err != nil {
		return api.SpawnResult{}, err
	}
	spec := &proto.Spec{
		Version: proto.SpecVersion, SessionID: id, AgentSession: l.agentSession, Name: name, Team: l.team, TeamShort: l.teamShort(),
		Issue: l.issue, Mode: l.mode, Role: l.role, Cwd: l.cwd, Env: l.env, EnvFiles: l.envFiles, ArgvNew: l.argvNew, ArgvResume: l.argvRes, Prepare: l.prepare,
		Agent: l.agent, Sandbox: l.sandbox, Instructions: l.instructions, OwnCommands: l.ownCommands, DialogMarkers: l.dialogMarkers, Legion: l.legion, SessionFile: l.watch, ResumeMarker: l.resumeMarker, StaleAfter: proto.Duration(l.staleAfter), RingSize: l.ringSize,
		Token: token, DaemonInstanceID: h.daemonID, Unit: unit,
		Paths: proto.Paths{RuntimeDir: h.opts.RuntimeDir, StateDir: h.opts.StateDir},
	}
	if l.watch != "" {
		spec.StartupGrace = proto.Duration(l.startupGrace)
	}
	if err := spec.Validate(); err != nil {
		return api.SpawnResult{}, api.Errorf(api.CodeBadRequest, "spawn: %v", err)
	}
	bin := h.opts.Binary
	if bin == "" {
		var err error
		if bin, err = proto.FindBinary(); err != nil {
			return api.SpawnResult{}, fmt.Errorf("spawn: %w", err)
		}
	}
	if h.opts.beforeSpecWrite != nil {
		h.opts.beforeSpecWrite(unit)
	}
	// A new start begins a new life of the session: the entry of an earlier
	// one (same name, so same ID) goes to registry/pruned, so run numbers
	// and restarts count from this start. The transcript is appended to.
	if _, err := os.Stat(spec.RegistryPath()); err == nil {
		if _, err := moveAside(spec.RegistryPath(), filepath.Join(h.opts.StateDir, prunedDir)); err != nil {
			return api.SpawnResult{}, fmt.Errorf("spawn: move the earlier registry entry of %s aside: %w", name, err)
		}
	}
	dir := filepath.Join(h.opts.StateDir, specDir)
	if err := privdir.Ensure(dir); err != nil {
		return api.SpawnResult{}, err
	}
	specPath := filepath.Join(dir, id+".json")
	t0 := time.Now()
	if err := proto.WriteSpec(specPath, spec); err != nil {
		return api.SpawnResult{}, err
	}
	tSpec := time.Since(t0)
	policy := workerunit.Policy{
		Binary: bin, SpecPath: specPath,
		Cooldown:           l.cooldown,
		Watchdog:           workerWatchdog,
		StartLimitBurst:    l.startLimitBurst,
		StartLimitInterval: l.startLimitInterval,
		StopTimeout:        workerStopTimeout,
	}
	u, err := workerunit.Transient(spec, policy)
	if err != nil {
		os.Remove(specPath)
		return api.SpawnResult{}, api.Errorf(api.CodeBadRequest, "spawn: %v", err)
	}
	ns := newSession(h, &proto.Registry{
		Version: proto.RegistryVersion, SessionID: id, AgentSession: l.agentSession, Name: name, Team: l.team, Issue: l.issue, Mode: l.mode,
		Role: l.role, Unit: unit, DaemonInstanceID: h.daemonID, Token: token,
		SocketPath: spec.SocketPath(), TranscriptPath: spec.TranscriptPath(),
	}, spec.RegistryPath())
	log := ns.log
	// Logged before the unit starts: the worker's own lines follow it in
	// the journal.
	log.Info("spawn", "argv0", l.argvNew[0])
	if err := h.mgr.StartTransient(ctx, u); err != nil {
		if errors.Is(err, units.ErrUnitExists) {
			return api.SpawnResult{}, api.Errorf(api.CodeExists, "spawn: unit %s is still loaded (running or stopping): `legion sessions kill %s` or wait", unit, name)
		}
		why := ""
		if r, rerr := proto.ReadRegistry(spec.RegistryPath()); rerr == nil && r.LastExit != nil && r.Token == token {
			why = "; the worker said: " + r.LastExit.Reason
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), systemdTimeout)
		st, _ := h.mgr.State(sctx, unit)
		cancel()
		if st.Gone() {
			os.Remove(specPath)
		} else {
			// The unit failed (its worker could not start the agent) or
			// waits to restart: the session is listed, failed with its
			// cause or starting, not forgotten while its unit lives on.
			h.sessions.put(ns)
			// Publish it: the unit's signals came while StartTransient
			// waited for the job, before the session was in the table.
			h.events.mark(unit)
		}
		log.Warn("spawn failed", "err", err)
		if _, ok := errors.AsType[*units.JobError](err); ok {
			return api.SpawnResult{}, fmt.Errorf("%w%s", err, why) // it names the unit and systemctl status
		}
		return api.SpawnResult{}, fmt.Errorf("start unit %s: %w%s (see `systemctl --user status %s`)", unit, err, why, unit)
	}
	// Started: until systemd is asked again, the unit is activating (an
	// empty state would read as a session already over, and the machine
	// cap would not count it).
	ns.mu.Lock()
	if ns.us.ActiveState == "" {
		ns.us = units.State{Name: unit, LoadState: "loaded", ActiveState: units.StateActivating}
	}
	ns.mu.Unlock()
	h.sessions.put(ns)
	h.events.mark(unit) // publish it: the unit's own signals may have come before the put
	log.Debug("spawn timing", "write_spec", tSpec, "start_unit", time.Since(t0)-tSpec)
	return api.SpawnResult{Name: name, ID: id, Unit: unit, Started: true}, nil
}

// issueFree refuses (issue_busy) the dispatch of l's unit while another
// worker unit of the same team and issue (another phase) is loaded and
// not failed: running, stopping, or waiting out its restart cooldown.
// One issue has one worker at a time, and this is where that holds
// whatever the session table says: a unit the helper could not adopt
// (its registry entry and spec unreadable) is in no table, and a worker
// killed -9 is restarted by systemd after the controller may have taken
// its phase as ended. The units are systemd's listing of the team's,
// read now; a failed one runs nothing and holds nothing. A unit that runs
// and is no session of the table is refused with issue_held instead: it
// will not end by itself, and recovery left it running because it could
// not prove it the helper's, so a person stops it.
func (h *Helper) issueFree(ctx context.Context, l launch, unit string) error {
	cut := strings.LastIndexByte(unit, '-')
	if h.mgr == nil || cut < 0 {
		return nil
	}
	prefix := unit[:cut+1] // legion-<short>-<issue>-
	lctx, cancel := context.WithTimeout(ctx, systemdTimeout)
	defer cancel()
	listed, err := h.mgr.List(lctx, "legion-"+l.teamShort()+"-*.service")
	if err != nil {
		return fmt.Errorf("spawn: list the units of team %s: %w", l.team, err)
	}
	for _, st := range listed {
		if st.Name == unit || !strings.HasPrefix(st.Name, prefix) || st.Stopped() {
			continue
		}
		if st.ActiveState == units.StateActive && !h.owns(st.Name) {
			return heldErr(l, st.Name)
		}
		return api.Errorf(api.CodeIssueBusy, "spawn %s: issue %s of team %s still has a worker: unit %s is %s (%s); it starts once that has ended",
			l.name, l.issue, l.team, st.Name, st.ActiveState, st.SubState)
	}
	return nil
}

// heldErr is the issue_held refusal of l's dispatch: unit runs and is no
// session of this helper.
func heldErr(l launch, unit string) error {
	return api.Errorf(api.CodeIssueHeld, "spawn %s: issue %s of team %s is held by unit %s, which runs but is no session of this helper "+
		"(its registry entry and spec are unreadable, or another helper's: `legion sessions list` names it under quarantined); "+
		"Legion never stops a worker it cannot prove its own: stop it with `systemctl --user stop '%s'`, then dispatch again",
		l.name, l.issue, l.team, unit, unit)
}

// owns reports whether a session of the table runs in unit.
func (h *Helper) owns(unit string) bool {
	return len(h.sessions.where(func(s *session) bool { return s.unit == unit })) > 0
}

// specUnreadable reports whether the failed unit's worker last exited
// with proto.ExitSpecUnreadable (read from systemd: the listing has no
// exit status).
func (h *Helper) specUnreadable(ctx context.Context, unit string) bool {
	ctx, cancel := context.WithTimeout(ctx, systemdTimeout)
	defer cancel()
	st, err := h.mgr.State(ctx, unit)
	if err != nil {
		h.log.Warn("read the failed unit's exit status", "unit", unit, "err", err)
		return false
	}
	return st.Failed() && st.ExitedWith(proto.ExitSpecUnreadable)
}

// failedErr is the answer to a dispatch (a spawn with reuse) of session
// name whose unit failed: what failed (s, when the table has the session,
// says why) and what a person does about it.
func failedErr(name, unit string, s *session) error {
	why := ""
	if s != nil {
		if c := s.view().Cause; c != "" {
			why = ": " + c
		}
	}
	return api.Errorf(api.CodeNotRunning, "spawn: session %s failed%s; it is not started again until a person acts: see `journalctl --user -u '%s'`, then `systemctl --user reset-failed '%s'`", name, why, unit, unit)
}

// reserve marks name as being spawned. It returns the existing session
// of that name (nil if none) and a release func; a name already being
// spawned is an exists error.
func (t *table) reserve(name string) (*session, func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.spawning == nil {
		t.spawning = map[string]bool{}
	}
	if t.spawning[name] {
		return nil, nil, api.Errorf(api.CodeExists, "session %s is being spawned right now", name)
	}
	t.spawning[name] = true
	release := func() {
		t.mu.Lock()
		delete(t.spawning, name)
		t.mu.Unlock()
	}
	return t.byName[name], release, nil
}

// specsByUnit reads the helper's spec files, by unit name.
func (h *Helper) specsByUnit() map[string]*proto.Spec {
	out := map[string]*proto.Spec{}
	dir := filepath.Join(h.opts.StateDir, specDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		s, err := proto.ReadSpec(filepath.Join(dir, e.Name()))
		if err != nil {
			h.log.Warn("unreadable spec file", "file", e.Name(), "err", err)
			continue
		}
		out[s.Unit] = s
	}
	return out
}

// removeSpecFor removes the spec of the session whose registry file has
// base name base (<session id>.json): its unit is gone, so nothing will
// read it again, and it holds a token.
func (h *Helper) removeSpecFor(base string) {
	p := filepath.Join(h.opts.StateDir, specDir, base)
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		h.log.Warn("cannot remove spec", "file", p, "err", err)
	}
}
