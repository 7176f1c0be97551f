package activation

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sync/errgroup"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/privdir"
	"github.com/legion-dev/legion/internal/unixsock"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
)

// Options configure a Helper. The zero value of every field has a useful
// default, filled in by New.
type Options struct {
	// Logger receives the helper's log; nil discards it.
	Logger *slog.Logger

	// Listeners are served as they are. Nil means: the listeners of socket
	// activation (LISTEN_FDS) when present, else the helper's own at
	// SocketPath.
	Listeners []net.Listener
	// SocketPath is where an unactivated helper listens; "" means
	// $XDG_RUNTIME_DIR/legion/legion.sock.
	SocketPath string

	// RuntimeDir is $XDG_RUNTIME_DIR/legion (worker sockets); StateDir is
	// $XDG_STATE_HOME/legion (daemon-id, specs, registry, transcripts).
	RuntimeDir string
	StateDir   string

	// PeerUID is the only UID allowed to talk to the helper (SO_PEERCRED);
	// nil means the helper's own UID. Tests set another to exercise the
	// refusal.
	PeerUID *int

	// MaxRequest bounds a request line in bytes; 0 means defaultMaxRequest.
	MaxRequest int

	// IdleExit makes Run return after this long with no client connected
	// and no command running; 0 means never. Socket activation starts the
	// helper again on the next connection.
	IdleExit time.Duration

	// Binary is the legion-pty-worker executable that worker units run;
	// "" means proto.FindBinary's, looked up at each launch (so a
	// missing worker fails that launch, with how to install it, not the
	// helper).
	Binary string

	// KubeBinary is the legion-kube program the helper runs for sessions
	// on clusters; "" means the one beside the legion executable.
	KubeBinary string

	// NoSystemd makes a helper for a machine with no user manager (the
	// controller's pod on a cluster): it never connects to systemd, has
	// no sessions on this machine to recover or follow, refuses a spawn
	// on this machine (engine "systemd") with ErrNoSystemd, and serves
	// sessions on clusters.
	NoSystemd bool
	// KubeTargets are followed from the helper's start: their sessions
	// are listed before READY=1, so a controller that starts after it
	// sees the Jobs a previous controller started. A target that cannot
	// be followed fails Run.
	KubeTargets []api.KubeTarget

	// RecoveryAttempts is how often recovery tries to reach a worker that
	// does not answer before it quarantines the entry (0 means 5), waiting
	// RecoveryBackoff (0 means 100ms, doubling) between tries.
	RecoveryAttempts int
	RecoveryBackoff  time.Duration

	// BootID is the ID of the running boot, which recovery compares with
	// the boot of each entry's worker to find the sessions a reboot cut
	// (see recovery.go); "" means the kernel's (proto.BootID). Tests
	// set another to play the first helper start after a reboot.
	BootID string

	// BeforeRecovery, when set, runs after the listeners accept
	// connections and before recovery starts; the barrier holds until it
	// returns. Tests use it to observe the "recovering" answer.
	BeforeRecovery func(ctx context.Context) error

	// beforeChecks, when set, runs after recovery listed the sessions and
	// before it checks their workers. Tests use it to see the list served
	// meanwhile.
	beforeChecks func(ctx context.Context) error

	// beforeSpecWrite, when set, runs in launch just before the spec and
	// the registry entry of a new start are written. Tests use it to start
	// the unit by hand at that moment.
	beforeSpecWrite func(unit string)

	// watchQueue, when set, replaces watchQueue (events a sessions.watch
	// subscriber may be behind). Tests make it small.
	watchQueue int

	// Notify sends sd_notify state lines; nil means go-systemd's SdNotify
	// (a no-op without NOTIFY_SOCKET).
	Notify func(state string)
}

// ErrNoSystemd is why a helper with Options.NoSystemd refuses a session
// on this machine.
var ErrNoSystemd = errors.New(`this helper has no systemd user manager (a controller's pod on a cluster): it starts no session on this machine, only on a cluster; give the team engine = "kubernetes"`)

// Helper is the control plane daemon. Create it with New, run it with Run.
type Helper struct {
	opts     Options
	log      *slog.Logger
	daemonID string
	bootID   string // "" when unknown: then no session counts as lost
	peerUID  int

	started time.Time // when Run started
	// admitMu admits the spawns with a machine cap one at a time.
	admitMu    sync.Mutex
	recovering atomic.Bool
	// listable: recovery's first phase is done, so sessions.list is
	// served while the workers are checked (recovery.go).
	listable atomic.Bool

	mu        sync.Mutex
	active    int       // connections being served
	idleSince time.Time // when active last dropped to 0
	listeners []net.Listener

	sessions *table
	kube     *kubeSessions // sessions on clusters (engine kubernetes)
	mgr      *units.Manager
	events   *sessionEvents
	// followers counts the goroutines that follow a worker connection
	// (see follow); each ends when its connection is closed.
	followers sync.WaitGroup
}

// New checks opts and fills in defaults; it does no I/O.
func New(opts Options) (*Helper, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxRequest <= 0 {
		opts.MaxRequest = defaultMaxRequest
	}
	if opts.RecoveryAttempts <= 0 {
		opts.RecoveryAttempts = 5
	}
	if opts.RecoveryBackoff <= 0 {
		opts.RecoveryBackoff = 100 * time.Millisecond
	}
	if opts.Notify == nil {
		opts.Notify = func(state string) { daemon.SdNotify(false, state) }
	}
	if opts.RuntimeDir == "" || opts.StateDir == "" {
		rt, st, err := defaultDirs()
		if err != nil {
			return nil, err
		}
		if opts.RuntimeDir == "" {
			opts.RuntimeDir = rt
		}
		if opts.StateDir == "" {
			opts.StateDir = st
		}
	}
	for _, d := range []string{opts.RuntimeDir, opts.StateDir} {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("helper directory %q: want an absolute path", d)
		}
	}
	if opts.SocketPath == "" {
		opts.SocketPath = filepath.Join(opts.RuntimeDir, api.SocketName)
	}
	h := &Helper{opts: opts, log: opts.Logger, peerUID: os.Getuid()}
	if opts.PeerUID != nil {
		h.peerUID = *opts.PeerUID
	}
	h.recovering.Store(true)
	return h, nil
}

// defaultDirs returns $XDG_RUNTIME_DIR/legion and $XDG_STATE_HOME/legion
// (~/.local/state/legion when XDG_STATE_HOME is unset).
func defaultDirs() (runtimeDir, stateDir string, err error) {
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return "", "", api.ErrNoRuntimeDir
	}
	st := os.Getenv("XDG_STATE_HOME")
	if st == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", "", fmt.Errorf("find the state directory: XDG_STATE_HOME is unset and %w", err)
		}
		st = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(rt, "legion"), filepath.Join(st, "legion"), nil
}

// DaemonID is the helper's instance id, known once Run has started.
func (h *Helper) DaemonID() string { return h.daemonID }

// errIdle ends Run's group when the helper has been idle long enough.
var errIdle = errors.New("idle")

// Run serves until ctx is done or, with IdleExit, until the helper has
// been idle that long; both are a clean end (nil). It answers every
// command with "recovering" until recovery is done, then sends READY=1;
// but sessions.list, which it answers once recovery has listed the
// sessions, while their workers are checked (see recovery.go).
// Run closes its listeners (an activated socket stays open in systemd, so
// the next connection starts a new helper) and every client connection
// before it returns; workers are never touched on the way out.
func (h *Helper) Run(ctx context.Context) error {
	start := time.Now()
	h.started = start
	if err := privdir.Ensure(h.opts.StateDir); err != nil {
		return err
	}
	if err := privdir.Ensure(h.opts.RuntimeDir); err != nil {
		return err
	}
	id, err := loadDaemonID(filepath.Join(h.opts.StateDir, DaemonIDFile), h.log)
	if err != nil {
		return err
	}
	h.daemonID = id
	h.log = h.log.With("daemon_id", id)
	h.bootID = h.opts.BootID
	if h.bootID == "" {
		if h.bootID, err = proto.BootID(); err != nil {
			h.log.Warn("no boot id: sessions a reboot cut are pruned, not listed as lost", "err", err)
		}
	}

	ls := h.opts.Listeners
	if ls == nil {
		if ls, err = activationListeners(h.log); err != nil {
			return err
		}
	}
	if ls == nil {
		l, err := listen(h.opts.SocketPath)
		if err != nil {
			return err
		}
		ls = []net.Listener{l}
		h.log.Info("listening (not socket-activated)", "socket", h.opts.SocketPath)
	}
	h.listeners = ls
	h.idleSince = time.Now()

	if !h.opts.NoSystemd {
		cctx, cancel := context.WithTimeout(ctx, systemdTimeout)
		mgr, err := units.Connect(cctx)
		cancel()
		if err != nil {
			closeListeners(ls)
			return fmt.Errorf("helper: %w", err)
		}
		defer mgr.Close()
		h.mgr = mgr
	}
	h.sessions = newTable(h)
	defer h.followers.Wait()
	defer h.sessions.closeAll()
	h.events = newSessionEvents()
	h.events.queue = h.opts.watchQueue
	h.kube = newKubeSessions(ctx, h)

	h.opts.Notify("STATUS=recovering sessions")
	// Connections live on connCtx, not on gctx: an idle exit lets a
	// connection that raced in finish (for connGrace), an error or a
	// signal ends them at once.
	connCtx, cancelConns := context.WithCancel(ctx)
	defer cancelConns()
	var conns sync.WaitGroup
	g, gctx := errgroup.WithContext(ctx)
	for _, l := range ls {
		g.Go(func() error { return h.accept(connCtx, gctx, l, &conns) })
	}
	g.Go(func() error {
		// Ends when gctx is done: listeners closed so accept loops end.
		<-gctx.Done()
		closeListeners(ls)
		return nil
	})
	subscribed := make(chan struct{})
	g.Go(func() error {
		// Recovery ends on its own (bounded retries) or with gctx.
		select {
		case <-subscribed:
		case <-gctx.Done():
			return nil
		}
		if h.opts.BeforeRecovery != nil {
			if err := h.opts.BeforeRecovery(gctx); err != nil {
				return fmt.Errorf("before recovery: %w", err)
			}
		}
		var (
			counts api.RecoveryCounts
			err    error
		)
		if h.mgr != nil { // without systemd no session of this machine is to recover
			if counts, err = h.recover(gctx); err != nil {
				return err
			}
		}
		// The given targets are followed before READY=1 (a controller
		// must not decide on a list that misses their Jobs), and
		// before any command is served.
		if err := h.kube.follow(gctx, h.opts.KubeTargets); err != nil {
			return err
		}
		h.recovering.Store(false)
		// Sessions on clusters: followed again in the background (a
		// cluster that does not answer must not hold this helper up).
		go h.kube.restore()
		// What recovery read is current: publish it as it is. Changes of
		// units since recovery listed them are marked, refreshed next.
		for _, s := range h.sessions.all() {
			h.events.publish(s)
		}
		h.events.wake()
		h.log.Info("recovery done", "recovered", counts.Recovered, "pruned", counts.Pruned, "lost", counts.Lost,
			"quarantined", counts.Quarantined, "failed", counts.Failed, "took", time.Since(start).Round(time.Millisecond))
		h.opts.Notify(fmt.Sprintf("READY=1\nSTATUS=serving; recovered %d, pruned %d, lost %d, quarantined %d, failed %d",
			counts.Recovered, counts.Pruned, counts.Lost, counts.Quarantined, counts.Failed))
		return nil
	})
	if h.opts.IdleExit > 0 {
		g.Go(func() error { return h.idleWatch(gctx) })
	}
	g.Go(func() error { return h.followSessions(gctx, subscribed) })
	err = g.Wait()
	if errors.Is(err, errIdle) {
		waitTimeout(&conns, connGrace)
	}
	cancelConns()
	conns.Wait() // each connection ends when connCtx is done
	switch {
	case errors.Is(err, errIdle):
		return nil
	case err != nil && ctx.Err() == nil:
		return err
	}
	h.opts.Notify("STOPPING=1")
	return nil
}

// connGrace is how long an idle exit waits for a connection accepted in
// its last moment.
const connGrace = 5 * time.Second

// waitTimeout waits for wg at most d.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	// Ends when wg is done; Run cancels the connections right after a
	// timeout, so that happens soon either way.
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

func closeListeners(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

// accept serves one listener until it is closed (gctx done). Connections
// are served with ctx, which Run cancels after the accept loops ended.
func (h *Helper) accept(ctx, gctx context.Context, l net.Listener, conns *sync.WaitGroup) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if gctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			h.log.Warn("accept failed", "err", err)
			select {
			case <-time.After(50 * time.Millisecond): // EMFILE and friends
				continue
			case <-gctx.Done():
				return nil
			}
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			c.Close()
			continue
		}
		h.mu.Lock()
		h.active++
		h.mu.Unlock()
		conns.Add(1)
		// Each connection's goroutine ends when the peer closes, on a
		// protocol error, or when ctx is done (its conn is closed then).
		go func() {
			defer conns.Done()
			defer h.connDone()
			h.serveConn(ctx, uc)
		}()
	}
}

func (h *Helper) connDone() {
	h.mu.Lock()
	h.active--
	if h.active == 0 {
		h.idleSince = time.Now()
	}
	h.mu.Unlock()
}

// idleWatch returns errIdle once no connection has been open for IdleExit
// (and recovery is done), or nil when ctx ends.
func (h *Helper) idleWatch(ctx context.Context) error {
	t := time.NewTimer(h.opts.IdleExit)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		h.mu.Lock()
		wait := h.opts.IdleExit
		idle := time.Since(h.idleSince)
		quiet := h.active == 0 && !h.recovering.Load()
		h.mu.Unlock()
		if quiet && idle >= h.opts.IdleExit {
			h.log.Info("idle: exiting until the next connection", "idle_for", idle.Round(time.Millisecond))
			h.opts.Notify("STOPPING=1\nSTATUS=idle exit")
			return errIdle
		}
		if quiet {
			wait = h.opts.IdleExit - idle
		}
		t.Reset(wait)
	}
}

// serveConn answers one client until it closes.
func (h *Helper) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	cc := &clientConn{c: c}
	cred, err := unixsock.Peer(c, uint32(h.peerUID))
	uid, pid := cred.UID, cred.PID
	cc.pid = pid
	if errors.Is(err, unixsock.ErrPeerNotAllowed) {
		h.log.Warn("refused a client of another user", "peer_uid", uid, "peer_pid", pid)
		cc.send(api.Response{V: api.ProtocolVersion, Error: api.Errorf(api.CodeUnauthorized,
			"uid %d may not use this helper: it serves uid %d only", uid, h.peerUID)}, nil)
		return
	}
	if err != nil {
		h.log.Warn("refused a client: cannot read its credentials", "err", err)
		cc.send(api.Response{V: api.ProtocolVersion, Error: api.Errorf(api.CodeUnauthorized, "cannot verify your credentials: %v", err)}, nil)
		return
	}
	br := bufio.NewReaderSize(c, 16<<10)
	if msg := agentPeer(pid); msg != "" {
		h.log.Warn("refused a client that is an agent of a session", "peer_pid", pid, "why", msg)
		// Its first request is read, and answered: a close with it unread
		// would reset the connection, and the client would never see why.
		resp := api.Response{V: api.ProtocolVersion, Error: api.Errorf(api.CodeUnauthorized, "%s", msg)}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := readLine(br, h.opts.MaxRequest); err == nil {
			req, _ := decodeRequest(line)
			resp.ID = req.ID
		}
		cc.send(resp, nil)
		return
	}
	for {
		line, err := readLine(br, h.opts.MaxRequest)
		if errors.Is(err, errLineTooLong) {
			h.log.Warn("refused an oversized request", "peer_pid", pid, "limit", h.opts.MaxRequest)
			cc.send(api.Response{V: api.ProtocolVersion, Error: api.Errorf(api.CodeTooLarge,
				"request line longer than %d bytes: refused, and the connection is closed", h.opts.MaxRequest)}, nil)
			return
		}
		if err != nil {
			return // EOF, or the connection was closed
		}
		req, derr := decodeRequest(line)
		if derr != nil {
			var e *api.Error
			errors.As(derr, &e)
			h.log.Debug("bad request", "peer_pid", pid, "err", derr)
			if cc.send(api.Response{V: api.ProtocolVersion, ID: req.ID, Error: e}, nil) != nil {
				return
			}
			continue
		}
		if err := h.dispatch(ctx, cc, req); err != nil {
			return // the client is gone
		}
	}
}

// handler runs one command. It returns the result (marshalled to JSON),
// optionally a descriptor to pass with the response, or an error (an
// *Error goes out as is; anything else as internal).
type handler func(h *Helper, ctx context.Context, cc *clientConn, req api.Request) (result any, fd *os.File, err error)

// commands are the commands of protocol version 1.
var commands = map[string]handler{
	api.CmdSessionsList:    (*Helper).cmdList,
	api.CmdSessionsStatus:  (*Helper).cmdStatus,
	api.CmdSessionsLogs:    (*Helper).cmdLogs,
	api.CmdSessionsKill:    (*Helper).cmdKill,
	api.CmdSend:            (*Helper).cmdSend,
	api.CmdAttach:          (*Helper).cmdAttach,
	api.CmdSpawn:           (*Helper).cmdSpawn,
	api.CmdSessionsWatch:   (*Helper).cmdWatch,
	api.CmdTeamStop:        (*Helper).cmdTeamStop,
	api.CmdSessionsRespond: (*Helper).cmdRespond,
	api.CmdSessionsEnd:     (*Helper).cmdEnd,
	api.CmdSessionsReset:   (*Helper).cmdReset,
}

// dispatch runs req and sends its final response. It returns an error only
// when the response cannot be written (the client is gone).
func (h *Helper) dispatch(ctx context.Context, cc *clientConn, req api.Request) error {
	if h.recovering.Load() && (req.Cmd != api.CmdSessionsList || !h.listable.Load()) {
		return cc.send(api.Response{V: api.ProtocolVersion, ID: req.ID, Error: api.Errorf(api.CodeRecovering,
			"the helper is recovering sessions after its start; retry shortly")}, nil)
	}
	hf, ok := commands[req.Cmd]
	if !ok {
		return cc.send(api.Response{V: api.ProtocolVersion, ID: req.ID, Error: api.Errorf(api.CodeUnknownCommand,
			"unknown command %q (protocol version %d knows %s)", truncateText(req.Cmd, 40), api.ProtocolVersion, commandList())}, nil)
	}
	t0 := time.Now()
	result, fd, err := hf(h, ctx, cc, req)
	if fd != nil {
		defer fd.Close()
	}
	resp := api.Response{V: api.ProtocolVersion, ID: req.ID}
	if err != nil && ctx.Err() != nil {
		// Shutting down: the connection is being closed; say so if it
		// still can be said, as a retryable error.
		err = api.Errorf(api.CodeUnavailable, "%s: the helper is stopping; retry (legion.socket starts it again)", req.Cmd)
	}
	if err != nil {
		var e *api.Error
		if !errors.As(err, &e) {
			h.log.Error("command failed", "cmd", req.Cmd, "err", err)
			e = api.Errorf(api.CodeInternal, "%s: %v", req.Cmd, err)
		}
		h.log.Debug("command refused", "cmd", req.Cmd, "code", e.Code, "err", e.Message)
		resp.Error = e
		return cc.send(resp, nil)
	}
	raw, e := marshalResult(result)
	if e != nil {
		resp.Error = e
		return cc.send(resp, nil)
	}
	resp.OK, resp.Result = true, raw
	h.log.Debug("command done", "cmd", req.Cmd, "took", time.Since(t0))
	return cc.send(resp, fd)
}

func commandList() string {
	return api.CmdSessionsList + ", " + api.CmdSessionsStatus + ", " + api.CmdSessionsLogs + ", " + api.CmdSessionsKill + ", " +
		api.CmdSend + ", " + api.CmdAttach + ", " + api.CmdSpawn + ", " + api.CmdSessionsWatch + ", " + api.CmdTeamStop + ", " +
		api.CmdSessionsRespond + ", " + api.CmdSessionsEnd + ", " + api.CmdSessionsReset
}

// clientConn is one client connection's write side.
type clientConn struct {
	c   *net.UnixConn
	pid int
	mu  sync.Mutex
}

// send writes one response line, with fd passed alongside (SCM_RIGHTS)
// when not nil.
func (cc *clientConn) send(resp api.Response, fd *os.File) error {
	if resp.V == 0 {
		resp.V = api.ProtocolVersion
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	b = append(b, '\n')
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	defer cc.c.SetWriteDeadline(time.Time{})
	if fd == nil {
		_, err = cc.c.Write(b)
		return err
	}
	n, _, err := cc.c.WriteMsgUnix(b, unixRights(fd), nil)
	if err != nil {
		return err
	}
	if n < len(b) {
		_, err = cc.c.Write(b[n:])
	}
	return err
}

// writeTimeout bounds one response write: a client that does not read is
// dropped rather than holding the helper.
const writeTimeout = 30 * time.Second

// errLineTooLong is returned by readLine for a line over its limit.
var errLineTooLong = errors.New("line too long")

// readLine reads one '\n'-terminated line of at most max bytes (newline
// included) without buffering more than that.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// agentPeer says why the process pid may not use the helper: it runs in a
// worker's unit, as an agent of a dispatched session (or what it started),
// which reaches Legion only through its own worker (`legion hook`). A
// `legion spawn` session is a person's command and may. "" when it may;
// a peer whose cgroup cannot be read may not.
func agentPeer(pid int) string {
	cg, err := unixsock.Cgroup(pid)
	if err != nil {
		return fmt.Sprintf("cannot tell whether pid %d is an agent of a session: %v", pid, err)
	}
	if unit, mode := unixsock.WorkerUnit(cg); unit != "" && mode != api.ModeSpawn {
		return fmt.Sprintf("pid %d runs in the worker unit %s: an agent of a session may not use Legion's helper; it reaches Legion only through its own worker", pid, unit)
	}
	return ""
}
