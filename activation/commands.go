package activation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
)

// cmdList answers with every session; while recovery checks the workers,
// those not checked yet as recovery listed them (Session.Checking). It asks no worker and no manager
// about a session whose state is current (Helper.current: followed by
// pushed events) but for its last activity, read from files
// (lastActivityNow); the others are refreshed. With 1,000
// sessions a refresh of all (one info round trip to each worker, one
// listing of every unit) took ~0.7 s on 2 cores.
func (h *Helper) cmdList(ctx context.Context, _ *clientConn, _ api.Request) (any, *os.File, error) {
	ss := h.sessions.all()
	var stale []*session
	for _, s := range ss {
		if s.isChecking() {
			continue // recovery is asking its worker
		}
		if h.current(s) {
			s.updateActivity()
		} else {
			stale = append(stale, s)
		}
	}
	if len(stale) > 0 {
		h.sessions.refresh(ctx, stale)
	}
	res := api.ListResult{DaemonID: h.daemonID, Sessions: make([]api.Session, 0, len(ss))}
	for _, s := range ss {
		res.Sessions = append(res.Sessions, s.view())
	}
	res.Sessions = append(res.Sessions, h.kube.sessions(ctx)...)
	h.sessions.mu.Lock()
	res.Recovery, res.Checking = h.sessions.counts, h.sessions.checking
	res.Quarantined = append([]api.Quarantined(nil), h.sessions.quarantined...)
	h.sessions.mu.Unlock()
	return res, nil, nil
}

// lookup finds a session by name: one the helper knows (refreshed), or
// one that ended before this helper started (registry/pruned).
func (h *Helper) lookup(ctx context.Context, cmd, name string) (*session, error) {
	if err := api.ValidateName(name); err != nil {
		return nil, api.Errorf(api.CodeBadRequest, "%s: %v", cmd, err)
	}
	if s, ok := h.sessions.get(name); ok {
		h.sessions.refresh(ctx, []*session{s})
		return s, nil
	}
	if v, ok := h.kube.find(ctx, name); ok {
		return nil, kubeOnly(cmd, v)
	}
	if r, path := h.findEnded(name); r != nil {
		s := newSession(h, r, path)
		s.ended = true
		return s, nil
	}
	return nil, api.Errorf(api.CodeNotFound, "no session named %q (`legion sessions list` shows them)", name)
}

func nameArg(req api.Request) (string, error) {
	var a api.NameArgs
	if err := decodeArgs(req, &a); err != nil {
		return "", err
	}
	return a.Name, nil
}

func (h *Helper) cmdStatus(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	name, err := nameArg(req)
	if err != nil {
		return nil, nil, err
	}
	if v, ok := h.kubeOnlyHere(ctx, name); ok {
		return api.StatusResult{Session: v}, nil, nil
	}
	s, err := h.lookup(ctx, req.Cmd, name)
	if err != nil {
		return nil, nil, err
	}
	v := s.view()
	v.Resources = h.resources(ctx, s.unit, v.State)
	if spec, err := proto.ReadSpec(filepath.Join(h.opts.StateDir, specDir, s.id+".json")); err == nil {
		v.Instructions = spec.Instructions
	}
	return api.StatusResult{Session: v}, nil, nil
}

func (h *Helper) cmdKill(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	name, err := nameArg(req)
	if err != nil {
		return nil, nil, err
	}
	if v, ok := h.kubeOnlyHere(ctx, name); ok {
		res, err := h.killKube(ctx, v)
		return res, nil, err
	}
	s, err := h.lookup(ctx, req.Cmd, name)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	ended, lost := s.ended, s.lost != ""
	s.mu.Unlock()
	if lost {
		// Nothing runs: forgetting it is all there is to do.
		if err := h.forget(s); err != nil {
			return nil, nil, err
		}
		h.events.publish(s)
		return api.StatusResult{Session: s.view()}, nil, nil
	}
	if ended {
		return nil, nil, api.Errorf(api.CodeNotRunning, "session %s has already ended: %s", name, s.view().Exit)
	}
	log := s.log
	if err := h.mgr.Stop(ctx, s.unit); err != nil {
		return nil, nil, err
	}
	// A unit that had failed stays loaded as failed: reset it so the name
	// is free again.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), systemdTimeout)
	defer cancel()
	if st, err := h.mgr.State(sctx, s.unit); err == nil && st.Failed() {
		if err := h.mgr.ResetFailed(sctx, s.unit); err != nil {
			log.Warn("reset failed unit after kill", "err", err)
		}
	}
	s.closeConn()
	h.sessions.refresh(ctx, []*session{s})
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	h.events.publish(s)
	h.removeSpecFor(s.id + ".json")
	log.Info("session killed")
	v := s.view()
	v.Resources = h.resources(ctx, s.unit, v.State)
	return api.StatusResult{Session: v}, nil, nil
}

// cmdReset resets a failed session's unit, as `systemctl --user
// reset-failed UNIT` does: systemd forgets the failure (and the start
// limit's count), so the session is no longer failed and its team's
// controller starts it again at its next tick. Only a failed session is
// reset: any other is refused, so a reset never touches a live unit.
func (h *Helper) cmdReset(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	name, err := nameArg(req)
	if err != nil {
		return nil, nil, err
	}
	s, err := h.lookup(ctx, req.Cmd, name)
	if err != nil {
		return nil, nil, err
	}
	if v := s.view(); v.State != api.StateFailed {
		return nil, nil, api.Errorf(api.CodeBadRequest, "%s: session %s is %s, not failed: nothing to reset", req.Cmd, name, v.State)
	}
	if err := h.mgr.ResetFailed(ctx, s.unit); err != nil && !errors.Is(err, units.ErrNoSuchUnit) {
		return nil, nil, fmt.Errorf("reset-failed %s: %w", s.unit, err)
	}
	h.sessions.refresh(ctx, []*session{s})
	h.events.publish(s)
	s.log.Info("failed session reset", "unit", s.unit)
	return api.StatusResult{Session: s.view()}, nil, nil
}

// running returns an authenticated worker connection of a session that
// runs, or the error to answer: not_running (with the exit) for a session
// that ended, unavailable for one between runs.
func (h *Helper) running(ctx context.Context, s *session) (*proto.Client, error) {
	v := s.view()
	switch {
	case v.State == api.StateLost:
		return nil, api.Errorf(api.CodeNotRunning, "session %s is not running: lost: %s", s.name, v.Cause)
	case v.State.Ended():
		return nil, api.Errorf(api.CodeNotRunning, "session %s is not running (%s): last exit %s", s.name, v.State, v.Exit)
	case v.State == api.StateStarting:
		return nil, api.Errorf(api.CodeUnavailable, "session %s is starting or waiting out its restart cooldown; try again shortly", s.name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wc == nil {
		if _, err := s.connectLocked(ctx, h); err != nil {
			return nil, api.Errorf(api.CodeUnavailable, "session %s: its worker does not answer: %v", s.name, err)
		}
	}
	return s.wc, nil
}

func (h *Helper) cmdSend(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	var a api.SendArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	if v, ok := h.kubeOnlyHere(ctx, a.Name); ok {
		res, err := h.sendKube(ctx, v, a)
		return res, nil, err
	}
	s, err := h.lookup(ctx, req.Cmd, a.Name)
	if err != nil {
		return nil, nil, err
	}
	wc, err := h.running(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	if what, err := sendInput(ctx, wc, a); err != nil {
		return nil, nil, workerErr(s, what, err)
	}
	s.log.Info("sent input", "bytes", len(a.Text), "enter", !a.NoEnter)
	v := s.view()
	v.Resources = h.resources(ctx, s.unit, v.State)
	return api.StatusResult{Session: v}, nil, nil
}

func (h *Helper) cmdAttach(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	var a api.AttachArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	if v, ok := h.kubeOnlyHere(ctx, a.Name); ok {
		res, f, err := h.attachKube(ctx, v, a)
		return res, f, err
	}
	s, err := h.lookup(ctx, req.Cmd, a.Name)
	if err != nil {
		return nil, nil, err
	}
	if _, err := h.running(ctx, s); err != nil {
		return nil, nil, err
	}
	f, err := brokerHello(ctx, s.socket, h.daemonID, s.token, s.id)
	if err != nil {
		return nil, nil, workerErr(s, "connect", err)
	}
	s.log.Info("attach brokered", "read_only", a.ReadOnly)
	return api.AttachResult{Session: s.view()}, f, nil
}

// sendInput types a's text, then Enter unless a.NoEnter, into the worker
// of wc (either engine's); on failure it says which of the two failed.
func sendInput(ctx context.Context, wc *proto.Client, a api.SendArgs) (what string, err error) {
	ictx, cancel := context.WithTimeout(ctx, workerCallTimeout+5*time.Second)
	defer cancel()
	if a.Text != "" {
		if err := wc.Input(ictx, []byte(a.Text)); err != nil {
			return "send text", err
		}
	}
	if !a.NoEnter {
		if err := wc.Input(ictx, []byte("\r")); err != nil {
			return "send Enter", err
		}
	}
	return "", nil
}

// endAgent asks the worker of wc (either engine's) to end its agent
// because its work is done.
func endAgent(ctx context.Context, wc *proto.Client, reason string) error {
	ectx, cancel := context.WithTimeout(ctx, workerCallTimeout)
	defer cancel()
	return wc.End(ectx, reason)
}

// workerErr maps a worker call's failure to an API error; a worker that
// does not answer loses the session's shared connection.
func workerErr(s *session, what string, err error) error {
	e := callErr(s.name, what, err)
	if e.Code == api.CodeUnavailable {
		s.closeConn()
	}
	return e
}

// callErr maps the failure of what, a call to session name's worker, to
// an API error.
func callErr(name, what string, err error) *api.Error {
	switch {
	case proto.IsCode(err, proto.CodeSessionNotRunning):
		return api.Errorf(api.CodeNotRunning, "session %s is not running: %v", name, err)
	case proto.IsCode(err, proto.CodeBadRequest):
		return api.Errorf(api.CodeBadRequest, "session %s: %s: %v", name, what, err)
	}
	return api.Errorf(api.CodeUnavailable, "session %s: %s: %v", name, what, err)
}
