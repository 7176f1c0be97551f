package activation

import (
	"context"
	"sync"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// A cluster session's agent state (its hooks' events: working, idle,
// waiting on a person) is known only to its worker in the pod, which
// `legion hook` in the same pod reaches over the worker's socket. The
// engine reads the Job and its pods, not the worker. So the helper does
// for a cluster session what it does for a local one: it watches the
// worker (proto.Client.Watch), here through the API server as attach
// does (dialKube: legion-kube exec of wire.ConnectCommand in the
// session's pod), for as long as the session runs, and puts the agent's
// state into the session's view (list, status, and a watch event at each
// change), so that the controller sees a wait for a person and escalates
// as it does locally. One exec stream per running cluster session.

// kubeAgentRetry bounds the wait between attempts to reach a running
// session's worker (its pod may still be running its prepare commands).
const (
	kubeAgentRetryMin = 500 * time.Millisecond
	kubeAgentRetryMax = 5 * time.Second
)

// kubeAgents are the followers of the running cluster sessions' workers,
// by session name.
type kubeAgents struct {
	mu sync.Mutex
	m  map[string]*kubeAgent
}

// kubeAgent is what the follower of one cluster session knows.
type kubeAgent struct {
	view     api.Session // the engine's newest view of the session
	agent    *api.Agent  // the worker's, nil when not connected
	waiting  bool
	question string
	run      int // the worker's run whose state agent is
}

// withAgents adds what the followers know to the engine's views vs, and
// starts following each running session that is not followed yet. It
// changes vs in place and returns it.
func (k *kubeSessions) withAgents(vs []api.Session) []api.Session {
	for i := range vs {
		vs[i] = k.withAgent(vs[i])
	}
	return vs
}

// withAgent is withAgents of one view.
func (k *kubeSessions) withAgent(v api.Session) api.Session {
	k.agents.mu.Lock()
	defer k.agents.mu.Unlock()
	if k.agents.m == nil {
		k.agents.m = map[string]*kubeAgent{}
	}
	a := k.agents.m[v.Name]
	switch {
	case a == nil && v.State == api.StateRunning && v.Hooks:
		a = &kubeAgent{view: v}
		k.agents.m[v.Name] = a
		go k.followAgent(v.Name)
	case a == nil:
		return v
	}
	a.view = v
	return a.applyLocked(v)
}

// applyLocked is v with the worker's agent state, while v runs.
func (a *kubeAgent) applyLocked(v api.Session) api.Session {
	if a.agent == nil || v.State.Ended() {
		return v
	}
	ag := *a.agent
	v.Agent = &ag
	if a.waiting {
		v.Question = a.question
	}
	return v
}

// followAgent watches the worker of cluster session name through the API
// server while the engine's view of it is not ended, reconnecting (a new
// pod, a pod not ready yet) with a bounded backoff; it publishes a view
// at every agent state the worker pushes. It ends with the helper, or
// once the session has ended.
func (k *kubeSessions) followAgent(name string) {
	wait := kubeAgentRetryMin
	defer func() {
		k.agents.mu.Lock()
		delete(k.agents.m, name)
		k.agents.mu.Unlock()
	}()
	for {
		k.agents.mu.Lock()
		v := k.agents.m[name].view
		k.agents.mu.Unlock()
		if v.State.Ended() || k.life.Err() != nil {
			return
		}
		if k.watchAgent(v) {
			wait = kubeAgentRetryMin
		} else {
			wait = min(2*wait, kubeAgentRetryMax)
		}
		select {
		case <-k.life.Done():
			return
		case <-time.After(wait):
		}
		// The newest view (find records it): has the session ended
		// meanwhile?
		if _, ok := k.find(k.life, name); !ok {
			return
		}
	}
}

// watchAgent follows the worker of v until the connection ends, and
// reports whether it reached the worker.
func (k *kubeSessions) watchAgent(v api.Session) bool {
	h := k.h
	_, wc, err := h.dialKube(k.life, v)
	if err != nil {
		h.log.Debug("cannot reach a cluster session's worker for its agent state yet", "session", v.Name, "err", err)
		return false
	}
	defer wc.Close()
	stop := context.AfterFunc(k.life, func() { wc.Close() })
	defer stop()
	ctx, cancel := context.WithTimeout(k.life, workerCallTimeout)
	in, err := wc.Watch(ctx)
	cancel()
	if err != nil {
		h.log.Warn("cannot watch a cluster session's worker", "session", v.Name, "err", err)
		return false
	}
	k.setAgent(v.Name, in.Run, in.Agent, in.Waiting, in.Question)
	for ev := range wc.Events() {
		if ev.Kind == proto.EventKindState && ev.State != nil {
			st := ev.State
			k.setAgent(v.Name, st.Run, st.Agent, st.Waiting, st.Question)
		}
		ev.Release()
	}
	k.setAgent(v.Name, 0, nil, false, "")
	return true
}

// setAgent records the worker's agent state for session name and
// publishes the session's view with it when it changed it.
func (k *kubeSessions) setAgent(name string, run int, ag *api.Agent, waiting bool, question string) {
	k.agents.mu.Lock()
	a := k.agents.m[name]
	if a == nil {
		k.agents.mu.Unlock()
		return
	}
	if ag != nil && a.agent != nil && run == a.run && ag.LastEvent.Before(a.agent.LastEvent) {
		k.agents.mu.Unlock()
		return // older than what is known
	}
	a.run, a.agent, a.waiting, a.question = run, ag, waiting, question
	v := a.applyLocked(a.view)
	k.agents.mu.Unlock()
	if ag != nil {
		k.h.events.publishView(v, k.h.log)
	}
}
