package activation

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube"
	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// kubeTargetsFile lists the Kubernetes targets the helper has run sessions
// on (JSON, 0600 in the state dir), so that a helper started again
// follows their sessions before anyone spawns there.
const kubeTargetsFile = "kubernetes-targets.json"

// kubeSessions are the helper's Kubernetes engines (package
// activation/kube), one per target (kubeconfig, context, namespace),
// started on the first spawn there and at every helper start for the
// targets in kubeTargetsFile. Their sessions are Jobs: the helper lists,
// follows, kills and stops them through the API server; it keeps no file
// of theirs, as the cluster holds their state.
type kubeSessions struct {
	h       *Helper
	ctx     context.Context // the helper's run: the engines' informers stop with it
	mu      sync.Mutex
	engines map[string]*kube.Engine // by targetKey
}

func targetKey(t api.KubeTarget) string {
	return t.Kubeconfig + "\x00" + t.Context + "\x00" + t.Namespace
}

func newKubeSessions(ctx context.Context, h *Helper) *kubeSessions {
	return &kubeSessions{h: h, ctx: ctx, engines: map[string]*kube.Engine{}}
}

// engine returns the running engine of t, starting it (and recording t)
// when it is new. The engine's Target is replaced by t: a spawn carries
// the team's current image and limits.
func (k *kubeSessions) engine(ctx context.Context, t api.KubeTarget) (*kube.Engine, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := targetKey(t)
	if e, ok := k.engines[key]; ok {
		e.Target = t
		return e, nil
	}
	cfg, err := kube.Config(t)
	if err != nil {
		return nil, api.Errorf(api.CodeBadRequest, "spawn: %v", err)
	}
	e, err := kube.New(cfg, t, k.changed(t))
	if err != nil {
		return nil, api.Errorf(api.CodeBadRequest, "spawn: %v", err)
	}
	// The informers run for the helper's life, not the request's; the
	// first listing is waited for as long as the request allows.
	if err := e.Start(k.ctx, ctx); err != nil {
		return nil, err
	}
	k.engines[key] = e
	if err := k.saveLocked(); err != nil {
		k.h.log.Warn("cannot record the Kubernetes targets", "file", kubeTargetsFile, "err", err)
	}
	return e, nil
}

// changed publishes a session's new view whenever its Job or pods change.
func (k *kubeSessions) changed(t api.KubeTarget) func(id string) {
	return func(id string) {
		k.mu.Lock()
		e := k.engines[targetKey(t)]
		k.mu.Unlock()
		if e == nil {
			return
		}
		if v, ok := e.Session(id); ok {
			k.h.events.publishView(v, k.h.log)
		}
	}
}

func (k *kubeSessions) saveLocked() error {
	ts := make([]api.KubeTarget, 0, len(k.engines))
	for _, e := range k.engines {
		ts = append(ts, e.Target)
	}
	b, err := json.MarshalIndent(ts, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(k.h.opts.StateDir, kubeTargetsFile), append(b, '\n'), 0o600)
}

// restore starts the engines of the recorded targets. A target that
// cannot be reached is logged and tried again at the next spawn there.
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
		k.h.log.Error("unreadable Kubernetes targets; their sessions are not listed until the next spawn there", "file", p, "err", err)
		return
	}
	for _, t := range ts {
		if _, err := k.engine(k.ctx, t); err != nil {
			k.h.log.Error("cannot follow the sessions of a Kubernetes target", "context", t.Context, "namespace", t.Namespace, "err", err)
		}
	}
}

func (k *kubeSessions) all() []*kube.Engine {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*kube.Engine, 0, len(k.engines))
	for _, e := range k.engines {
		out = append(out, e)
	}
	return out
}

// sessions are the sessions of every engine.
func (k *kubeSessions) sessions() []api.Session {
	var out []api.Session
	for _, e := range k.all() {
		out = append(out, e.Sessions()...)
	}
	return out
}

// find is the session named name on a cluster, and its engine.
func (k *kubeSessions) find(name string) (*kube.Engine, api.Session, bool) {
	for _, e := range k.all() {
		for _, s := range e.Sessions() {
			if s.Name == name {
				return e, s, true
			}
		}
	}
	return nil, api.Session{}, false
}

// spawnKube starts l as a Job on its target. The worker's spec is
// written for the pod: its paths are the pod's, and no systemd watchdog
// supervises it (SelfWatchdog).
func (h *Helper) spawnKube(ctx context.Context, l launch, t api.KubeTarget) (api.SpawnResult, error) {
	if s, ok := h.sessions.get(l.name); ok && !s.view().State.Ended() {
		return api.SpawnResult{}, api.Errorf(api.CodeExists, "session %s already runs on this machine (unit %s)", l.name, s.unit)
	}
	e, err := h.kube.engine(ctx, t)
	if err != nil {
		return api.SpawnResult{}, err
	}
	if _, v, ok := h.kube.find(l.name); ok && v.ID != l.id {
		return api.SpawnResult{}, api.Errorf(api.CodeExists, "spawn: session name %s is taken by session %s on the cluster", l.name, v.ID)
	}
	if v, ok := e.Session(l.id); ok && v.State == api.StateFailed && l.reuseLive {
		return api.SpawnResult{}, api.Errorf(api.CodeNotRunning, "spawn: session %s failed on the cluster: %s; it is not started again until a person acts (`legion sessions kill %s`, then dispatch)", l.name, v.Cause, l.name)
	}
	token, err := proto.NewToken()
	if err != nil {
		return api.SpawnResult{}, err
	}
	spec := &proto.Spec{
		Version: proto.SpecVersion, SessionID: l.id, AgentSession: l.agentSession, Name: l.name, Team: l.team, TeamShort: l.teamShort(),
		Issue: l.issue, Mode: l.mode, Role: l.role, Cwd: l.cwd, Env: l.env, ArgvNew: l.argvNew, ArgvResume: l.argvRes,
		Agent: l.agent, Sandbox: l.sandbox, Instructions: l.instructions, OwnCommands: l.ownCommands, DialogMarkers: l.dialogMarkers, Legion: l.legion,
		SessionFile: l.watch, StaleAfter: proto.Duration(l.staleAfter), RingSize: l.ringSize,
		Token: token, DaemonInstanceID: h.daemonID, Unit: l.unit, SelfWatchdog: true,
		Paths: proto.Paths{RuntimeDir: kube.RuntimeDir, StateDir: kube.StateDir},
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
	started, err := e.Spawn(ctx, kube.Session{
		ID: l.id, Name: l.name, Team: l.team, TeamID: l.teamID.String(), Issue: l.issue, Mode: l.mode, Unit: l.unit,
		Spec: b, StartLimitBurst: int(l.startLimitBurst),
	})
	if err != nil {
		return api.SpawnResult{}, err
	}
	h.log.Info("spawn on kubernetes", "session", l.name, "namespace", t.Namespace, "job", kube.JobName(l.id), "started", started)
	return api.SpawnResult{Name: l.name, ID: l.id, Unit: l.unit, Started: started}, nil
}

// kubeOnly is the answer to a command the helper cannot yet serve for a
// session on a cluster.
func kubeOnly(cmd string, v api.Session) error {
	return api.Errorf(api.CodeNotImplemented, "%s: session %s runs on Kubernetes (node %q): %s through the API server is not built yet; use `kubectl exec` into its pod (job %s)",
		cmd, v.Name, v.Node, cmd, kube.JobName(v.ID))
}

// killKube kills a session on a cluster; its issue's volume stays.
func (h *Helper) killKube(ctx context.Context, e *kube.Engine, v api.Session) (api.StatusResult, error) {
	if v.State.Ended() && v.State != api.StateFailed {
		return api.StatusResult{}, api.Errorf(api.CodeNotRunning, "session %s has already ended: %s", v.Name, v.Exit)
	}
	if err := e.Kill(ctx, v.ID); err != nil {
		return api.StatusResult{}, err
	}
	h.log.Info("session killed", "session", v.Name, "namespace", e.Target.Namespace)
	v.State = api.StateExited
	v.Exit = &api.Exit{Time: time.Now(), Reason: "killed by legion sessions kill"}
	h.events.publishView(v, h.log)
	return api.StatusResult{Session: v}, nil
}

// kubeOnlyHere finds a session by name on a cluster when this machine has
// no live session of that name.
func (h *Helper) kubeOnlyHere(name string) (*kube.Engine, api.Session, bool) {
	if s, ok := h.sessions.get(name); ok && !s.view().State.Ended() {
		return nil, api.Session{}, false
	}
	return h.kube.find(name)
}
