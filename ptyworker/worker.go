package ptyworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/gitlock"
	"github.com/legion-dev/legion/internal/privdir"
	"github.com/legion-dev/legion/internal/unixsock"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// Options tune a worker. The zero value is ready for production use.
type Options struct {
	Logger  *slog.Logger // nil: discard
	Version string       // reported in hello

	// AllowedUIDs are the peer UIDs allowed on the socket; nil means only
	// the worker's own UID.
	AllowedUIDs []uint32

	// Liveness and PendingQuestion read the session file; nil means
	// package claude's Liveness and PendingQuestion.
	Liveness        func(sessionFile string) (time.Time, error)
	PendingQuestion func(sessionFile string) (question string, waiting bool, err error)

	// Notify sends an sd_notify state; nil means go-systemd's SdNotify,
	// a silent no-op without NOTIFY_SOCKET.
	Notify func(state string) error

	// Tick overrides the liveness/notify interval (default: half of
	// WATCHDOG_USEC, else 5s, at most stale_after/4).
	Tick time.Duration
	// ClientQueue is how far (bytes) an attached client may fall behind
	// before it is dropped with a desync event; default and at most the
	// ring size. Clients read from the ring at their own offsets, so the
	// queue costs no memory of its own: a client is dropped when output it
	// has yet to read is about to leave the ring.
	ClientQueue int
	// KillGrace is how long the agent gets between SIGHUP and SIGKILL when
	// the worker stops it (remove, SIGTERM, or an end it did not heed);
	// default 3s.
	KillGrace time.Duration
	// EndGrace is how long the agent gets between SIGINT and SIGHUP when
	// the worker ends it because its work is done (end); default 10s. Its
	// phase is over, so nothing waits on it but its slot, and a CLI that
	// writes its session at exit may take seconds for it on a busy
	// machine: with 3 s, the Gemini CLI was hung up on and then killed
	// under a load average of 13 (a clean-clone make test beside the
	// Kubernetes tests).
	EndGrace time.Duration
	// DrainGrace is how long output may still come after the agent exited
	// before its leftover processes are killed; default 1s.
	DrainGrace time.Duration
	// ExitLinger bounds the wait for attached clients to receive the last
	// output and the exit event before the worker exits; default 3s.
	ExitLinger time.Duration
	// InputTimeout bounds a write to an agent that does not read; default 5s.
	InputTimeout time.Duration
	// PrepareTimeout bounds each of the spec's prepare commands; default
	// proto.PrepareTimeout.
	PrepareTimeout time.Duration

	// beforeAnnounceEnd, for tests, runs when the run's end is about to be
	// told to clients.
	beforeAnnounceEnd func()
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Liveness == nil {
		o.Liveness = claudeLiveness
	}
	if o.PendingQuestion == nil {
		o.PendingQuestion = claudeQuestion
	}
	if o.Notify == nil {
		o.Notify = sdNotify
	}
	if o.KillGrace <= 0 {
		o.KillGrace = 3 * time.Second
	}
	if o.EndGrace <= 0 {
		o.EndGrace = 10 * time.Second
	}
	if o.DrainGrace <= 0 {
		o.DrainGrace = time.Second
	}
	if o.ExitLinger <= 0 {
		o.ExitLinger = 3 * time.Second
	}
	if o.InputTimeout <= 0 {
		o.InputTimeout = 5 * time.Second
	}
	if o.PrepareTimeout <= 0 {
		o.PrepareTimeout = proto.PrepareTimeout
	}
}

// ExitError is Run's error when the agent failed (non-zero code or a
// signal): the worker exits non-zero, so Restart=on-failure restarts it.
type ExitError struct {
	SessionID string
	Exit      proto.ExitInfo
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("session %s: agent ended with %s (run %d)", e.SessionID, e.Exit.String(), e.Exit.Run)
}

// worker is the state of one Run.
type worker struct {
	spec        *proto.Spec
	opts        Options
	log         *slog.Logger
	out         *output
	scr         *screen
	tr          *transcript
	lease       proto.Lease
	allowedUIDs []uint32
	clientQueue int
	tick        time.Duration
	run         int
	argvKind    string

	mu         sync.Mutex
	state      string
	child      *child
	startedAt  time.Time
	cols, rows int
	exit       *proto.ExitInfo
	reg        proto.Registry // last written registry entry
	triggered  bool           // WATCHDOG=trigger was sent
	stopReason string         // why the worker ends the agent (watchdog, remove)
	removing   bool
	ended      bool // the wait for the agent is over: a later remove is refused
	liveness   verdict
	conns      map[*conn]struct{}
	logged     map[string]bool

	// The agent's state from its hooks (hook.go, agentstate.go).
	hookToken string // this run's (kind claude; "" otherwise): only in the agent's environment
	cgroup    string // the worker's own cgroup: a peer in it is its agent (see checkAgentPeer)
	agent     agentMachine
	lastHook  time.Time // the newest hook event: a sign of life
	holds     []*hold   // permission requests waiting for a person, oldest first
	respondMu sync.Mutex
	ending    bool   // end was called
	endReason string //

	removeCh chan struct{} // closed by the first remove
	endCh    chan struct{} // closed by the first end
	staleCh  chan struct{} // with SelfWatchdog: closed by the first stale verdict
}

// Run hosts the session of spec until the agent exits, remove or end is
// called, or ctx is cancelled (systemd stopping the unit, or killing it
// after a watchdog trigger). At start it picks the resume argv when the
// session file exists, else the new one. It returns nil when the agent
// exited with code 0, was removed, was ended (its work done) or was
// stopped; an *ExitError when the agent failed; an error wrapping
// ErrAgentNotStartable when the agent could not be started and a restart
// would fail the same way; a *PrepareError when a prepare command failed
// (the agent not started; a restart runs them again); any other error
// when the session could not be hosted at all.
func Run(ctx context.Context, spec *proto.Spec, opts Options) error {
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("pty-worker: spec: %w", err)
	}
	opts.setDefaults()
	w := &worker{
		spec:     spec,
		opts:     opts,
		log:      identity(opts.Logger, spec),
		state:    proto.StateStarting,
		conns:    map[*conn]struct{}{},
		logged:   map[string]bool{},
		removeCh: make(chan struct{}),
		endCh:    make(chan struct{}),
		staleCh:  make(chan struct{}),
	}
	w.allowedUIDs = opts.AllowedUIDs
	if w.allowedUIDs == nil {
		w.allowedUIDs = []uint32{uint32(os.Getuid())}
	}
	w.clientQueue = ringSize(spec)
	if opts.ClientQueue > 0 {
		w.clientQueue = min(opts.ClientQueue, w.clientQueue)
	}
	w.tick = tickInterval(spec, opts.Tick)
	return w.runSession(ctx)
}

func (w *worker) runSession(ctx context.Context) (retErr error) {
	s := w.spec
	lease, err := proto.NewLease(os.Getpid())
	if err != nil {
		return fmt.Errorf("session %s: %w", s.SessionID, err)
	}
	w.lease = lease
	for _, d := range []string{s.SocketDir(), proto.DirOf(s.RegistryPath()), proto.DirOf(s.TranscriptPath())} {
		if err := privdir.Ensure(d); err != nil {
			return fmt.Errorf("session %s: %w", s.SessionID, err)
		}
	}

	prev, quarantined, err := proto.LoadRegistry(s.RegistryPath())
	if err != nil {
		return fmt.Errorf("session %s: %w", s.SessionID, err)
	}
	if quarantined != "" {
		w.log.Warn("registry file was corrupt; moved aside", "path", quarantined)
	}
	w.run = 1
	if prev != nil {
		if (prev.State == proto.StateRemoved || prev.State == proto.StateCompleted) && prev.Token == s.Token {
			// READY first: a Type=notify service that exits before READY=1
			// fails with result "protocol", and would be restarted.
			w.log.Info("session was " + prev.State + "; not starting it again")
			w.opts.Notify("READY=1\nSTATUS=" + prev.State + "; not started again")
			return nil
		}
		w.run = prev.Run + 1
		w.reg.LastExit = prev.LastExit // kept until this run ends
	}

	w.tr, err = openTranscript(s.TranscriptPath(), w.log)
	if err != nil {
		return fmt.Errorf("session %s: %w", s.SessionID, err)
	}
	defer func() {
		if err := w.tr.close(); err != nil && retErr == nil {
			retErr = err
		}
	}()

	if w.cgroup, err = unixsock.Cgroup(os.Getpid()); err != nil {
		return fmt.Errorf("session %s: %w", s.SessionID, err)
	}
	// The prepare commands before the socket: nobody attaches to an agent
	// that is not there, for as long as they take.
	if err := w.prepare(ctx, w.opts.PrepareTimeout); err != nil {
		if ctx.Err() != nil {
			w.log.Info("stopped while preparing; the agent was not started")
			w.writeRegistry(func(r *proto.Registry) {
				r.State = proto.StateStopped
				r.LastExit = &proto.ExitInfo{Code: -1, Reason: "stopped: the worker was told to stop while preparing", Time: time.Now(), Run: w.run}
			})
			return nil
		}
		w.recordPrepareFailure(err)
		return fmt.Errorf("session %s: %w", s.SessionID, err)
	}
	if s.Issue != "" {
		// An issue's worker runs in the issue's worktree, which only its
		// own runs write, and every process of the run before is gone: a
		// git lock left there (a git killed mid-commit) would fail the
		// agent's git at every run until its start limit. (An ad-hoc
		// session's directory may be a person's repository: left alone.)
		moved, err := gitlock.Clear(ctx, s.Cwd, time.Second)
		for _, p := range moved {
			w.log.Warn("moved a killed git's lock aside", "lock", p)
		}
		if err != nil {
			w.log.Warn("cannot move a killed git's lock aside; the agent's git may fail", "err", err)
		}
	}
	ln, err := listen(s.SocketPath())
	if err != nil {
		return fmt.Errorf("session %s: %w", s.SessionID, err)
	}
	defer ln.Close() // also unlinks the socket

	cols, rows := termSize(s)
	ring, err := NewSharedRing(ringSize(s))
	if err != nil {
		w.log.Warn("clients get output in data frames, not mapped", "err", err)
		ring = NewRing(ringSize(s))
	}
	w.out = newOutputOn(ring)
	w.scr = newScreen(cols, rows)
	w.argvKind = ""
	if aside, err := s.SetAsideUnresumable(time.Now()); err != nil {
		w.log.Warn("the agent's session file holds no conversation and could not be moved aside; its new start will fail", "path", s.SessionFile, "err", err)
	} else if aside != "" {
		w.log.Warn("the agent's session file holds no conversation (killed in its first moments?): moved aside, the session starts afresh", "moved_to", aside)
	}
	kind, argv := s.ChooseArgv()
	w.argvKind = kind
	if s.Agent == proto.AgentClaude {
		if w.hookToken, err = proto.NewToken(); err != nil {
			return fmt.Errorf("session %s: hook token: %w", s.SessionID, err)
		}
	}
	w.tr.writeMarker(fmt.Sprintf("run %d start (%s): %s", w.run, kind, quoteArgv(argv)))
	env, err := agentEnv(s, w.hookToken)
	var c *child
	if err == nil {
		c, err = startChild(argv, s.Cwd, env, cols, rows, agentSandbox(s))
	}
	if err != nil {
		e := &proto.ExitInfo{Code: -1, Reason: proto.StartFailedPrefix + err.Error(), Time: time.Now(), Run: w.run, ArgvKind: kind}
		w.tr.writeMarker(fmt.Sprintf("run %d exit: %s", w.run, e.Reason))
		w.writeRegistry(func(r *proto.Registry) { r.State, r.LastExit = proto.StateExited, e })
		// No READY=1: the start fails, and systemd says so. STATUS= and
		// the log line carry the cause to `systemctl --user status` and
		// the journal.
		w.log.Error("agent start failed", "err", err, "run", w.run)
		w.opts.Notify("STATUS=" + e.Reason)
		return fmt.Errorf("session %s: %w", s.SessionID, err)
	}
	w.mu.Lock()
	w.child, w.state, w.startedAt, w.cols, w.rows = c, proto.StateRunning, time.Now(), cols, rows
	w.mu.Unlock()
	w.log.Info("agent started", "pid", c.pid, "argv_kind", kind, "run", w.run, "sandboxed", s.Sandbox != nil)
	w.writeRegistry(nil)

	// Goroutines, each with its exit:
	//   reader:      ends at the end of output (EIO) or when the master closes
	//   screen, transcript followers and watchLoop: end when stop closes
	//   serve:       ends when ln closes
	stop := make(chan struct{})
	var wg sync.WaitGroup
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		w.readLoop(c)
	}()
	scrSub := newSubscriber(0, nil)
	w.out.subscribe(scrSub, 0)
	w.out.subscribe(w.tr.sub, 0)
	wg.Add(3)
	go func() { defer wg.Done(); w.scr.follow(w.out, scrSub, stop) }()
	go func() { defer wg.Done(); w.tr.follow(w.out, stop) }()
	go func() { defer wg.Done(); w.watchLoop(stop) }()
	serveDone := make(chan struct{})
	go func() { defer close(serveDone); w.serve(ln) }()

	if err := w.opts.Notify("READY=1\nSTATUS=" + w.statusLine(proto.StateRunning, verdict{kind: proto.WatchGrace})); err != nil {
		w.logOnce("notify", "sd_notify failed", "err", err)
	}

	// Wait for the agent to end, or end it.
	exited := make(chan struct{})
	go func() { defer close(exited); w.awaitExit(c, readerDone) }()
	reason, final := "exited", proto.StateExited
	selfStopped := false
	select {
	case <-exited:
	case <-ctx.Done():
		w.mu.Lock()
		reason = w.stopReason
		w.mu.Unlock()
		if reason == "" {
			reason = "stopped: the worker was told to stop"
		}
		final = proto.StateStopped
		w.log.Info("stopping the agent", "reason", reason)
		w.terminate(c, exited)
	case <-w.staleCh:
		// No watchdog of systemd's: the worker ends the stale agent
		// itself and fails, so its supervisor (a Job) starts it again.
		w.mu.Lock()
		reason = w.stopReason
		w.mu.Unlock()
		final, selfStopped = proto.StateStopped, true
		w.log.Info("stopping the stale agent; exiting 1 for a restart", "reason", reason)
		w.terminate(c, exited)
	case <-w.removeCh:
		reason, final = "removed", proto.StateRemoved
		w.log.Info("session removed; ending the agent")
		w.terminate(c, exited)
	case <-w.endCh:
		w.mu.Lock()
		why := w.endReason
		w.mu.Unlock()
		reason, final = "completed: "+why, proto.StateCompleted
		w.log.Info("the agent's work is done; ending it", "reason", why)
		w.tr.writeMarker(fmt.Sprintf("run %d ended: %s", w.run, why))
		w.interrupt(c, exited)
	}
	// A remove or end answered before this point is honoured however the
	// wait ended (the agent may have exited just before it came); later
	// ones are refused, so none is answered and then ignored.
	w.mu.Lock()
	w.ended = true
	switch {
	case w.removing:
		reason, final = "removed", proto.StateRemoved
	case w.ending:
		reason, final = "completed: "+w.endReason, proto.StateCompleted
	}
	w.mu.Unlock()
	w.releaseHolds()
	c.ptm.Close()
	c.reap()

	code, sig := c.exitInfo()
	e := &proto.ExitInfo{Code: code, Signal: sig, Reason: reason, Time: time.Now(), Run: w.run, Offset: w.out.head(), ArgvKind: kind}
	w.log.Info("agent ended", "exit", e.String(), "reason", reason)
	w.out.close()
	if err := w.tr.mark(fmt.Sprintf("run %d exit: %s; reason: %s", w.run, e.String(), reason), 10*time.Second); err != nil {
		w.log.Error("transcript exit marker", "err", err)
	}
	// The registry first: once a client (the helper, so the controller)
	// is told the run ended, the end must survive a kill -9 of this
	// worker. Told first and killed before the write, the worker was
	// restarted by systemd on a registry that said running, and resumed
	// a phase the controller had already moved past (the chaos run, seed
	// 202: a restarted reviewer beside the retro).
	w.writeRegistry(func(r *proto.Registry) { r.State, r.LastExit, r.ChildPID = final, e, 0 })
	if w.opts.beforeAnnounceEnd != nil {
		w.opts.beforeAnnounceEnd()
	}
	w.finish(final, e)
	w.opts.Notify("STOPPING=1\nSTATUS=" + w.statusLine(final, verdict{}) + " (" + e.String() + ")")
	w.linger()

	ln.Close()
	<-serveDone
	w.closeConns()
	close(stop)
	wg.Wait()

	switch {
	case selfStopped && final == proto.StateStopped:
		return &ExitError{SessionID: s.SessionID, Exit: *e}
	case final == proto.StateRemoved || final == proto.StateStopped || final == proto.StateCompleted || e.Success():
		return nil
	default:
		return &ExitError{SessionID: s.SessionID, Exit: *e}
	}
}

// readLoop copies PTY output into the ring until the end of output (EIO
// once every holder of the terminal closed it) or the master is closed.
func (w *worker) readLoop(c *child) {
	buf := make([]byte, readBuf)
	for {
		n, err := c.ptm.readAvailable(buf)
		if n > 0 {
			w.out.write(buf[:n])
		}
		if err != nil {
			if !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) {
				w.log.Warn("pty read ended", "err", err)
			}
			return
		}
	}
}

// awaitExit returns once the agent was waited for and its output drained.
// When the agent is gone but others still hold its terminal (a background
// job), those get DrainGrace, then SIGKILL, then the master is closed.
func (w *worker) awaitExit(c *child, readerDone <-chan struct{}) {
	select {
	case <-readerDone:
		<-c.done
		return
	case <-c.done:
	}
	t := time.NewTimer(w.opts.DrainGrace)
	defer t.Stop()
	select {
	case <-readerDone:
		return
	case <-t.C:
	}
	w.log.Info("the agent exited but its terminal is still held; killing its process group")
	c.killAll(syscall.SIGKILL)
	t.Reset(w.opts.DrainGrace)
	select {
	case <-readerDone:
		return
	case <-t.C:
	}
	c.ptm.Close()
	<-readerDone
}

// terminate ends the agent like a closed terminal does (SIGHUP, then
// SIGCONT for stopped jobs), and SIGKILLs its groups after KillGrace. It
// returns once exited is closed.
func (w *worker) terminate(c *child, exited <-chan struct{}) {
	c.killAll(syscall.SIGHUP)
	c.killAll(syscall.SIGCONT)
	t := time.NewTimer(w.opts.KillGrace)
	defer t.Stop()
	select {
	case <-exited:
		return
	case <-t.C:
	}
	w.log.Warn("the agent did not end after SIGHUP; killing it", "grace", w.opts.KillGrace)
	c.killAll(syscall.SIGKILL)
	<-exited
}

// interrupt ends the agent as Ctrl-C would its whole job: SIGINT to its
// process groups (Claude Code exits 0 at once, even mid-turn), then, after
// EndGrace, as terminate does. It returns once exited is closed.
func (w *worker) interrupt(c *child, exited <-chan struct{}) {
	c.killAll(syscall.SIGINT)
	t := time.NewTimer(w.opts.EndGrace)
	defer t.Stop()
	select {
	case <-exited:
		return
	case <-t.C:
	}
	w.log.Warn("the agent did not end after SIGINT; hanging up on it", "grace", w.opts.EndGrace)
	w.terminate(c, exited)
}

// linger waits, at most ExitLinger, until every attached or watching
// connection got the exit event.
func (w *worker) linger() {
	deadline := time.Now().Add(w.opts.ExitLinger)
	for time.Now().Before(deadline) {
		pending := false
		w.mu.Lock()
		for c := range w.conns {
			if (c.attached.Load() || c.watching.Load()) && !c.exitSent.Load() {
				select {
				case <-c.done:
				default:
					pending = true
				}
			}
		}
		w.mu.Unlock()
		if !pending {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *worker) closeConns() {
	w.mu.Lock()
	conns := make([]*conn, 0, len(w.conns))
	for c := range w.conns {
		conns = append(conns, c)
	}
	w.mu.Unlock()
	for _, c := range conns {
		c.shutdown()
	}
}

func (w *worker) dropConn(c *conn) {
	c.detach()
	w.dropHolds(c)
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
}

// writeRegistry writes the registry entry after applying edit.
func (w *worker) writeRegistry(edit func(r *proto.Registry)) {
	s := w.spec
	w.mu.Lock()
	r := proto.Registry{
		Version: proto.RegistryVersion, SessionID: s.SessionID, AgentSession: s.AgentSession, Name: s.Name, Team: s.Team,
		Issue: s.Issue, Mode: s.Mode, Role: s.Role, Unit: s.Unit,
		DaemonInstanceID: s.DaemonInstanceID, Token: s.Token,
		WorkerPID: os.Getpid(), SocketPath: s.SocketPath(), TranscriptPath: s.TranscriptPath(),
		Owner: w.lease, State: w.state, Run: w.run, ArgvKind: w.argvKind,
		StartedAt: w.startedAt, UpdatedAt: time.Now(), LastExit: w.reg.LastExit,
	}
	if w.child != nil {
		r.ChildPID = w.child.pid
	}
	if edit != nil {
		edit(&r)
	}
	w.reg = r
	w.mu.Unlock()
	if err := proto.WriteRegistry(s.RegistryPath(), &r); err != nil {
		w.log.Error("registry not written", "err", err)
	}
}

// logOnce logs a recurring problem the first time only.
func (w *worker) logOnce(key, msg string, args ...any) {
	w.mu.Lock()
	seen := w.logged[key]
	w.logged[key] = true
	w.mu.Unlock()
	if !seen {
		w.log.Warn(msg, args...)
	}
}

// setLiveness records a watchdog verdict and tells watchers when the
// waiting or stale state changed, or always with force.
func (w *worker) setLiveness(v verdict, force bool) {
	w.mu.Lock()
	old := w.liveness
	w.liveness = v
	w.mu.Unlock()
	if force || (old.kind == proto.WatchWaiting) != (v.kind == proto.WatchWaiting) || (old.kind == proto.WatchStale) != (v.kind == proto.WatchStale) || old.question != v.question {
		w.broadcastState()
	}
}

// broadcastState pushes a state event to watchers.
func (w *worker) broadcastState() {
	f, err := eventFrame(proto.EventState, w.stateEvent())
	if err != nil {
		w.log.Error("encode state event", "err", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		if c.watching.Load() {
			c.enqueue(ctrlItem{frame: f})
		}
	}
}

// quoteArgv renders argv for the transcript, quoting words that need it.
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`;&|<>()*?[]#~") {
			q[i] = fmt.Sprintf("%q", a)
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// identity scopes log to the session of s: the attributes that become its
// journal fields (internal/journal: team, issue, mode, session, unit) and
// its name. The worker sets them on its own lines: systemd 252 does not
// apply a user unit's LogExtraFields=.
func identity(log *slog.Logger, s *proto.Spec) *slog.Logger {
	args := []any{"team", s.Team, "session", s.AgentSessionID(), "name", s.Name}
	for _, a := range []struct{ k, v string }{{"issue", s.Issue}, {"mode", s.Mode}, {"unit", s.Unit}} {
		if a.v != "" {
			args = append(args, a.k, a.v)
		}
	}
	return log.With(args...)
}

// ringSize is RingSize with the default applied.
func ringSize(s *proto.Spec) int {
	if s.RingSize == 0 {
		return proto.DefaultRingSize
	}
	return s.RingSize
}

// termSize is the initial PTY size with the default applied.
func termSize(s *proto.Spec) (cols, rows int) {
	if s.Cols == 0 {
		return proto.DefaultCols, proto.DefaultRows
	}
	return s.Cols, s.Rows
}

// agentSandbox is the agent's sandbox with the worker's own socket added to
// what it may connect to (its hooks); nil without one.
func agentSandbox(s *proto.Spec) *api.Sandbox {
	if s.Sandbox == nil {
		return nil
	}
	sb := *s.Sandbox
	sb.Connect = append(slices.Clone(sb.Connect), s.SocketPath())
	return &sb
}
