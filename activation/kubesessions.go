package activation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/ptyworker/proto"
	"golang.org/x/sys/unix"
)

// kubeTargetsFile lists the Kubernetes targets the helper has run sessions
// on (JSON, 0600 in the state dir), so that a helper started again
// follows their sessions before anyone spawns there.
const kubeTargetsFile = "kubernetes-targets.json"

// kubeCallTimeout bounds one request to the engine process (a spawn waits
// for a finished Job of the same session to go, up to 2 minutes);
// kubeReadTimeout one that reads its informers' caches (a list, a find),
// so that an engine in trouble does not hold up the machine's sessions.
const (
	kubeCallTimeout = 3 * time.Minute
	kubeReadTimeout = 10 * time.Second
)

// kubeSessions are the helper's sessions on clusters (engine
// "kubernetes"). The Kubernetes client lives in a process of its own,
// legion-kube engine (package activation/kube; see package wire for why),
// started on the first spawn on a cluster and at every helper start when
// kubeTargetsFile names targets; it ends with the helper. Its sessions
// are Jobs: the helper lists, follows, kills and stops them through it,
// and keeps no file of theirs but the targets: the cluster holds their
// state.
type kubeSessions struct {
	h    *Helper
	life context.Context // the helper's run

	mu      sync.Mutex
	targets map[string]api.KubeTarget // by key: every target spawned on
	proc    *kubeProc                 // nil until needed, or after it died

	agents kubeAgents // the running sessions' agent states (kubeagents.go)
}

func newKubeSessions(life context.Context, h *Helper) *kubeSessions {
	return &kubeSessions{h: h, life: life, targets: map[string]api.KubeTarget{}}
}

// targetsLocked are the known targets, in key order; k.mu held.
func (k *kubeSessions) targetsLocked() []api.KubeTarget {
	ts := make([]api.KubeTarget, 0, len(k.targets))
	for _, t := range k.targets {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b api.KubeTarget) int { return strings.Compare(targetKey(a), targetKey(b)) })
	return ts
}

func targetKey(t api.KubeTarget) string {
	return t.Kubeconfig + "\x00" + t.Context + "\x00" + t.Namespace
}

// kubeProc is one run of legion-kube engine.
type kubeProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	wmu    sync.Mutex
	mu     sync.Mutex
	nextID uint64
	wait   map[uint64]chan wire.Reply
	dead   chan struct{} // closed when its stdout ended
	err    error         // why, once dead
}

// process returns the running engine process, starting it (and following
// every known target again) when there is none.
func (k *kubeSessions) process(ctx context.Context) (*kubeProc, error) {
	k.mu.Lock()
	if p := k.proc; p != nil {
		select {
		case <-p.dead:
		default:
			k.mu.Unlock()
			return p, nil
		}
	}
	bin := k.h.opts.KubeBinary
	if bin == "" {
		var err error
		if bin, err = findKubeBinary(); err != nil {
			k.mu.Unlock()
			return nil, api.Errorf(api.CodeBadRequest, "%v", err)
		}
	}
	p, err := startKubeProc(k.life, bin, k.h)
	if err != nil {
		k.mu.Unlock()
		return nil, err
	}
	k.proc = p
	targets := k.targetsLocked()
	k.mu.Unlock()
	for _, t := range targets {
		if _, err := p.call(ctx, wire.Request{Op: wire.OpStart, Target: &t}); err != nil {
			k.h.log.Error("cannot follow the sessions of a Kubernetes target", "context", t.Context, "namespace", t.Namespace, "err", err)
		}
	}
	return p, nil
}

// findKubeBinary is legion-kube as the worker's program is found: beside
// the legion executable, else in the libexec directory.
func findKubeBinary() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return proto.FindProgram(exe, wire.BinaryName)
}

func startKubeProc(life context.Context, bin string, h *Helper) (*kubeProc, error) {
	cmd := exec.Command(bin, "engine")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Stderr = &logWriter{h: h}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s engine: %w", bin, err)
	}
	p := &kubeProc{cmd: cmd, stdin: stdin, wait: map[uint64]chan wire.Reply{}, dead: make(chan struct{})}
	h.log.Info("started the Kubernetes engine", "pid", cmd.Process.Pid)
	go p.read(stdout, h)
	go func() {
		// The engine ends with the helper: its stdin closes, it returns.
		select {
		case <-life.Done():
			stdin.Close()
			select {
			case <-p.dead:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
			}
		case <-p.dead:
		}
		cmd.Wait()
	}()
	return p, nil
}

// read routes the engine's replies to their callers and its events to
// sessions.watch, until its stdout ends.
func (p *kubeProc) read(r io.Reader, h *Helper) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var rep wire.Reply
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			h.log.Error("unreadable line from the Kubernetes engine", "err", err)
			continue
		}
		if rep.ID == 0 {
			if rep.Event != nil {
				h.events.publishView(h.kube.withAgent(*rep.Event), h.log)
			}
			continue
		}
		p.mu.Lock()
		ch := p.wait[rep.ID]
		delete(p.wait, rep.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
	p.mu.Lock()
	p.err = orErr(sc.Err(), errors.New("it exited"))
	close(p.dead)
	p.mu.Unlock()
	h.log.Warn("the Kubernetes engine ended; started again on the next request", "err", p.err)
}

func orErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// call sends req and waits for its reply.
func (p *kubeProc) call(ctx context.Context, req wire.Request) (wire.Reply, error) {
	ch := make(chan wire.Reply, 1)
	p.mu.Lock()
	select {
	case <-p.dead:
		err := p.err
		p.mu.Unlock()
		return wire.Reply{}, api.Errorf(api.CodeUnavailable, "the Kubernetes engine ended (%v); retry", err)
	default:
	}
	p.nextID++
	req.ID = p.nextID
	p.wait[req.ID] = ch
	p.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return wire.Reply{}, err
	}
	p.wmu.Lock()
	_, err = p.stdin.Write(append(b, '\n'))
	p.wmu.Unlock()
	if err != nil {
		return wire.Reply{}, api.Errorf(api.CodeUnavailable, "the Kubernetes engine does not take requests (%v); retry", err)
	}
	ctx, cancel := context.WithTimeout(ctx, kubeCallTimeout)
	defer cancel()
	select {
	case rep := <-ch:
		if rep.Error != nil {
			return rep, rep.Error
		}
		return rep, nil
	case <-p.dead:
		return wire.Reply{}, api.Errorf(api.CodeUnavailable, "the Kubernetes engine ended during %s; retry", req.Op)
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.wait, req.ID)
		p.mu.Unlock()
		return wire.Reply{}, fmt.Errorf("kubernetes %s: %w", req.Op, ctx.Err())
	}
}

// callIfRunning is call on the running engine, and nothing when none
// runs and no target is known (no session on any cluster).
func (k *kubeSessions) callIfRunning(ctx context.Context, req wire.Request) (wire.Reply, error) {
	k.mu.Lock()
	none := len(k.targets) == 0
	k.mu.Unlock()
	if none {
		return wire.Reply{}, nil
	}
	p, err := k.process(ctx)
	if err != nil {
		return wire.Reply{}, err
	}
	return p.call(ctx, req)
}

// remember records t (a spawn there succeeded or its engine started).
func (k *kubeSessions) remember(t api.KubeTarget) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := targetKey(t)
	if old, ok := k.targets[key]; ok && old == t {
		return
	}
	k.targets[key] = t
	ts := k.targetsLocked()
	b, err := json.MarshalIndent(ts, "", "  ")
	if err == nil {
		err = atomicfile.Write(filepath.Join(k.h.opts.StateDir, kubeTargetsFile), append(b, '\n'), 0o600)
	}
	if err != nil {
		k.h.log.Warn("cannot record the Kubernetes targets", "file", kubeTargetsFile, "err", err)
	}
}

// follow starts following the sessions of targets (Options.KubeTargets)
// and returns once their Jobs and pods are listed, or why one cannot be.
func (k *kubeSessions) follow(ctx context.Context, targets []api.KubeTarget) error {
	for _, t := range targets {
		p, err := k.process(ctx)
		if err != nil {
			return fmt.Errorf("follow the sessions of kubernetes namespace %s: %w", t.Namespace, err)
		}
		if _, err := p.call(ctx, wire.Request{Op: wire.OpStart, Target: &t}); err != nil {
			return fmt.Errorf("follow the sessions of kubernetes namespace %s: %w", t.Namespace, err)
		}
		k.remember(t)
		k.h.log.Info("following the sessions of a Kubernetes target", "context", t.Context, "namespace", t.Namespace)
	}
	return nil
}

// restore follows the recorded targets' sessions again. A target that
// cannot be reached is logged, and tried again at the next spawn there.
func (k *kubeSessions) restore() {
	p := filepath.Join(k.h.opts.StateDir, kubeTargetsFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var ts []api.KubeTarget
	if err == nil {
		err = json.Unmarshal(b, &ts)
	}
	if err != nil {
		// Quarantined, not overwritten by the next spawn's record.
		dst, qerr := moveAside(p, filepath.Join(k.h.opts.StateDir, quarantineDir))
		k.h.log.Error("unreadable Kubernetes targets, quarantined: their sessions are not listed until the next spawn there", "file", p, "quarantined", dst, "err", errors.Join(err, qerr))
		return
	}
	k.mu.Lock()
	for _, t := range ts {
		k.targets[targetKey(t)] = t
	}
	k.mu.Unlock()
	if _, err := k.process(k.life); err != nil {
		k.h.log.Error("cannot start the Kubernetes engine", "err", err)
	}
}

// sessions are the sessions on every cluster; none when the engine does
// not answer (logged: the machine's sessions are still listed).
func (k *kubeSessions) sessions(ctx context.Context) []api.Session {
	ctx, cancel := context.WithTimeout(ctx, kubeReadTimeout)
	defer cancel()
	rep, err := k.callIfRunning(ctx, wire.Request{Op: wire.OpList})
	if err != nil {
		k.h.log.Warn("cannot list the sessions on Kubernetes", "err", err)
	}
	return k.withAgents(rep.Sessions)
}

// find is the session named name on a cluster.
func (k *kubeSessions) find(ctx context.Context, name string) (api.Session, bool) {
	ctx, cancel := context.WithTimeout(ctx, kubeReadTimeout)
	defer cancel()
	rep, err := k.callIfRunning(ctx, wire.Request{Op: wire.OpList, Name: name})
	if err != nil {
		k.h.log.Warn("cannot look for a session on Kubernetes", "session", name, "err", err)
	}
	for _, s := range rep.Sessions {
		if s.Name == name {
			return k.withAgent(s), true
		}
	}
	return api.Session{}, false
}

// spawnKube starts l as a Job on target t. The worker's spec is written
// for the pod: its paths are the pod's, and no systemd watchdog
// supervises it (SelfWatchdog).
func (h *Helper) spawnKube(ctx context.Context, l launch, t api.KubeTarget) (api.SpawnResult, error) {
	if s, ok := h.sessions.get(l.name); ok && !s.view().State.Ended() {
		return api.SpawnResult{}, api.Errorf(api.CodeExists, "session %s already runs on this machine (unit %s)", l.name, s.unit)
	}
	if v, ok := h.kube.find(ctx, l.name); ok && v.ID != l.id {
		return api.SpawnResult{}, api.Errorf(api.CodeExists, "spawn: session name %s is taken by session %s on a cluster", l.name, v.ID)
	}
	token, err := proto.NewToken()
	if err != nil {
		return api.SpawnResult{}, err
	}
	spec := &proto.Spec{
		Version: proto.SpecVersion, SessionID: l.id, AgentSession: l.agentSession, Name: l.name, Team: l.team, TeamShort: l.teamShort(),
		Issue: l.issue, Mode: l.mode, Role: l.role, Cwd: l.cwd, Env: l.env, EnvFiles: l.envFiles, ArgvNew: l.argvNew, ArgvResume: l.argvRes, Prepare: l.prepare,
		Agent: l.agent, Instructions: l.instructions, OwnCommands: l.ownCommands, DialogMarkers: l.dialogMarkers, Legion: l.legion,
		SessionFile: l.watch, ResumeMarker: l.resumeMarker, StaleAfter: proto.Duration(l.staleAfter), RingSize: l.ringSize,
		Token: token, DaemonInstanceID: h.daemonID, Unit: l.unit, SelfWatchdog: true,
		Paths: proto.Paths{RuntimeDir: wire.RuntimeDir, StateDir: wire.StateDir},
	}
	if l.watch != "" {
		spec.StartupGrace = proto.Duration(l.startupGrace)
	}
	if err := spec.Validate(); err != nil {
		return api.SpawnResult{}, api.Errorf(api.CodeBadRequest, "spawn: %v", err)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return api.SpawnResult{}, err
	}
	p, err := h.kube.process(ctx)
	if err != nil {
		return api.SpawnResult{}, err
	}
	if _, err := p.call(ctx, wire.Request{Op: wire.OpStart, Target: &t}); err != nil {
		return api.SpawnResult{}, err
	}
	h.kube.remember(t)
	rep, err := p.call(ctx, wire.Request{Op: wire.OpSpawn, Target: &t, Spawn: &wire.Spawn{
		ID: l.id, Name: l.name, Team: l.team, TeamID: l.teamID.String(), Issue: l.issue, Mode: l.mode, Unit: l.unit,
		Spec: b, Socket: spec.SocketPath(), StartLimitBurst: int(l.startLimitBurst), Reuse: l.reuseLive, Files: l.kubeFiles,
		Hooks: l.agent == proto.AgentClaude,
	}})
	if err != nil {
		return api.SpawnResult{}, err
	}
	h.log.Info("spawn on kubernetes", "session", l.name, "namespace", t.Namespace, "job", wire.JobName(l.id), "started", rep.Started)
	return api.SpawnResult{Name: l.name, ID: l.id, Unit: l.unit, Started: rep.Started}, nil
}

// kubeOnly is the answer to a command the helper does not serve for a
// session on a cluster (sessions.reset: a Job failed for good is not
// reset; kill deletes it, keeping the issue's volume, and the next
// dispatch starts a new one).
func kubeOnly(cmd string, v api.Session) error {
	return api.Errorf(api.CodeNotImplemented, "%s: session %s runs on Kubernetes (job %s): not for a session on a cluster; `legion sessions kill %s` deletes its Job and keeps its volume, and the next dispatch starts it again",
		cmd, v.Name, wire.JobName(v.ID), v.Name)
}

// kubeOnlyHere finds a session by name on a cluster when this machine has
// no live session of that name.
func (h *Helper) kubeOnlyHere(ctx context.Context, name string) (api.Session, bool) {
	if s, ok := h.sessions.get(name); ok && !s.view().State.Ended() {
		return api.Session{}, false
	}
	return h.kube.find(ctx, name)
}

// killKube kills a session on a cluster; its issue's volume stays.
func (h *Helper) killKube(ctx context.Context, v api.Session) (api.StatusResult, error) {
	if v.State.Ended() && v.State != api.StateFailed {
		return api.StatusResult{}, api.Errorf(api.CodeNotRunning, "session %s has already ended: %s", v.Name, v.Exit)
	}
	// The engine finds the session's target by its id: ask every one.
	k := h.kube
	k.mu.Lock()
	targets := k.targetsLocked()
	k.mu.Unlock()
	p, err := k.process(ctx)
	if err != nil {
		return api.StatusResult{}, err
	}
	for _, t := range targets {
		if _, err := p.call(ctx, wire.Request{Op: wire.OpKill, Target: &t, SessionID: v.ID}); err != nil {
			return api.StatusResult{}, err
		}
	}
	h.log.Info("session killed", "session", v.Name, "engine", api.EngineKubernetes)
	v.State = api.StateExited
	v.Exit = &api.Exit{Time: time.Now(), Reason: "killed by legion sessions kill"}
	h.events.publishView(v, h.log)
	return api.StatusResult{Session: v}, nil
}

// logWriter sends the engine's stderr lines to the helper's log.
type logWriter struct{ h *Helper }

func (w *logWriter) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if l != "" {
			w.h.log.Warn("kubernetes engine: " + l)
		}
	}
	return len(b), nil
}

// kubeExecStart bounds a cluster worker's first answer through exec:
// legion-kube's start, the API server's exec to the node, the hello.
const kubeExecStart = 30 * time.Second

// kubeConn is a connection to the worker of a session on a cluster, past
// its hello: one end of a socket pair whose other end is the stdin and
// stdout of `legion-kube exec -- legion-pty-worker --connect` in the
// session's pod (see wire.ConnectCommand). Closing it ends that exec.
type kubeConn struct {
	*net.UnixConn
	done   chan struct{} // closed when legion-kube exec exited
	stderr *bytes.Buffer // its stderr, read after done
}

// why is err with what legion-kube exec said, if it exited meanwhile.
func (c *kubeConn) why(err error) error {
	select {
	case <-c.done:
		if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
			// The command's own lines first (legion-pty-worker's: why it
			// could not reach the worker), then legion-kube's.
			return fmt.Errorf("%w (%s)", err, truncateText(strings.ReplaceAll(msg, "\n", "; "), 1000))
		}
	case <-time.After(2 * time.Second):
	}
	return err
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// execKube runs command in the running pod of cluster session v through
// the API server (legion-kube exec), its stdin and stdout the returned
// connection.
func (h *Helper) execKube(ctx context.Context, v api.Session, command []string) (*kubeConn, string, error) {
	p, err := h.kube.process(ctx)
	if err != nil {
		return nil, "", err
	}
	rep, err := p.call(ctx, wire.Request{Op: wire.OpPod, Name: v.Name})
	if err != nil {
		return nil, "", err
	}
	bin := h.opts.KubeBinary
	if bin == "" {
		if bin, err = findKubeBinary(); err != nil {
			return nil, "", api.Errorf(api.CodeBadRequest, "%v", err)
		}
	}
	t := rep.Target
	args := []string{"exec", "--namespace", t.Namespace, "--pod", rep.Pod}
	if t.Kubeconfig != "" {
		args = append(args, "--kubeconfig", t.Kubeconfig)
	}
	if t.Context != "" {
		args = append(args, "--context", t.Context)
	}
	args = append(append(args, "--"), command...)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, "", err
	}
	near, far := os.NewFile(uintptr(fds[0]), "kube-exec"), os.NewFile(uintptr(fds[1]), "kube-exec")
	defer near.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout = far, far
	c := &kubeConn{done: make(chan struct{}), stderr: &bytes.Buffer{}}
	cmd.Stderr = &cappedWriter{b: c.stderr, max: 16 << 10}
	// It ends with the helper; `legion attach` then asks again.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	err = cmd.Start()
	far.Close()
	if err != nil {
		return nil, "", fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		err := cmd.Wait()
		close(c.done)
		if err != nil {
			h.log.Warn("exec into a session's pod ended", "session", v.Name, "pod", rep.Pod, "err", err, "stderr", lastLine(strings.TrimSpace(c.stderr.String())))
		}
	}()
	nc, err := net.FileConn(near)
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, "", err
	}
	c.UnixConn = nc.(*net.UnixConn)
	return c, rep.Pod, nil
}

// dialKube connects to the worker of cluster session v through the API
// server (wire.ConnectCommand) and checks that it answers as that
// session (info).
func (h *Helper) dialKube(ctx context.Context, v api.Session) (*kubeConn, *proto.Client, error) {
	c, pod, err := h.execKube(ctx, v, wire.ConnectCommand)
	if err != nil {
		return nil, nil, err
	}
	wc := proto.NewClient(c)
	ictx, cancel := context.WithTimeout(ctx, kubeExecStart)
	defer cancel()
	in, err := wc.Info(ictx)
	if err == nil && in.SessionID != v.ID {
		err = fmt.Errorf("pod %s hosts session %s", pod, in.SessionID)
	}
	if err != nil {
		wc.Close()
		return nil, nil, api.Errorf(api.CodeUnavailable, "session %s: its worker in pod %s does not answer through exec: %v", v.Name, pod, c.why(err))
	}
	return c, wc, nil
}

// cappedWriter keeps the first max bytes written to it.
type cappedWriter struct {
	mu  sync.Mutex
	b   *bytes.Buffer
	max int
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// attachKube brokers attach to a cluster session: the descriptor handed
// over is the relay through the API server, past hello, as for a local
// session; Relayed tells the client that no ring can come through it.
func (h *Helper) attachKube(ctx context.Context, v api.Session, a api.AttachArgs) (api.AttachResult, *os.File, error) {
	c, wc, err := h.dialKube(ctx, v)
	if err != nil {
		return api.AttachResult{}, nil, err
	}
	// info was answered: the worker sends nothing more until asked, so
	// closing the client (its reader) loses no byte of the duplicate's.
	f, err := c.File()
	wc.Close()
	if err != nil {
		return api.AttachResult{}, nil, err
	}
	h.log.Info("attach brokered through the API server", "session", v.Name, "read_only", a.ReadOnly)
	return api.AttachResult{Session: v, Relayed: true}, f, nil
}

// sendKube types into a cluster session's PTY.
func (h *Helper) sendKube(ctx context.Context, v api.Session, a api.SendArgs) (api.StatusResult, error) {
	_, wc, err := h.dialKube(ctx, v)
	if err != nil {
		return api.StatusResult{}, err
	}
	defer wc.Close()
	if what, err := sendInput(ctx, wc, a); err != nil {
		return api.StatusResult{}, kubeWorkerErr(v, what, err)
	}
	h.log.Info("sent input", "session", v.Name, "bytes", len(a.Text), "enter", !a.NoEnter, "engine", api.EngineKubernetes)
	return api.StatusResult{Session: v}, nil
}

// respondKube delivers a person's answer to a cluster session.
func (h *Helper) respondKube(ctx context.Context, v api.Session, a api.RespondArgs) (api.StatusResult, error) {
	_, wc, err := h.dialKube(ctx, v)
	if err != nil {
		return api.StatusResult{}, err
	}
	defer wc.Close()
	res, err := respondTo(ctx, wc, a)
	if err != nil {
		return api.StatusResult{}, kubeWorkerErr(v, "respond", err)
	}
	h.log.Info("respond delivered", "session", v.Name, "by", a.By, "decision", a.Decision, "text_bytes", len(a.Text), "delivered", res.Delivered, "engine", api.EngineKubernetes)
	return api.StatusResult{Session: v}, nil
}

// endKube ends a cluster session's agent because its work is done: the
// worker exits 0 and the Job completes.
func (h *Helper) endKube(ctx context.Context, v api.Session, reason string) (api.StatusResult, error) {
	_, wc, err := h.dialKube(ctx, v)
	if err != nil {
		return api.StatusResult{}, err
	}
	defer wc.Close()
	if err := endAgent(ctx, wc, reason); err != nil {
		return api.StatusResult{}, kubeWorkerErr(v, "end", err)
	}
	h.log.Info("session ending: its work is done", "session", v.Name, "reason", reason, "engine", api.EngineKubernetes)
	return api.StatusResult{Session: v}, nil
}

// kubeWorkerErr is callErr for a call through the API server.
func kubeWorkerErr(v api.Session, what string, err error) error {
	return callErr(v.Name, what+" through the API server", err)
}

// logsKube streams a cluster session's transcript (sessions.logs), read
// in its pod by exec (wire.TranscriptCommand): the transcript is on the
// issue's volume, which only a pod of the session mounts. With follow it
// goes on from each new pod of the session at the offset reached, until
// the session has ended for good or the client hangs up.
func (h *Helper) logsKube(ctx context.Context, cc *clientConn, req api.Request, v api.Session, a api.LogsArgs) (any, *os.File, error) {
	off, tail := a.Offset, a.Tail
	for {
		c, _, err := h.execKube(ctx, v, wire.TranscriptCommand(off, tail, a.Follow))
		switch {
		case err != nil && !a.Follow:
			return nil, nil, err
		case err == nil:
			started, serr := streamKubeLogs(ctx, cc, req, c, &off, func() bool { return h.kubeOver(ctx, v) })
			c.Close()
			if started {
				tail = 0
			}
			if serr != nil {
				return nil, nil, serr
			}
			if !a.Follow {
				return api.LogsResult{Offset: off, Reason: "eof"}, nil, nil
			}
		}
		// Between pods, or the last one ended.
		if h.kubeOver(ctx, v) {
			return api.LogsResult{Offset: off, Reason: "session ended"}, nil, nil
		}
		if peerClosed(cc.c) {
			return nil, nil, io.EOF
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(logStateCheck):
		}
	}
}

// kubeOver reports whether cluster session v has ended for good (or is
// gone, or its name now names another session).
func (h *Helper) kubeOver(ctx context.Context, v api.Session) bool {
	cur, ok := h.kube.find(ctx, v.Name)
	return !ok || cur.ID != v.ID || cur.State.Ended()
}

// streamKubeLogs sends what a --transcript exec writes as log events: the
// offset line sets *off, the bytes follow. It returns when the exec
// ended (started: it sent its offset line), the session is over (a
// pause in the bytes and over says so) or the client hung up (io.EOF).
func streamKubeLogs(ctx context.Context, cc *clientConn, req api.Request, c *kubeConn, off *int64, over func() bool) (started bool, err error) {
	r := bufio.NewReaderSize(c, logChunk)
	_ = c.SetReadDeadline(time.Now().Add(kubeExecStart))
	line, err := r.ReadString('\n')
	if err != nil {
		return false, api.Errorf(api.CodeUnavailable, "read the transcript through exec: %v", c.why(err))
	}
	start, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return false, api.Errorf(api.CodeUnavailable, "read the transcript through exec: offset line %q", truncateText(line, 40))
	}
	*off = start
	buf := make([]byte, logChunk)
	for {
		_ = c.SetReadDeadline(time.Now().Add(logStateCheck))
		n, rerr := r.Read(buf)
		if n > 0 {
			ev, err := json.Marshal(api.LogEvent{Offset: *off, Data: buf[:n]})
			if err != nil {
				return true, err
			}
			if err := cc.send(api.Response{ID: req.ID, Event: ev}, nil); err != nil {
				return true, err
			}
			*off += int64(n)
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			if peerClosed(cc.c) || ctx.Err() != nil {
				return true, io.EOF
			}
			if over() {
				return true, nil
			}
		default:
			return true, nil // the exec ended: the pod's end, or all was sent
		}
	}
}
