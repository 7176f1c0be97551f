package activation

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// respondTimeout bounds a respond call to a worker: typing an answer
// waits for the agent's dialog (up to 10 s) and for each key to take (up
// to 5 s each), on top of a normal call.
const respondTimeout = workerCallTimeout + 30*time.Second

// cmdRespond delivers a person's answer to what a session's agent waits
// on, through its worker (ptyworker's respond: the held permission hook,
// or keys), and returns the session after it.
func (h *Helper) cmdRespond(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	var a api.RespondArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	if a.Text == "" && a.Decision == "" {
		return nil, nil, api.Errorf(api.CodeBadRequest, "%s: give text (an answer or a prompt) or a decision (%s or %s)", req.Cmd, api.DecisionAllow, api.DecisionDeny)
	}
	if a.Decision != "" && a.Decision != api.DecisionAllow && a.Decision != api.DecisionDeny {
		return nil, nil, api.Errorf(api.CodeBadRequest, "%s: decision %q: want %s or %s", req.Cmd, truncateText(a.Decision, 40), api.DecisionAllow, api.DecisionDeny)
	}
	if v, ok := h.kubeOnlyHere(ctx, a.Name); ok {
		res, err := h.respondKube(ctx, v, a)
		return res, nil, err
	}
	s, err := h.lookup(ctx, req.Cmd, a.Name)
	if err != nil {
		return nil, nil, err
	}
	if _, err := h.running(ctx, s); err != nil {
		return nil, nil, err
	}
	// A connection of its own: typing an answer takes seconds (the worker
	// waits for the agent's dialog and for each key to take), and a worker
	// answers a connection's requests in order, so the session's shared
	// connection would keep the helper's info calls waiting meanwhile.
	wc, hr, err := dialWorker(ctx, s.socket, h.daemonID, s.token)
	if err != nil {
		return nil, nil, api.Errorf(api.CodeUnavailable, "session %s: its worker does not answer: %v", s.name, err)
	}
	defer wc.Close()
	if hr.SessionID != s.id {
		return nil, nil, api.Errorf(api.CodeUnavailable, "session %s: the worker at %s hosts session %s", s.name, s.socket, hr.SessionID)
	}
	res, err := respondTo(ctx, wc, a)
	if err != nil {
		return nil, nil, workerErr(s, "respond", err)
	}
	s.log.Info("respond delivered", "by", a.By, "decision", a.Decision, "text_bytes", len(a.Text), "delivered", res.Delivered)
	h.sessions.refresh(ctx, []*session{s})
	h.events.publish(s)
	return api.StatusResult{Session: s.view()}, nil, nil
}

// respondTo delivers a's answer to the worker of wc (either engine's).
func respondTo(ctx context.Context, wc *proto.Client, a api.RespondArgs) (*proto.RespondResult, error) {
	rctx, cancel := context.WithTimeout(ctx, respondTimeout)
	defer cancel()
	return wc.Respond(rctx, proto.RespondParams{Text: a.Text, Decision: a.Decision, By: a.By})
}

// cmdEnd ends a session's agent because its work is done: its worker
// ends the agent cleanly and exits 0, so its unit ends as a success and is
// not restarted. It returns once the worker took the request; the
// session's exited event follows.
func (h *Helper) cmdEnd(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	var a api.EndArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(a.Reason) == "" {
		return nil, nil, api.Errorf(api.CodeBadRequest, "%s: give a reason (e.g. \"worker-done and its turn ended\")", req.Cmd)
	}
	if v, ok := h.kubeOnlyHere(ctx, a.Name); ok {
		res, err := h.endKube(ctx, v, a.Reason)
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
	if err := endAgent(ctx, wc, a.Reason); err != nil {
		return nil, nil, workerErr(s, "end", err) // a worker of rpc 1.0 has no end: bad_request, unknown method
	}
	s.log.Info("session ending: its work is done", "reason", a.Reason)
	return api.StatusResult{Session: s.view()}, nil, nil
}
