package ptyworker

// What RPC methods do to the session: state reports, input, resize,
// signals, removal, and the events pushed to clients.

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// info describes the session now (info and watch). LastActivity is read
// at the call (see activity), not taken from the last liveness tick, which
// may be half a watchdog interval old.
func (w *worker) info() *proto.Info {
	s := w.spec
	oldest, head, _ := w.out.bounds()
	w.mu.Lock()
	started := w.startedAt
	w.mu.Unlock()
	act := w.activity(started)
	w.mu.Lock()
	defer w.mu.Unlock()
	in := &proto.Info{
		SessionID: s.SessionID, Name: s.Name, Team: s.Team, Issue: s.Issue, Mode: s.Mode, Role: s.Role,
		Unit: s.Unit, Cwd: s.Cwd, State: w.state, Running: w.state == proto.StateRunning,
		ArgvKind: w.argvKind, Run: w.run, WorkerPID: os.Getpid(),
		Cols: w.cols, Rows: w.rows, Head: head, Oldest: oldest, StartedAt: w.startedAt,
		LastActivity: act,
		Waiting:      w.liveness.kind == proto.WatchWaiting, Question: w.liveness.question,
		Stale: w.liveness.kind == proto.WatchStale, Exit: w.exit,
		Agent:       w.agent.state(),
		SessionFile: s.SessionFile, OutputActivity: s.SessionFile == "" && s.Agent != proto.AgentClaude,
	}
	if w.child != nil && w.state == proto.StateRunning {
		in.ChildPID = w.child.pid
	}
	return in
}

// health is the cheap state summary of the health method.
func (w *worker) health() *proto.HealthResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := &proto.HealthResult{OK: w.state == proto.StateRunning, State: w.state, Watchdog: w.liveness.kind}
	if h.Watchdog == "" {
		h.Watchdog = proto.WatchGrace
	}
	if !w.liveness.activity.IsZero() {
		h.ActivityAgeMS = time.Since(w.liveness.activity).Milliseconds()
	}
	return h
}

// runningChild returns the child, or session_not_running.
func (w *worker) runningChild() (*child, *proto.RPCError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != proto.StateRunning || w.child == nil || w.removing {
		return nil, &proto.RPCError{Code: proto.CodeSessionNotRunning, Message: fmt.Sprintf("session %s is %s", w.spec.SessionID, w.state)}
	}
	return w.child, nil
}

// input writes keystrokes to the PTY.
func (w *worker) input(p []byte) *proto.RPCError {
	c, e := w.runningChild()
	if e != nil {
		return e
	}
	if len(p) == 0 {
		return nil
	}
	if err := c.write(p, w.opts.InputTimeout); err != nil {
		return w.ptyError(err)
	}
	return nil
}

// ptyError is the RPC error for a failed call on the agent's terminal: the
// master is closed once the agent has ended (shortly before the state says
// so), which is session_not_running, as is errReaped.
func (w *worker) ptyError(err error) *proto.RPCError {
	if errors.Is(err, os.ErrClosed) || errors.Is(err, errReaped) {
		return &proto.RPCError{Code: proto.CodeSessionNotRunning, Message: fmt.Sprintf("session %s: the agent has ended: %v", w.spec.SessionID, err)}
	}
	return &proto.RPCError{Code: proto.CodeIOError, Message: err.Error()}
}

// resize sets the PTY size; the screen follows from the current offset.
func (w *worker) resize(cols, rows int) *proto.RPCError {
	if cols < 1 || rows < 1 || cols > proto.MaxTermDim || rows > proto.MaxTermDim {
		return &proto.RPCError{Code: proto.CodeBadRequest, Message: fmt.Sprintf("size %dx%d: want 1..%d each", cols, rows, proto.MaxTermDim)}
	}
	c, e := w.runningChild()
	if e != nil {
		return e
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if cols == w.cols && rows == w.rows {
		return nil
	}
	if err := setWinsize(c.ptm, cols, rows); err != nil {
		return w.ptyError(err)
	}
	w.cols, w.rows = cols, rows
	w.scr.queueResize(w.out.head(), cols, rows)
	return nil
}

func (w *worker) signal(p *proto.SignalParams) (*proto.SignalResult, *proto.RPCError) {
	sig, err := parseSignal(p.Signal)
	if err != nil {
		return nil, &proto.RPCError{Code: proto.CodeBadRequest, Message: "signal: " + err.Error()}
	}
	target := p.Target
	switch target {
	case "":
		target = defaultTarget(sig)
	case proto.TargetForeground, proto.TargetGroup:
	default:
		return nil, &proto.RPCError{Code: proto.CodeBadRequest, Message: fmt.Sprintf("signal target %q: want %q or %q", p.Target, proto.TargetForeground, proto.TargetGroup)}
	}
	c, e := w.runningChild()
	if e != nil {
		return nil, e
	}
	pgid, err := c.signal(sig, target)
	if err != nil {
		return nil, w.ptyError(err)
	}
	return &proto.SignalResult{Pgid: pgid, Target: target}, nil
}

// requestRemove ends the session for good: once the agent is gone the
// registry says removed, and Run returns nil so systemd does not restart it.
// Once the agent has ended (the worker is only delivering its exit), it is
// session_not_running: too late to change how the run ends.
func (w *worker) requestRemove() *proto.RPCError {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended && !w.removing {
		return &proto.RPCError{Code: proto.CodeSessionNotRunning, Message: fmt.Sprintf("session %s is %s: the agent has ended; remove applies to a running session", w.spec.SessionID, w.state)}
	}
	if !w.removing {
		w.removing = true
		close(w.removeCh)
	}
	return nil
}

func (w *worker) stateEvent() *proto.StateEventData {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stateEventLocked()
}

// stateEventLocked is stateEvent with w.mu held.
func (w *worker) stateEventLocked() *proto.StateEventData {
	d := &proto.StateEventData{
		State: w.state, Running: w.state == proto.StateRunning, Run: w.run,
		Waiting: w.liveness.kind == proto.WatchWaiting, Question: w.liveness.question,
		Stale: w.liveness.kind == proto.WatchStale,
		Agent: w.agent.state(),
	}
	if w.child != nil && d.Running {
		d.ChildPID = w.child.pid
	}
	return d
}

// finish records the end of the run and pushes a state event to watchers
// and the exit event (after the output before it) to watchers and attached
// clients. State and events change under one lock, so an attach sees either
// the exit (and repeats it) or gets the broadcast, never both.
func (w *worker) finish(final string, e *proto.ExitInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state, w.exit = final, e
	sf, err := eventFrame(proto.EventState, w.stateEventLocked())
	if err != nil {
		w.log.Error("encode state event", "err", err)
	}
	for c := range w.conns {
		if c.watching.Load() && sf != nil {
			c.enqueue(ctrlItem{frame: sf})
		}
		if c.watching.Load() || c.attached.Load() {
			c.enqueueExit(e)
		}
	}
}
