package activation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/internal/privdir"
	"github.com/legion-dev/legion/ptyworker"
	"github.com/legion-dev/legion/ptyworker/workerunit"
	"github.com/legion-dev/legion/units"
)

// AdhocTeam is the built-in team of `legion spawn` without --team. Its
// UUID is fixed (AdhocTeamID), so its sessions' IDs and unit names are
// stable; a configured team of the same name replaces it.
const AdhocTeam = "adhoc"

// AdhocTeamID is the UUID of AdhocTeam: UUIDv5 of the URL namespace and
// "https://github.com/legion-dev/legion#team-adhoc".
var AdhocTeamID = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/legion-dev/legion#team-adhoc"))

// SpawnMode is the mode (the last part of the unit name) of sessions
// started with `legion spawn`.
const SpawnMode = "spawn"

// Supervision defaults of spawned sessions, for teams that leave them
// unset.
const (
	defaultCooldown           = 10 * time.Second
	defaultStartLimitBurst    = 5
	defaultStartLimitInterval = 10 * time.Minute
	defaultWatchdog           = 30 * time.Second
	defaultStopTimeout        = 15 * time.Second
)

// Team is what spawn needs to know about a team: its identity and the
// supervision policy of its sessions. Zero durations and counts mean the
// defaults above.
type Team struct {
	Name string
	ID   uuid.UUID // the team UUID; session IDs and the short ID derive from it

	Cooldown           time.Duration // RestartSec= of its sessions
	StartLimitBurst    uint32
	StartLimitInterval time.Duration
	StartupGrace       time.Duration // with a watched file: fed regardless for this long after a start
	RingSize           int           // worker scrollback; 0 means ptyworker's default
}

// ShortID is the first 8 hex digits of the team UUID.
func (t Team) ShortID() string { return t.ID.String()[:8] }

// team returns the team called name ("" means AdhocTeam).
func (h *Helper) team(name string) (Team, error) {
	if name == "" {
		name = AdhocTeam
	}
	if t, ok := h.opts.Teams[name]; ok {
		return t, nil
	}
	if name == AdhocTeam {
		t := h.opts.Defaults
		t.Name, t.ID = AdhocTeam, AdhocTeamID
		return t, nil
	}
	known := []string{AdhocTeam}
	for n := range h.opts.Teams {
		known = append(known, n)
	}
	return Team{}, apiErr(CodeBadRequest, "unknown team %q: configured teams are %s (see legion.toml)", name, strings.Join(known, ", "))
}

func (h *Helper) cmdSpawn(ctx context.Context, _ *clientConn, req Request) (any, *os.File, error) {
	var a SpawnArgs
	if err := DecodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	team, err := h.team(a.Team)
	if err != nil {
		return nil, nil, err
	}
	if err := checkSpawnArgs(&a); err != nil {
		return nil, nil, err
	}
	name := a.Name
	if name == "" {
		name = h.newName(a.Argv[0])
	} else if err := ValidateName(name); err != nil {
		return nil, nil, apiErr(CodeBadRequest, "spawn: %v", err)
	}
	unit, err := units.WorkerUnit(team.ShortID(), name, SpawnMode)
	if err != nil {
		return nil, nil, apiErr(CodeBadRequest, "spawn: session name %q: %v", name, err)
	}
	res, _, err := h.launch(ctx, team, launch{
		op: "spawn", name: name, id: uuid.NewSHA1(team.ID, []byte(name+":"+SpawnMode)).String(), unit: unit,
		mode: SpawnMode, role: "command", cwd: a.Cwd, env: a.Env, argvNew: a.Argv,
		watch: a.Watch, staleAfter: time.Duration(a.StaleAfter), cooldown: time.Duration(a.Cooldown),
	})
	return res, nil, err
}

// launch is one session to start as a worker unit: what spawn and dispatch
// have in common.
type launch struct {
	op                    string // "spawn" or "dispatch", for messages
	name, id, unit        string
	agentSession          string // the agent's conversation when not id (a retro's); see ptyworker.Spec.AgentSessionID
	issue, mode, role     string
	cwd                   string
	env, argvNew, argvRes []string
	watch                 string
	staleAfter, cooldown  time.Duration
	// reuseLive makes a live session of the same name a success (dispatch
	// is idempotent) instead of an exists error (spawn names are unique).
	reuseLive bool
}

// launch writes the spec of l and starts its transient unit. It reports
// started=false when l.reuseLive and the session already runs.
func (h *Helper) launch(ctx context.Context, team Team, l launch) (res SpawnResult, started bool, err error) {
	name := l.name
	// One start per name at a time; the name is reserved in the table.
	s, release, err := h.sessions.reserve(name)
	if err != nil {
		return SpawnResult{}, false, err
	}
	defer release()
	if s != nil {
		h.sessions.refresh(ctx, []*session{s})
		if v := s.view(); v.State != StateExited && v.State != StateFailed {
			if l.reuseLive && v.Team != team.Name {
				// Names are unique across teams, dispatch names are
				// <issue>-<mode>: two teams whose trackers share issue ids
				// (or an ad-hoc session that took the name) cannot both
				// have the session. Reporting the other team's session as
				// this team's would be a lie; the caller retries once the
				// name is free.
				return SpawnResult{}, false, apiErr(CodeExists, "%s: session name %s is taken by a live session of team %s (unit %s), not of team %s: wait for it to end, or `legion sessions kill %s`", l.op, name, v.Team, v.Unit, team.Name, name)
			}
			if l.reuseLive {
				return SpawnResult{Name: name, ID: v.ID, Unit: v.Unit}, false, nil
			}
			return SpawnResult{}, false, apiErr(CodeExists, "session %s already exists (%s, unit %s): pick another --name, or `legion sessions kill %s` first", name, v.State, v.Unit, name)
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
	st, err := h.mgr.State(ctx, unit)
	if err == nil && st.Failed() && l.reuseLive {
		// A dispatch never unloads a failed unit: the controller would
		// reset the start limit at every tick and the session would fail
		// in a loop. It stays failed until a person acts.
		return SpawnResult{}, false, failedErr(l.op, name, unit, s)
	}
	if err == nil && st.Failed() {
		if err := h.mgr.ResetFailed(ctx, unit); err != nil && !errors.Is(err, units.ErrNoSuchUnit) {
			return SpawnResult{}, false, fmt.Errorf("%s: unload the failed unit %s: %w", l.op, unit, err)
		}
		st, err = h.mgr.State(ctx, unit)
	}
	if err != nil {
		return SpawnResult{}, false, fmt.Errorf("%s: read unit %s: %w", l.op, unit, err)
	}
	if !st.Stopped() {
		if l.reuseLive {
			return SpawnResult{Name: name, ID: id, Unit: unit}, false, nil
		}
		return SpawnResult{}, false, apiErr(CodeExists, "%s: unit %s is %s (%s): `legion sessions kill %s` or wait", l.op, unit, st.ActiveState, st.SubState, name)
	}
	token, err := ptyworker.NewToken()
	if err != nil {
		return SpawnResult{}, false, err
	}
	spec := &ptyworker.Spec{
		Version: ptyworker.SpecVersion, SessionID: id, AgentSession: l.agentSession, Name: name, Team: team.Name, TeamShort: team.ShortID(),
		Issue: l.issue, Mode: l.mode, Role: l.role, Cwd: l.cwd, Env: l.env, ArgvNew: l.argvNew, ArgvResume: l.argvRes,
		SessionFile: l.watch, StaleAfter: ptyworker.Duration(l.staleAfter), RingSize: team.RingSize,
		Token: token, DaemonInstanceID: h.daemonID, Unit: unit,
		Paths: ptyworker.Paths{RuntimeDir: h.opts.RuntimeDir, StateDir: h.opts.StateDir},
	}
	if l.watch != "" {
		spec.StartupGrace = ptyworker.Duration(team.StartupGrace)
	}
	if err := spec.Validate(); err != nil {
		return SpawnResult{}, false, apiErr(CodeBadRequest, "%s: %v", l.op, err)
	}
	bin := h.opts.Binary
	if bin == "" {
		var err error
		if bin, err = ptyworker.FindBinary(); err != nil {
			return SpawnResult{}, false, fmt.Errorf("%s: %w", l.op, err)
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
			return SpawnResult{}, false, fmt.Errorf("%s: move the earlier registry entry of %s aside: %w", l.op, name, err)
		}
	}
	dir := filepath.Join(h.opts.StateDir, specDir)
	if err := privdir.Ensure(dir); err != nil {
		return SpawnResult{}, false, err
	}
	specPath := filepath.Join(dir, id+".json")
	t0 := time.Now()
	if err := ptyworker.WriteSpec(specPath, spec); err != nil {
		return SpawnResult{}, false, err
	}
	tSpec := time.Since(t0)
	policy := workerunit.Policy{
		Binary: bin, SpecPath: specPath,
		Cooldown:           orDefault(l.cooldown, orDefault(team.Cooldown, defaultCooldown)),
		Watchdog:           defaultWatchdog,
		StartLimitBurst:    team.StartLimitBurst,
		StartLimitInterval: orDefault(team.StartLimitInterval, defaultStartLimitInterval),
		StopTimeout:        defaultStopTimeout,
	}
	if policy.StartLimitBurst == 0 {
		policy.StartLimitBurst = defaultStartLimitBurst
	}
	u, err := workerunit.Transient(spec, policy)
	if err != nil {
		os.Remove(specPath)
		return SpawnResult{}, false, apiErr(CodeBadRequest, "%s: %v", l.op, err)
	}
	log := h.log.With("session", spec.AgentSessionID(), "name", name, "team", team.Name, "unit", unit)
	ns := newSession(h, &ptyworker.Registry{
		Version: ptyworker.RegistryVersion, SessionID: id, AgentSession: l.agentSession, Name: name, Team: team.Name, Issue: l.issue, Mode: l.mode,
		Role: l.role, Unit: unit, DaemonInstanceID: h.daemonID, Token: token,
		SocketPath: spec.SocketPath(), TranscriptPath: spec.TranscriptPath(),
	}, spec.RegistryPath())
	if err := h.mgr.StartTransient(ctx, u); err != nil {
		if errors.Is(err, units.ErrUnitExists) {
			return SpawnResult{}, false, apiErr(CodeExists, "%s: unit %s is still loaded (running or stopping): `legion sessions kill %s` or wait", l.op, unit, name)
		}
		why := ""
		if r, rerr := ptyworker.ReadRegistry(spec.RegistryPath()); rerr == nil && r.LastExit != nil && r.Token == token {
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
		}
		log.Warn(l.op+" failed", "err", err)
		return SpawnResult{}, false, fmt.Errorf("start unit %s: %w%s (see `systemctl --user status %s`)", unit, err, why, unit)
	}
	h.sessions.put(ns)
	h.events.mark(unit) // publish it: the unit's own signals may have come before the put
	log.Info(l.op, "argv0", l.argvNew[0])
	log.Debug(l.op+" timing", "write_spec", tSpec, "start_unit", time.Since(t0)-tSpec)
	return SpawnResult{Name: name, ID: id, Unit: unit}, true, nil
}

// failedErr is a dispatch's answer for session name whose unit failed:
// what failed (s, when the table has the session, says why) and what a
// person does about it.
func failedErr(op, name, unit string, s *session) error {
	why := ""
	if s != nil {
		if c := s.view().Cause; c != "" {
			why = ": " + c
		}
	}
	return apiErr(CodeNotRunning, "%s: session %s failed%s; it is not started again until a person acts: see `journalctl --user -u '%s'`, then `systemctl --user reset-failed '%s'`", op, name, why, unit, unit)
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// checkSpawnArgs validates what the client sent; cwd must exist.
func checkSpawnArgs(a *SpawnArgs) error {
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return apiErr(CodeBadRequest, "spawn: argv is empty: give the command to run")
	}
	if !filepath.IsAbs(a.Argv[0]) {
		return apiErr(CodeBadRequest, "spawn: program %q is not an absolute path (the CLI resolves it in PATH)", a.Argv[0])
	}
	for i, s := range a.Argv {
		if strings.IndexByte(s, 0) >= 0 {
			return apiErr(CodeBadRequest, "spawn: argument %d holds a NUL byte", i)
		}
	}
	if !filepath.IsAbs(a.Cwd) {
		return apiErr(CodeBadRequest, "spawn: cwd %q is not an absolute path", a.Cwd)
	}
	if fi, err := os.Stat(a.Cwd); err != nil || !fi.IsDir() {
		return apiErr(CodeBadRequest, "spawn: cwd %s is not a directory", a.Cwd)
	}
	if a.Watch != "" && !filepath.IsAbs(a.Watch) {
		return apiErr(CodeBadRequest, "spawn: watch %q is not an absolute path", a.Watch)
	}
	if a.Watch != "" && a.StaleAfter <= 0 {
		return apiErr(CodeBadRequest, "spawn: watch needs a positive stale_after")
	}
	if a.Watch == "" && a.StaleAfter != 0 {
		return apiErr(CodeBadRequest, "spawn: stale_after needs watch (the file whose age is checked)")
	}
	for i, kv := range a.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return apiErr(CodeBadRequest, "spawn: env entry %d %q is not KEY=VALUE", i, kv)
		}
	}
	return nil
}

// newName makes a session name from a program path: its base name
// (characters outside [A-Za-z0-9_.-] dropped) and 4 random hex digits.
func (h *Helper) newName(prog string) string {
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return -1
	}, filepath.Base(prog))
	base = strings.TrimLeft(base, "-")
	if len(base) > 40 {
		base = base[:40]
	}
	if base == "" {
		base = "cmd"
	}
	for {
		var b [2]byte
		rand.Read(b[:])
		name := base + "-" + hex.EncodeToString(b[:])
		if _, taken := h.sessions.get(name); !taken {
			return name
		}
	}
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
		return nil, nil, apiErr(CodeExists, "session %s is being spawned right now", name)
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
func (h *Helper) specsByUnit() map[string]*ptyworker.Spec {
	out := map[string]*ptyworker.Spec{}
	dir := filepath.Join(h.opts.StateDir, specDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		s, err := ptyworker.ReadSpec(filepath.Join(dir, e.Name()))
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
