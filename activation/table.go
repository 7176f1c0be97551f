package activation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
)

// Timeouts of the helper's calls to workers and to the manager. They bound
// a hung peer, they are not expected durations.
const (
	workerCallTimeout = 3 * time.Second
	systemdTimeout    = 10 * time.Second
	// refreshParallel bounds the concurrent worker calls of a refresh or
	// recovery. A call mostly waits for another process to be scheduled
	// (each worker is one), so the bound is well above the CPU count:
	// with 1,000 sessions on 2 cores, 32 left recovery waiting ~3 ms per
	// worker.
	refreshParallel = 128
	// checkParallel bounds the workers recovery's second phase checks at
	// once. Each check wakes a worker process, and the kernel shares the
	// CPU among runnable threads (no cgroup of the user manager's has a
	// CPU controller of its own, so a unit gets no share as a whole): with
	// 128 at a time, the helper's few threads got a small slice next to
	// the woken workers, and the sessions.list that recovery serves
	// meanwhile waited for them.
	checkParallel = 16
)

// Directories below the state dir.
const (
	specDir       = "specs"               // spec files the helper writes (0600, hold tokens)
	registryDir   = "registry"            // registry files the workers write
	prunedDir     = "registry/pruned"     // entries of sessions that ended for good
	quarantineDir = "registry/quarantine" // entries the helper refuses to adopt
)

// session is one session the helper knows: adopted at recovery, spawned
// since, or ended while this helper ran.
type session struct {
	id    string
	name  string
	team  string
	issue string
	mode  string
	unit  string

	regPath    string
	transcript string
	socket     string
	token      string

	log *slog.Logger

	mu    sync.Mutex
	reg   *proto.Registry // last registry entry read
	wc    *proto.Client   // authenticated connection; nil when none
	wcPID int             // worker PID wc talks to
	info  *proto.Info     // last info from wc
	us    units.State     // last state from systemd
	ended bool            // killed or pruned: over until spawned again
	// checking: listed by recovery's first phase, its worker not yet
	// checked (see recovery.go); nothing refreshes it meanwhile.
	checking bool
	lost     string    // the cause, when recovery found a reboot cut it (lost.go)
	seen     time.Time // when us/info were read

	// failure is the failed unit's full state (Result=, NRestarts=):
	// read once when it is seen failed, zero when it is not.
	failure units.State
}

func newSession(h *Helper, r *proto.Registry, regPath string) *session {
	return &session{
		id: r.SessionID, name: r.Name, team: r.Team, issue: r.Issue, mode: r.Mode, unit: r.Unit,
		regPath: regPath, transcript: r.TranscriptPath, socket: r.SocketPath, token: r.Token,
		log: sessionLogger(h.log, r),
		reg: r,
	}
}

// sessionLogger scopes log to a session: its journal fields (team, issue,
// mode, session, unit: see internal/journal) as the worker's own lines
// carry them, so one journalctl match finds both. "session" is the agent
// conversation's session ID (LEGION_SESSION, see
// proto.Spec.AgentSessionID); "name" is what people type.
func sessionLogger(log *slog.Logger, r *proto.Registry) *slog.Logger {
	args := []any{"session", r.AgentSessionID(), "name", r.Name, "team", r.Team, "unit", r.Unit}
	if r.Issue != "" {
		args = append(args, "issue", r.Issue)
	}
	if r.Mode != "" {
		args = append(args, "mode", r.Mode)
	}
	return log.With(args...)
}

// table is the helper's view of its sessions, by name.
type table struct {
	h *Helper

	mu          sync.Mutex
	byName      map[string]*session
	spawning    map[string]bool // names being spawned
	counts      api.RecoveryCounts
	checking    int // sessions recovery has yet to check (api.ListResult.Checking)
	quarantined []api.Quarantined
}

func newTable(h *Helper) *table {
	return &table{h: h, byName: map[string]*session{}}
}

func (t *table) get(name string) (*session, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byName[name]
	return s, ok
}

func (t *table) put(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byName[s.name]; ok && old != s {
		old.closeConn()
	}
	t.byName[s.name] = s
}

// drop removes s from the table, if it is still the session of its
// name there.
func (t *table) drop(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byName[s.name] == s {
		delete(t.byName, s.name)
	}
}

func (t *table) all() []*session {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*session, 0, len(t.byName))
	for _, s := range t.byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// where is the sessions keep picks, in no order: for the few a change
// concerns, without sorting every session (all does, for listings).
func (t *table) where(keep func(*session) bool) []*session {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*session
	for _, s := range t.byName {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func (t *table) closeAll() {
	for _, s := range t.all() {
		s.closeConn()
	}
}

// refresh brings the given sessions up to date: systemd's state of each
// unit, then info from each running worker (connecting when needed), or
// the registry entry of one that is not running. Sessions are refreshed
// concurrently; a failure of one leaves its last known state. The units
// are read with one listing of every legion-* unit, or of just theirs
// when there are at most fewUnits (see statesOf): a full listing costs
// systemd in proportion to all the units it has (tens of ms with 1,000
// sessions), and a spawn or one session's change must not pay for all
// the others. It does no per-unit property reads: those cost systemd far
// more than a listing.
func (t *table) refresh(ctx context.Context, ss []*session) {
	states, err := t.h.statesOf(ctx, ss)
	if err != nil {
		t.h.log.Warn("list units", "err", err)
		return
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(refreshParallel)
	for _, s := range ss {
		g.Go(func() error {
			s.refresh(gctx, t.h, unitState(states, s.unit))
			return nil
		})
	}
	g.Wait()
}

// fewUnits is the most units refresh asks for by name rather than list
// all of.
const fewUnits = 8

// statesOf is the state of the units of ss, by name: unitStates, or for
// at most fewUnits sessions a listing of just their units (their names as
// the patterns: one call, and it never loads a unit, as asking for a unit
// that is not loaded by its name would). Only Name, LoadState,
// ActiveState and SubState are set.
func (h *Helper) statesOf(ctx context.Context, ss []*session) (map[string]units.State, error) {
	if len(ss) > fewUnits {
		return h.unitStates(ctx)
	}
	names := make([]string, 0, len(ss))
	for _, s := range ss {
		if strings.ContainsAny(s.unit, `*?[\`) {
			return h.unitStates(ctx) // not a pattern that matches only itself
		}
		names = append(names, s.unit)
	}
	return h.unitStates(ctx, names...)
}

// unitStateOf is the state of one unit, as statesOf reads it.
func (h *Helper) unitStateOf(ctx context.Context, unit string) (units.State, error) {
	if h.mgr == nil {
		return units.NotFound(unit), nil
	}
	if strings.ContainsAny(unit, `*?[\`) {
		return h.mgr.State(ctx, unit)
	}
	m, err := h.unitStates(ctx, unit)
	if err != nil {
		return units.State{}, err
	}
	return unitState(m, unit), nil
}

// unitStates lists the loaded legion-*.service units (or only the units
// named, when names are given), by name. A listing has only Name,
// LoadState, ActiveState and SubState; a unit that is deactivating is
// read whole (withResult), so that its Result is known.
func (h *Helper) unitStates(ctx context.Context, only ...string) (map[string]units.State, error) {
	if h.mgr == nil {
		return map[string]units.State{}, nil // no systemd: no unit is loaded
	}
	ctx, cancel := context.WithTimeout(ctx, systemdTimeout)
	defer cancel()
	patterns := only
	if len(patterns) == 0 {
		patterns = []string{"legion-*.service"}
	}
	listed, err := h.mgr.List(ctx, patterns...)
	if err != nil {
		return nil, err
	}
	m := make(map[string]units.State, len(listed))
	for _, st := range listed {
		m[st.Name] = h.withResult(ctx, st)
	}
	return m, nil
}

// withResult is st, a listed unit's state, read whole when the unit is
// deactivating: its Result then tells a stop (success, or timeout when the
// stop had to kill: not restarted) from a crash (signal, exit-code, ...:
// Restart=on-failure starts it again once the stop is over), and a listing
// does not carry it. Read as a stop, a worker killed -9 was exited while
// systemd still killed its agent and ran ExecStopPost, the controller
// started the issue's next phase, and the restart of the old one ran
// beside it (the chaos run, seed 202). Few units are deactivating at
// once; when the read fails, Result stays unknown and deriveState takes
// the unit as restarting.
func (h *Helper) withResult(ctx context.Context, st units.State) units.State {
	if st.ActiveState != units.StateDeactivating || st.Result != "" {
		return st
	}
	whole, err := h.mgr.State(ctx, st.Name)
	if err != nil {
		h.log.Debug("read a deactivating unit's result", "unit", st.Name, "err", err)
		return st
	}
	return whole // a later state than the listing's, or the unit gone since
}

// unitState is name's state in states; a unit not listed is not loaded.
func unitState(states map[string]units.State, name string) units.State {
	if st, ok := states[name]; ok {
		return st
	}
	return units.NotFound(name)
}

// unitRuns reports whether the unit has a worker process that may answer.
func unitRuns(us units.State) bool {
	switch us.ActiveState {
	case units.StateActive, units.StateReloading, units.StateDeactivating:
		return true
	case units.StateActivating:
		return !us.AutoRestart()
	}
	return false
}

// refresh updates one session from its unit's state us; see
// table.refresh.
func (s *session) refresh(ctx context.Context, h *Helper, us units.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.us, s.seen = us, time.Now()
	s.readFailureLocked(ctx, h)
	if unitRuns(us) && us.ActiveState != units.StateActivating {
		fresh, err := s.connectLocked(ctx, h)
		if err == nil && fresh {
			return // s.info came with the watch
		}
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, workerCallTimeout)
			in, err := s.wc.Info(cctx)
			cancel()
			if err == nil {
				s.info = in
				return
			}
			s.log.Debug("worker info failed", "err", err)
			s.closeConnLocked()
		}
	} else {
		s.closeConnLocked()
	}
	s.info = nil
	if r, err := proto.ReadRegistry(s.regPath); err == nil && r.SessionID == s.id {
		s.reg = r
	}
}

// readFailureLocked reads the failed unit's properties once per failure:
// a listing does not have them, and failed units are few.
func (s *session) readFailureLocked(ctx context.Context, h *Helper) {
	if !s.us.Failed() {
		s.failure = units.State{}
		return
	}
	if s.failure.Name != "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, systemdTimeout)
	defer cancel()
	st, err := h.mgr.State(ctx, s.unit)
	if err != nil {
		s.log.Debug("read the failed unit's state", "err", err)
		return
	}
	if st.Failed() {
		s.failure = st
	}
}

// connectLocked makes sure s.wc is an authenticated connection to the
// session's worker that watches it. A restarted unit has a new worker,
// and the old connection has ended then: reconnect. It reports whether
// it connected now; s.info is then fresh from the watch call.
func (s *session) connectLocked(ctx context.Context, h *Helper) (bool, error) {
	if s.followed() {
		return false, nil
	}
	s.closeConnLocked()
	wc, hr, in, err := watchWorker(ctx, s.socket, h.daemonID, s.token)
	if err != nil {
		return false, err
	}
	if hr.SessionID != s.id || in.SessionID != s.id {
		wc.Close()
		return false, fmt.Errorf("worker at %s hosts session %s, not %s", s.socket, hr.SessionID, s.id)
	}
	s.setConnLocked(h, wc, hr.WorkerPID, in)
	return true, nil
}

// followed reports whether s.wc is up: it watches the worker, so every
// change of the worker's state is pushed (and marks s's unit). s.mu is
// held.
func (s *session) followed() bool {
	if s.wc == nil {
		return false
	}
	select {
	case <-s.wc.Done():
		return false
	default:
		return true
	}
}

// setConnLocked makes wc, a connection that watches the worker (pid),
// the session's, with in the info its watch call returned, and starts
// following it.
func (s *session) setConnLocked(h *Helper, wc *proto.Client, pid int, in *proto.Info) {
	s.wc, s.wcPID, s.info, s.seen = wc, pid, in, time.Now()
	h.followers.Add(1)
	go h.follow(s, wc)
}

// follow turns the state and exit events the worker pushes on wc into
// marks of s's unit, and marks it once more when wc ends (the worker
// exited, or the helper closed it), so that the next refresh looks at
// the unit again and connects to the new worker if one runs. A state
// event is also published at once, from what it carries: a refresh reads
// only the newest state, so an agent that goes working and idle again
// within one refresh would otherwise never be seen working. A worker
// that does not answer is not dialled again until its unit changes. It
// ends when wc does; Run closes every connection and waits for it.
func (h *Helper) follow(s *session, wc *proto.Client) {
	defer h.followers.Done()
	for ev := range wc.Events() {
		switch ev.Kind {
		case proto.EventKindState:
			if s.applyStateEvent(wc, ev.State) && !h.recovering.Load() {
				h.events.publish(s)
			}
			h.events.mark(s.unit)
		case proto.EventKindExit:
			h.events.mark(s.unit)
		}
		ev.Release()
	}
	h.events.mark(s.unit)
}

// applyStateEvent updates s's info from a state event its worker pushed
// on wc, and reports whether it did. It does not when wc is no longer the
// session's connection, nothing was read yet, the agent no longer runs
// (the refresh the event's mark brings reads it all, the exit with it),
// or the event is older than what s holds: of
// an earlier run, or an agent state from before the newest hook event s
// knows (a refresh's info call may have read past it).
func (s *session) applyStateEvent(wc *proto.Client, st *proto.StateEventData) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == nil || s.wc != wc || s.info == nil || st.Run < s.info.Run || !st.Running {
		return false // an agent that no longer runs: its exit comes with the refresh
	}
	if st.Run == s.info.Run && st.Agent != nil && s.info.Agent != nil && st.Agent.LastEvent.Before(s.info.Agent.LastEvent) {
		return false
	}
	in := *s.info // s.info may be shared with a reader of an older view
	in.State, in.Running, in.Waiting, in.Question, in.Stale = st.State, st.Running, st.Waiting, st.Question, st.Stale
	in.ChildPID, in.Run, in.Agent = st.ChildPID, st.Run, st.Agent
	s.info = &in
	return true
}

func (s *session) closeConn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeConnLocked()
}

func (s *session) closeConnLocked() {
	if s.wc != nil {
		s.wc.Close()
		s.wc, s.wcPID = nil, 0
	}
}

// dialWorker connects to a worker socket and says hello. The
// connection's reader goroutine ends when the connection is closed.
func dialWorker(ctx context.Context, socket, daemonID, token string) (*proto.Client, *proto.HelloResult, error) {
	ctx, cancel := context.WithTimeout(ctx, workerCallTimeout)
	defer cancel()
	wc, err := proto.Dial(ctx, socket)
	if err != nil {
		return nil, nil, err
	}
	hr, err := wc.HelloAs(ctx, helloParams(daemonID, token))
	if err != nil {
		wc.Close()
		return nil, nil, err
	}
	return wc, hr, nil
}

// watchWorker connects to a worker socket, says hello and watches (in
// one round trip: proto.Client.HelloWatch): the connection gets the
// worker's state and exit events (drain them: see follow), and the
// session's info as of the subscription. The connection's reader
// goroutine ends when the connection is closed.
func watchWorker(ctx context.Context, socket, daemonID, token string) (*proto.Client, *proto.HelloResult, *proto.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, workerCallTimeout)
	defer cancel()
	wc, err := proto.Dial(ctx, socket)
	if err != nil {
		return nil, nil, nil, err
	}
	hr, in, err := wc.HelloWatch(ctx, helloParams(daemonID, token))
	if err != nil {
		wc.Close()
		return nil, nil, nil, err
	}
	return wc, hr, in, nil
}

// helloParams is the helper's hello.
func helloParams(daemonID, token string) proto.HelloParams {
	return proto.HelloParams{
		RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor,
		DaemonInstanceID: daemonID, Token: token, Client: "legion helper",
	}
}

// updateActivity brings the last activity of the worker's last info up
// to date from files (see lastActivityNow).
func (s *session) updateActivity() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info == nil {
		return
	}
	if t := lastActivityNow(s.info, s.transcript); t.After(s.info.LastActivity) {
		in := *s.info // s.info may be shared with a reader of an older view
		in.LastActivity = t
		s.info = &in
	}
}

// view renders the session for the API from what was last read.
func (s *session) view() api.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := api.Session{Name: s.name, ID: s.id, Unit: s.unit, Team: s.team, Issue: s.issue, Mode: s.mode, Checking: s.checking}
	v.State = deriveState(s.us, s.info, s.reg)
	var last *proto.ExitInfo
	run := 0
	if s.reg != nil {
		last, run = s.reg.LastExit, s.reg.Run
	}
	if s.checking && s.info == nil && s.reg != nil && v.State == api.StateRunning && s.reg.State == proto.StateRunning {
		v.PID = s.reg.ChildPID // as the worker wrote it when its run started
	}
	if s.info != nil {
		if s.info.Running {
			v.PID = s.info.ChildPID
		}
		if !s.info.LastActivity.IsZero() {
			la := s.info.LastActivity
			v.LastActivity = &la
		}
		if s.info.Exit != nil {
			last = s.info.Exit
		}
		if s.info.Waiting {
			v.Question = s.info.Question
		}
		if s.info.Agent != nil {
			a := *s.info.Agent
			v.Agent = &a
		}
		run = s.info.Run
	}
	if run > 1 {
		v.Restarts = uint32(run - 1)
	}
	if v.LastActivity == nil && s.reg != nil && !s.reg.UpdatedAt.IsZero() && s.info == nil {
		la := s.reg.UpdatedAt
		v.LastActivity = &la
	}
	v.Exit = exitView(last)
	if v.State == api.StateFailed && s.failure.ExitedWith(proto.ExitSpecUnreadable) {
		// Its worker could not read its spec (garbled, truncated) and
		// exited without a restart: the session ended, not failed for
		// good. A dispatch starts it again on a fresh spec (launch).
		v.State = api.StateExited
		code := int(proto.ExitSpecUnreadable)
		v.Exit = &api.Exit{Code: &code, Time: s.seen, Reason: specUnreadableReason}
	}
	if v.State == api.StateFailed {
		v.Cause = failureCause(s.failure, v.Exit)
	}
	lostView(&v, s.lost)
	return v
}

// specUnreadableReason is the exit reason of a session whose worker exited
// with proto.ExitSpecUnreadable.
const specUnreadableReason = proto.ExitReasonSpecUnreadable + ": the worker moved its spec file aside (specs/*.corrupt-*, see its journal); the next dispatch or spawn starts the session on a fresh spec, resuming its conversation"

// failureCause says why systemd gave up on a session, from its failed
// unit's state (zero if unread) and the last run's exit (nil if none was
// recorded). A worker unit restarts on any failure but an agent that
// cannot be started (proto.ExitAgentNotStartable), so any other
// failed unit ran out of restarts: its start limit. (systemd 252 keeps
// the first failure's Result=, "exit-code", when the limit stops a
// restart; "start-limit-hit" only comes from a start by hand.)
func failureCause(us units.State, last *api.Exit) string {
	if last != nil && strings.HasPrefix(last.Reason, proto.StartFailedPrefix) {
		return last.Reason
	}
	if us.Result == "start-limit-hit" || us.NRestarts > 0 {
		return fmt.Sprintf("restarted too often (systemd's start limit hit); last run: %s; gave up after %d restarts", last, us.NRestarts)
	}
	if us.Result != "" {
		return fmt.Sprintf("systemd result %s; last run: %s", us.Result, last)
	}
	return "last run: " + last.String()
}

// deriveState maps systemd's view, the worker's info (nil when it does not
// answer) and its registry entry (nil if none) to an API state. It is
// pure.
func deriveState(us units.State, in *proto.Info, reg *proto.Registry) api.State {
	switch {
	case us.Failed():
		return api.StateFailed
	case us.AutoRestart():
		return api.StateStarting // waiting out the cooldown
	case us.ActiveState == units.StateActivating:
		return api.StateStarting
	case us.ActiveState == units.StateDeactivating && us.SubState == units.SubStopWatchdog:
		return api.StateStale
	case us.ActiveState == units.StateActive || us.ActiveState == units.StateReloading || us.ActiveState == units.StateDeactivating:
		if in == nil {
			// The worker does not answer: after its agent ended it closes
			// its socket before it exits, and its registry entry (written
			// at every start and end of a run) says how the run ended.
			runEnded := reg != nil && reg.State != "" && reg.State != proto.StateRunning && reg.State != proto.StateStarting
			switch {
			case us.ActiveState == units.StateDeactivating && (crashed(us.Result) || us.Result == ""):
				// The worker died (a kill -9, a crash), mid-run or after
				// its agent's end was recorded but before it exited:
				// systemd is cleaning up the unit and restarts it
				// (Restart=on-failure), whatever the registry says. Read
				// as exited, the controller started the issue's next
				// phase, and then the restart ran the old phase beside it.
				return api.StateStarting
			case runEnded && failedRun(reg.State, reg.LastExit):
				return api.StateStarting // the run failed; the restart follows
			case us.ActiveState != units.StateDeactivating:
				// Running, or a run that ended while its worker is still
				// on its way out (see workerLeaving).
				return api.StateRunning
			}
			return api.StateExited
		}
		switch {
		case !in.Running && in.State == proto.StateStarting:
			return api.StateStarting
		case !in.Running && failedRun(in.State, in.Exit):
			// The agent failed and its worker is about to exit non-zero:
			// Restart=on-failure brings it back (unless the start limit
			// says otherwise, and then the unit fails).
			return api.StateStarting
		case !in.Running && us.ActiveState != units.StateDeactivating:
			return api.StateRunning // workerLeaving
		case !in.Running:
			return api.StateExited
		case in.Waiting:
			return api.StateWaitingInput
		case in.Stale:
			return api.StateStale
		}
		return api.StateRunning
	}
	// The unit is not loaded or inactive: the session is over.
	return api.StateExited
}

// workerLeaving: a run that ended cleanly is not the session's end while
// its worker process still runs (it lingers for its watchers, at most its
// exit linger, then exits 0): the session is exited only once systemd has
// the unit inactive or stopping. Read as exited at once, the controller
// started the issue's next phase beside the worker, and a kill -9 in
// that moment had systemd restart the old phase (Result=signal,
// Restart=on-failure) beside the new one: the 30-minute chaos run found a
// planner run again beside its implementer that way.

// crashed reports whether a unit's Result says its main process died in
// a way Restart=on-failure restarts: killed by a signal, dumped core, a
// non-zero exit, its watchdog. A stop job's ends ("success", or "timeout"
// when it had to kill) are not restarted.
func crashed(result string) bool {
	switch result {
	case "signal", "core-dump", "exit-code", "watchdog":
		return true
	}
	return false
}

// failedRun reports whether a worker in state ended its run with a
// failure of the agent, which makes the worker exit non-zero and systemd
// restart it (a stopped or removed session is not restarted).
func failedRun(state string, e *proto.ExitInfo) bool {
	return state == proto.StateExited && e != nil && !e.Success()
}

func exitView(e *proto.ExitInfo) *api.Exit {
	if e == nil {
		return nil
	}
	x := &api.Exit{Signal: e.Signal, Time: e.Time, Reason: e.Reason}
	if e.Signal == "" {
		code := e.Code
		x.Code = &code
	}
	return x
}

// readRegistryDir returns the registry files (*.json) directly in dir.
func readRegistryDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read registry directory: %w", err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out, nil
}

// moveAside moves a registry file into dir (created 0700), keeping its
// base name, and returns the new path.
func moveAside(path, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := os.Rename(path, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// findEnded looks for an entry of a session called name that ended before
// this helper started (registry/pruned), newest first.
func (h *Helper) findEnded(name string) (*proto.Registry, string) {
	paths, err := readRegistryDir(filepath.Join(h.opts.StateDir, prunedDir))
	if err != nil {
		return nil, ""
	}
	var best *proto.Registry
	var bestPath string
	for _, p := range paths {
		r, err := proto.ReadRegistry(p)
		if err != nil || r.Name != name {
			continue
		}
		if best == nil || r.UpdatedAt.After(best.UpdatedAt) {
			best, bestPath = r, p
		}
	}
	return best, bestPath
}

// isChecking reports whether recovery has yet to hear from s's worker.
func (s *session) isChecking() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checking
}

// lastActivityNow is in.LastActivity brought up to date without asking the
// worker, for a client that follows the worker's state events (they
// carry every other change, and a hook event's time): with a session
// file, its liveness read now, as the worker reads it; for an agent
// judged by its output, when its transcript was last written (within
// tens of milliseconds of the output). It is never older than
// LastActivity.
func lastActivityNow(in *proto.Info, transcript string) time.Time {
	act := in.LastActivity
	var t time.Time
	switch {
	case in.SessionFile != "":
		t, _ = claudecode.Liveness(in.SessionFile) // unreadable: LastActivity stands
	case in.OutputActivity && transcript != "":
		if st, err := os.Stat(transcript); err == nil {
			t = st.ModTime()
		}
	}
	if t.After(act) {
		act = t
	}
	return act
}
