package ptyworker

// Hook ingestion, answers and the clean end: the worker's side of the
// agent's hooks (agent kind claude).
//
// At every run start of an agent of kind claude the worker makes a fresh
// random hook token and puts LEGION_HOOK_SOCKET (its own socket) and
// LEGION_HOOK_TOKEN in the agent's environment (never in argv, unit
// properties or logs); other kinds get neither, so `legion hook` does
// nothing for them and they have no agent state. Claude Code runs
// `legion hook` for every hook event (RelayHook), which says hello with
// that token, a hook connection that may only call hook. The event moves
// the agent's state (agentstate.go); a change is logged, pushed to
// watchers as a state event and shown in STATUS=.
//
// A PermissionRequest for one of Legion's own commands, for the
// session's own team and issue (Spec.OwnCommands, owncommand.go), is
// allowed at once. Any other PermissionRequest is held: its hook call is answered once a person
// decides (respond with a decision), with Claude Code's PermissionRequest
// decision; for an AskUserQuestion once a person answers (respond with
// text), with an allow whose updatedInput carries the answers, so the
// agent gets the person's words as written and no key is typed. It is let
// go with no decision (Claude Code's own dialog stays open) when the agent
// moves on without it, the hook's connection ends (its timeout, or a
// person answered in the terminal) or the worker ends; an answer then
// goes in by keys.

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// keyPause is the pause between the steps of an answer typed into
// Claude Code's dialogs: a digit, Esc or the text must be taken as one
// key (an Esc followed at once by text reads as Alt+key) and the dialog
// must have moved on before the next.
const keyPause = 200 * time.Millisecond

// maxEndReason bounds end's reason (it goes into the exit reason).
const maxEndReason = 512

// hold is a PermissionRequest hook call waiting for a person's decision.
type hold struct {
	c       *conn
	id      uint64
	agentID string // the subagent that asked; "" for the agent itself
	tool    string
	input   json.RawMessage
}

// movesOn reports whether event ev of the agent (or subagent) that holds
// a permission request means it went on without the decision: the tool
// ran or failed, or the turn ended.
func movesOn(ev *hookEvent) bool {
	switch ev.Name {
	case HookPostToolUse, HookPostToolUseFailure, HookUserPromptSubmit, HookStop, HookStopFailure,
		HookSessionStart, HookSessionEnd, HookSubagentStop:
		return true
	}
	return false
}

// handleHook takes one hook event from a hook connection: it updates the
// agent's state and answers the call, or holds it (a permission request).
func (c *conn) handleHook(m *proto.Message) {
	w := c.w
	now := time.Now()
	ev, err := parseHook(m.Params, now)
	if err != nil {
		c.replyErr(m.ID, proto.CodeBadRequest, fmt.Sprintf("session %s: %v", w.spec.SessionID, err), false)
		return
	}
	if ev.Name == HookPermissionRequest {
		if cmd := bashCommand(ev.ToolName, ev.ToolInput); cmd != "" && ownCommand(w.spec, cmd) {
			// One of Legion's own commands for this session's issue: no
			// person is asked, and the agent's state stays as it is.
			w.mu.Lock()
			w.lastHook = now
			w.mu.Unlock()
			w.log.Debug("allowed Legion's own command", "command", clipText(cmd, 500))
			c.reply(m.ID, proto.HookResult{Output: permissionDecision(api.DecisionAllow, "")})
			return
		}
	}
	if ev.Name == HookNotification && ev.NotificationType == "permission_prompt" {
		w.mu.Lock()
		cmd := bashCommand(w.agent.lastTool, w.agent.lastInput)
		var since time.Time
		if w.agent.cur != nil {
			since = w.agent.cur.LastEvent
		}
		own := len(w.holds) == 0 && cmd != "" && len(w.spec.DialogMarkers) > 0 && ownCommand(w.spec, cmd)
		if own {
			w.lastHook = now
		}
		w.mu.Unlock()
		if own {
			// A dialog no hook answers (Spec.DialogMarkers: the Gemini
			// CLI's, gemini FACTS G10, G11) asks for one of Legion's own
			// commands: the worker answers it by keys.
			c.reply(m.ID, proto.HookResult{})
			go w.allowDialog(cmd, ev, since)
			return
		}
	}
	w.mu.Lock()
	w.lastHook = now
	changed := w.agent.apply(ev, now)
	var release []*hold
	if movesOn(ev) {
		keep := w.holds[:0]
		for _, h := range w.holds {
			if h.agentID == ev.AgentID {
				release = append(release, h)
			} else {
				keep = append(keep, h)
			}
		}
		w.holds = keep
	}
	held := false
	switch {
	case ev.Name == HookPermissionRequest && !w.ending && w.state == proto.StateRunning:
		w.holds = append(w.holds, &hold{c: c, id: m.ID, agentID: ev.AgentID, tool: ev.ToolName, input: ev.ToolInput})
		held = true
		if len(w.holds) > 1 { // the oldest is the one shown
			changed = w.agent.waitPermission(now, w.holds[0].tool, w.holds[0].input) || changed
		}
	case len(w.holds) > 0 && w.agent.cur != nil && !waitingHold(w.agent.cur.State) && w.agent.cur.State != api.AgentEnded:
		// Another agent's event moved the state on while a request is
		// still held: it still waits.
		changed = w.agent.waitPermission(now, w.holds[0].tool, w.holds[0].input) || changed
	}
	w.mu.Unlock()
	for _, h := range release {
		h.c.reply(h.id, proto.HookResult{})
	}
	if !held {
		c.reply(m.ID, proto.HookResult{})
	}
	if changed {
		w.agentChanged(now)
	}
}

// allowDialog answers the agent's own approval dialog for cmd, one of
// Legion's own commands, with its key "1. Allow once", once the dialog is
// on the screen (a line of Spec.DialogMarkers; Claude Code's dialogs,
// whose 1 may be a question's option, are not answered). When it does
// not show within dialogWait, or the keys fail, the permission prompt ev
// counts as any other: the agent waits for a person (unless the agent
// moved on meanwhile: an event newer than since).
func (w *worker) allowDialog(cmd string, ev *hookEvent, since time.Time) {
	w.respondMu.Lock()
	defer w.respondMu.Unlock()
	ok, e := w.waitScreenFunc(func(text string) bool { return containsAny(text, w.spec.DialogMarkers) }, false, dialogWait)
	if e == nil && ok {
		if e = w.typeKeys("1"); e == nil {
			w.log.Debug("allowed Legion's own command in the agent's dialog", "command", clipText(cmd, 500))
			return
		}
	}
	reason := "its dialog is not on the screen"
	if e != nil {
		reason = e.Message
	}
	w.log.Warn("could not allow Legion's own command in the agent's dialog: a person must", "command", clipText(cmd, 500), "why", reason)
	now := time.Now()
	w.mu.Lock()
	changed := false
	if cur := w.agent.cur; cur != nil && cur.LastEvent.Equal(since) && len(w.holds) == 0 {
		changed = w.agent.apply(ev, now)
	}
	w.mu.Unlock()
	if changed {
		w.agentChanged(now)
	}
}

// dropHolds lets go of the held requests of a connection that ended.
// Claude Code kills a hook that waits when a person answers its dialog in
// the terminal (or at the hook's timeout, a day in Legion's settings):
// allowed, the tool runs and PostToolUse follows at once; denied, the
// turn is interrupted and no hook event follows, the agent at its prompt.
// So a shown request whose hook went away leaves the agent idle, until an
// event says otherwise.
func (w *worker) dropHolds(c *conn) {
	now := time.Now()
	w.mu.Lock()
	shown := len(w.holds) > 0 && w.holds[0].c == c
	keep := w.holds[:0]
	for _, h := range w.holds {
		if h.c != c {
			keep = append(keep, h)
		}
	}
	w.holds = keep
	changed := false
	switch {
	case !shown || w.agent.cur == nil || w.agent.cur.State != api.AgentWaitingPermission:
	case len(w.holds) > 0:
		changed = w.agent.waitPermission(now, w.holds[0].tool, w.holds[0].input)
	default:
		changed = w.agent.dialogClosed(now)
	}
	w.mu.Unlock()
	if changed {
		w.log.Info("a permission request's hook went away: answered in the agent's terminal")
		w.agentChanged(now)
	}
}

// releaseHolds answers every held request with no decision (the worker
// ends).
func (w *worker) releaseHolds() {
	w.mu.Lock()
	hs := w.holds
	w.holds = nil
	w.mu.Unlock()
	for _, h := range hs {
		h.c.reply(h.id, proto.HookResult{})
	}
}

// agentChanged logs the agent's new state, pushes it to watchers and
// refreshes STATUS= and the watchdog at once.
func (w *worker) agentChanged(now time.Time) {
	w.mu.Lock()
	a := w.agent.state()
	w.mu.Unlock()
	if a == nil {
		return
	}
	args := []any{"state", a.State, "event", a.Event}
	if a.Tool != "" {
		args = append(args, "tool", a.Tool)
	}
	if a.Command != "" {
		args = append(args, "command", clipText(a.Command, 200))
	}
	if len(a.Questions) > 0 {
		args = append(args, "question", clipText(a.Questions[0].Question, 200), "questions", len(a.Questions))
	}
	if a.State == api.AgentIdle {
		args = append(args, "background_tasks", a.BackgroundTasks, "last_message", clipText(a.LastMessage, 200))
	}
	if a.Error != "" {
		args = append(args, "error", a.Error)
	}
	if a.ResetAt != nil {
		args = append(args, "reset_at", a.ResetAt.Format(time.RFC3339))
	}
	w.log.Info("agent state", args...)
	w.check(now, true)
	if w.spec.EndWhenIdle && a.State == api.AgentIdle && a.BackgroundTasks == 0 {
		if e := w.requestEnd("its turn ended"); e != nil {
			w.log.Warn("end after the turn", "err", e.Message)
		}
	}
}

// waitingHold reports whether the agent in state st waits on a request a
// hook call may hold.
func waitingHold(st api.AgentState) bool {
	return st == api.AgentWaitingPermission || st == api.AgentWaitingAnswer
}

// questionAnswers is the hook output that answers the AskUserQuestion
// whose tool input is input with text: an allow whose updatedInput is the
// input with "answers" mapping every question to text (Claude Code
// 2.1.330 records exactly those answers, as if typed as free text).
func questionAnswers(input json.RawMessage, text string) (json.RawMessage, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("AskUserQuestion input: %w", err)
	}
	answers := map[string]string{}
	for _, q := range toolQuestions(input) {
		answers[q.Question] = text
	}
	if len(answers) == 0 {
		return nil, fmt.Errorf("AskUserQuestion input holds no question")
	}
	a, err := json.Marshal(answers)
	if err != nil {
		return nil, err
	}
	in["answers"] = a
	var out struct {
		HookSpecificOutput struct {
			HookEventName string `json:"hookEventName"`
			Decision      struct {
				Behavior     string                     `json:"behavior"`
				UpdatedInput map[string]json.RawMessage `json:"updatedInput"`
			} `json:"decision"`
		} `json:"hookSpecificOutput"`
	}
	out.HookSpecificOutput.HookEventName = HookPermissionRequest
	out.HookSpecificOutput.Decision.Behavior = api.DecisionAllow
	out.HookSpecificOutput.Decision.UpdatedInput = in
	return json.Marshal(out)
}

// permissionDecision is the hook output of a PermissionRequest decided by
// a person.
func permissionDecision(decision, message string) json.RawMessage {
	type dec struct {
		Behavior string `json:"behavior"`
		Message  string `json:"message,omitempty"`
	}
	var out struct {
		HookSpecificOutput struct {
			HookEventName string `json:"hookEventName"`
			Decision      dec    `json:"decision"`
		} `json:"hookSpecificOutput"`
	}
	out.HookSpecificOutput.HookEventName = HookPermissionRequest
	out.HookSpecificOutput.Decision = dec{Behavior: decision, Message: message}
	b, _ := json.Marshal(out) // plain strings: cannot fail
	return b
}

// respond delivers a person's answer by the agent's state:
//   - waiting_permission: Decision answers the held hook call (allow, or
//     deny with Text as the reason), or without a held call picks the
//     dialog's answer by keys;
//   - waiting_answer: Text answers the open question as written, once its
//     dialog is on the screen: for one question (not multiSelect) the
//     digit of its "Type something." entry (which only moves the focus
//     there), the text, Enter; for several or a multiSelect one, Esc (the
//     questions are declined and the turn interrupted) and the text and
//     Enter as the next message;
//   - idle, api_error, working, starting, or no hooks seen (a custom
//     agent): Text and Enter, its next prompt (a working Claude Code
//     queues it).
//
// Text and Decision both empty is bad_request, as is a Decision when no
// permission waits. Every answer is logged with who gave it and to what.
func (w *worker) respond(p *proto.RespondParams) (*proto.RespondResult, *proto.RPCError) {
	if p.Text == "" && p.Decision == "" {
		return nil, &proto.RPCError{Code: proto.CodeBadRequest, Message: "respond: give text (an answer or a prompt) or a decision (allow or deny)"}
	}
	if p.Decision != "" && p.Decision != api.DecisionAllow && p.Decision != api.DecisionDeny {
		return nil, &proto.RPCError{Code: proto.CodeBadRequest, Message: fmt.Sprintf("respond: decision %q: want %q or %q", clip(p.Decision, 32), api.DecisionAllow, api.DecisionDeny)}
	}
	if strings.ContainsRune(p.Text, 0) || proto.HasCtl(p.By) {
		return nil, &proto.RPCError{Code: proto.CodeBadRequest, Message: "respond: text holds a NUL byte or by holds control characters"}
	}
	if _, e := w.runningChild(); e != nil {
		return nil, e
	}
	w.respondMu.Lock() // one answer at a time: keys must not interleave
	defer w.respondMu.Unlock()
	by := p.By
	if by == "" {
		by = "someone"
	}
	now := time.Now()
	w.mu.Lock()
	a := w.agent.state()
	st := api.AgentState("")
	if a != nil {
		st = a.State
	}
	var h *hold
	if waitingHold(st) && len(w.holds) > 0 {
		h = w.holds[0]
	}
	w.mu.Unlock()

	switch {
	case st == api.AgentEnded || w.isEnding():
		return nil, &proto.RPCError{Code: proto.CodeSessionNotRunning, Message: fmt.Sprintf("session %s: the agent is ending", w.spec.SessionID)}
	case p.Decision != "" && st != api.AgentWaitingPermission:
		return nil, &proto.RPCError{Code: proto.CodeBadRequest, Message: fmt.Sprintf("respond: session %s: a decision answers a permission request, but the agent is %s", w.spec.SessionID, stateName(st))}
	case st == api.AgentWaitingPermission && p.Decision == "":
		return nil, &proto.RPCError{Code: proto.CodeBadRequest, Message: fmt.Sprintf("respond: session %s waits for permission to use %s: give a decision (allow or deny)", w.spec.SessionID, a.Tool)}
	case st == api.AgentWaitingPermission:
		return w.decide(p, by, a, h, now)
	case st == api.AgentWaitingAnswer:
		return w.answer(p, by, a, h, now)
	}
	// Its next prompt.
	w.log.Info("respond: prompt", "by", by, "what", "prompt", "agent_state", stateName(st), "text", clipText(p.Text, 200))
	if e := w.typeKeys(p.Text, "\r"); e != nil {
		return nil, e
	}
	// The prompt starts a turn: an agent that was idle or stopped at an
	// API error is working from now on, as after an answered question,
	// until its hooks say more. Else, until the agent's own turn-start
	// event came (UserPromptSubmit; later still on a loaded machine), the
	// old turn's end would stand for this one's, and a controller tick in
	// between would count the person's answer as more idle time and
	// escalate the answered question again. An event that came meanwhile
	// (the agent was quicker) is newer, and stands.
	w.mu.Lock()
	changed := false
	if cur := w.agent.cur; a != nil && cur != nil && (st == api.AgentIdle || st == api.AgentAPIError) &&
		cur.State == st && cur.LastEvent.Equal(a.LastEvent) {
		changed = w.movedOn(now, "")
	}
	w.mu.Unlock()
	if changed {
		w.agentChanged(now)
	}
	return w.respondResult(proto.DeliveredKeys), nil
}

// decide answers a permission request: the held hook call, or the dialog
// by keys when the hook gave up (its connection ended).
func (w *worker) decide(p *proto.RespondParams, by string, a *api.Agent, h *hold, now time.Time) (*proto.RespondResult, *proto.RPCError) {
	msg := ""
	if p.Decision == api.DecisionDeny {
		msg = p.Text
		if msg == "" {
			msg = "denied by " + by
		}
	}
	w.log.Info("respond: permission", "by", by, "what", p.Decision, "tool", a.Tool, "command", clipText(a.Command, 500), "message", clipText(msg, 200))
	delivered := proto.DeliveredHook
	if h != nil {
		w.mu.Lock()
		if len(w.holds) > 0 && w.holds[0] == h {
			w.holds = w.holds[1:]
		} else {
			h = nil // let go meanwhile: the dialog is the agent's now
		}
		w.mu.Unlock()
	}
	if h != nil {
		h.c.reply(h.id, proto.HookResult{Output: permissionDecision(p.Decision, msg)})
	} else {
		// Claude Code's permission dialog: 1 is "Yes"; Esc declines, and
		// the reason then goes as the next message. The same keys answer
		// the Gemini CLI's ("1. Allow once", "No, suggest changes (esc)").
		delivered = proto.DeliveredKeys
		if e := w.waitDialog(); e != nil {
			return nil, e
		}
		var e *proto.RPCError
		switch {
		case p.Decision == api.DecisionAllow:
			e = w.typeKeys("1")
		case p.Text == "":
			e = w.typeKeys("\x1b")
		default:
			e = w.escapeThenPrompt(p.Text)
		}
		if e != nil {
			return nil, e
		}
	}
	w.mu.Lock()
	changed := false
	switch {
	case len(w.holds) > 0:
		changed = w.agent.waitPermission(now, w.holds[0].tool, w.holds[0].input)
	case w.agent.cur == nil || w.agent.cur.State != api.AgentWaitingPermission:
	case delivered == proto.DeliveredKeys && p.Decision == api.DecisionDeny && p.Text == "":
		// Esc interrupted the turn: the agent is at its prompt, and no
		// hook event says so.
		changed = w.agent.dialogClosed(now)
	default:
		changed = w.movedOn(now, a.Tool)
	}
	w.mu.Unlock()
	if changed {
		w.agentChanged(now)
	}
	return w.respondResult(delivered), nil
}

// answer answers an open AskUserQuestion: through its held hook call
// when there is one (every question of the form gets the text as its
// answer), else by keys.
func (w *worker) answer(p *proto.RespondParams, by string, a *api.Agent, h *hold, now time.Time) (*proto.RespondResult, *proto.RPCError) {
	if p.Text == "" {
		return nil, &proto.RPCError{Code: proto.CodeBadRequest, Message: fmt.Sprintf("respond: session %s asks a question: give the answer as text", w.spec.SessionID)}
	}
	q := ""
	if len(a.Questions) > 0 {
		q = a.Questions[0].Question
	}
	w.log.Info("respond: answer", "by", by, "what", "answer", "question", clipText(q, 200), "questions", len(a.Questions), "text", clipText(p.Text, 200))
	if h != nil && h.tool == toolAskUserQuestion {
		out, err := questionAnswers(h.input, p.Text)
		w.mu.Lock()
		if err != nil || len(w.holds) == 0 || w.holds[0] != h {
			h = nil // unreadable, or let go meanwhile: the dialog is the agent's now
		} else {
			w.holds = w.holds[1:]
		}
		w.mu.Unlock()
		if h != nil {
			h.c.reply(h.id, proto.HookResult{Output: out})
			w.mu.Lock()
			changed := false
			switch {
			case len(w.holds) > 0:
				changed = w.agent.waitPermission(now, w.holds[0].tool, w.holds[0].input)
			case w.agent.cur != nil && w.agent.cur.State == api.AgentWaitingAnswer:
				changed = w.movedOn(now, "")
			}
			w.mu.Unlock()
			if changed {
				w.agentChanged(now)
			}
			return w.respondResult(proto.DeliveredHook), nil
		}
	}
	if e := w.waitDialog(); e != nil {
		return nil, e
	}
	var e *proto.RPCError
	if len(a.Questions) == 1 && !a.Questions[0].MultiSelect {
		e = w.typeFreeText(len(a.Questions[0].Options)+1, p.Text)
	} else {
		// Several questions, or checkboxes (where Enter toggles one):
		// Esc declines the form, and the text is the next message.
		e = w.escapeThenPrompt(p.Text)
	}
	if e != nil {
		return nil, e
	}
	w.mu.Lock()
	changed := false
	if w.agent.cur != nil && w.agent.cur.State == api.AgentWaitingAnswer {
		changed = w.movedOn(now, "")
	}
	w.mu.Unlock()
	if changed {
		w.agentChanged(now)
	}
	return w.respondResult(proto.DeliveredKeys), nil
}

// claudeDialogMarker is on the screen while one of Claude Code's dialogs
// is open: a question ("Enter to select · ↑/↓ to navigate · Esc to
// cancel", or "Tab/Arrow keys" with several questions) or a permission
// ("Esc to cancel · Tab to amend").
const claudeDialogMarker = "Esc to cancel"

// dialogMarkers are on the screen while the agent's dialog is open, one of
// them at least: Claude Code's, and those the agent's kind gave
// (Spec.DialogMarkers: the Gemini CLI's approval dialog, whose 1 also
// allows and Esc also declines).
func (w *worker) dialogMarkers() []string {
	return append([]string{claudeDialogMarker}, w.spec.DialogMarkers...)
}

// dialogOpen reports whether the screen text shows a dialog.
func (w *worker) dialogOpen(text string) bool { return containsAny(text, w.dialogMarkers()) }

// containsAny reports whether text contains one of subs.
func containsAny(text string, subs []string) bool {
	for _, s := range subs {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// Bounds of the waits for the screen while an answer is typed: for a
// dialog to be drawn (Claude Code draws it a moment after the hook that
// announced it returned; keys typed before go to its prompt), and for
// each key's effect.
const (
	dialogWait = 10 * time.Second
	keyWait    = 5 * time.Second
)

// waitScreen waits, at most timeout, until the agent's screen shows want
// (or, with gone, no longer shows it). Claude Code draws its prompt with
// a no-break space after ❯: the screen is matched with plain spaces.
func (w *worker) waitScreen(want string, gone bool, timeout time.Duration) (bool, *proto.RPCError) {
	return w.waitScreenFunc(func(text string) bool { return strings.Contains(text, want) }, gone, timeout)
}

// waitScreenFunc is waitScreen for a screen that shows(text).
func (w *worker) waitScreenFunc(shows func(text string) bool, gone bool, timeout time.Duration) (bool, *proto.RPCError) {
	deadline := time.Now().Add(timeout)
	for {
		text := strings.ReplaceAll(w.scr.text(w.out), "\u00a0", " ")
		if shows(text) != gone {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if _, e := w.runningChild(); e != nil {
			return false, e
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDialog waits until a dialog is on the agent's screen.
func (w *worker) waitDialog() *proto.RPCError {
	ok, e := w.waitScreenFunc(w.dialogOpen, false, dialogWait)
	if e == nil && !ok {
		e = &proto.RPCError{Code: proto.CodeIOError, Message: fmt.Sprintf("session %s: the agent's dialog is not on its screen after %s (no line with %q); nothing was typed: try again, or look with legion attach", w.spec.SessionID, dialogWait, w.dialogMarkers())}
	}
	return e
}

// typeFreeText answers a single question's dialog with text, the way
// Claude Code takes it: each key in a write of its own, once the screen
// shows the one before took effect (a digit and text in one write read
// as a paste, and record option 1). The digit of "Type something." moves
// the focus there; the text then replaces its label; Enter submits.
func (w *worker) typeFreeText(digit int, text string) *proto.RPCError {
	if e := w.typeKeys(fmt.Sprint(digit)); e != nil {
		return e
	}
	field := fmt.Sprintf("❯ %d. ", digit)
	ok, e := w.waitScreen(field+"Type something.", false, keyWait)
	if e != nil {
		return e
	}
	if !ok {
		return &proto.RPCError{Code: proto.CodeIOError, Message: fmt.Sprintf("session %s: the question's %q entry did not take the focus after %s; the answer was not typed: look with legion attach", w.spec.SessionID, field+"Type something.", keyWait)}
	}
	if e := w.typeKeys(text); e != nil {
		return e
	}
	echo := strings.Join(strings.Fields(text), " ")
	if r := []rune(echo); len(r) > 16 {
		echo = string(r[:16])
	}
	if ok, e := w.waitScreen(field+echo, false, keyWait); e != nil {
		return e
	} else if !ok {
		w.log.Warn("the answer's text is not on the question's screen; submitting it all the same", "wait", keyWait)
	}
	return w.typeKeys("\r")
}

// escapeThenPrompt closes a dialog with Esc (declining it: the turn is
// interrupted and the prompt is back) and sends text as the next prompt.
func (w *worker) escapeThenPrompt(text string) *proto.RPCError {
	if e := w.typeKeys("\x1b"); e != nil {
		return e
	}
	if ok, e := w.waitScreenFunc(w.dialogOpen, true, keyWait); e != nil {
		return e
	} else if !ok {
		w.log.Warn("the dialog is still on the screen after Esc; typing the text all the same", "wait", keyWait)
	}
	time.Sleep(keyPause) // an Esc followed at once by text reads as Alt+key
	return w.typeKeys(text, "\r")
}

// typeKeys writes each step to the agent's terminal, keyPause apart. A
// carriage return inside a step's text would submit it early: it goes as
// a line feed.
func (w *worker) typeKeys(steps ...string) *proto.RPCError {
	for i, s := range steps {
		if i > 0 {
			time.Sleep(keyPause)
		}
		if len(s) > 1 {
			s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
		}
		if e := w.input([]byte(s)); e != nil {
			return e
		}
	}
	return nil
}

func (w *worker) respondResult(how string) *proto.RespondResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	return &proto.RespondResult{Delivered: how, Agent: w.agent.state()}
}

// stateName names an agent state for messages ("" is no hook seen).
func stateName(st api.AgentState) string {
	if st == "" {
		return "not reporting its state (no hook event seen)"
	}
	return string(st)
}

// requestEnd ends the agent because its work is done: Run sends it SIGINT
// (Claude Code exits 0 at once), then SIGHUP and SIGKILL as for a
// removal, records "completed: <reason>" and returns nil: the unit ends
// as a success and is not restarted. Too late once the agent has ended
// by itself.
func (w *worker) requestEnd(reason string) *proto.RPCError {
	reason = strings.Join(strings.Fields(reason), " ")
	if reason == "" || proto.HasCtl(reason) {
		return &proto.RPCError{Code: proto.CodeBadRequest, Message: "end: give a reason (printable text, e.g. \"worker-done and its turn ended\")"}
	}
	reason = clipText(reason, maxEndReason)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.ending || w.removing:
		return nil // already on its way out
	case w.ended:
		return &proto.RPCError{Code: proto.CodeSessionNotRunning, Message: fmt.Sprintf("session %s is %s: the agent has ended by itself", w.spec.SessionID, w.state)}
	}
	w.ending, w.endReason = true, reason
	close(w.endCh)
	return nil
}

func (w *worker) isEnding() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ending
}

// movedOn is the agent's state after a person's answer (or Legion's next
// prompt) went to it, with w.mu held: working on. The answer is also its
// sign of life until its own hooks say more: its turn-start event may come
// late on a loaded machine, and the watchdog must not judge the wait that
// just ended (at its prompt, at its API's limit) as silence.
func (w *worker) movedOn(now time.Time, tool string) bool {
	w.lastHook = now
	return w.agent.moveOn(now, tool)
}
