package ptyworker

// The agent's state from its hooks (agent kind claude): a small state
// machine over the hook events `legion hook` forwards (hookpayload.go).
//
//	SessionStart                          -> starting
//	UserPromptSubmit, SubagentStart       -> working
//	PreToolUse, PostToolUse(Failure)      -> working (Tool); a subagent's
//	                                         leave an idle agent idle
//	PermissionRequest AskUserQuestion     -> waiting_answer (Questions)
//	PermissionRequest any other tool      -> waiting_permission (Tool, Command, ToolInput)
//	Notification permission_prompt        -> waiting_permission, unless already waiting
//	Stop                                  -> idle (LastMessage, BackgroundTasks)
//	SubagentStop                          -> one background task fewer
//	StopFailure                           -> api_error (Error, ResetAt)
//	SessionEnd                            -> ended
//
// Every event sets LastEvent and Event; other events and fields are
// ignored. The machine is pure: the worker (hook.go) holds the permission
// hooks that wait for a person and says what respond changed: an answered
// permission or question, and a prompt typed to an idle agent (or one
// stopped at an API error), leave the agent working (Event "respond")
// until its next event.

import (
	"encoding/json"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// agentMachine is the agent's state as its hooks tell it.
type agentMachine struct {
	cur *api.Agent // nil before the first hook event
	// The newest PreToolUse of the main agent, for a permission_prompt
	// notification, which does not name the tool.
	lastTool  string
	lastInput json.RawMessage
}

// state returns a copy of the current state, nil before any hook event.
// The copy shares slices with the machine, which replaces them and never
// changes them in place.
func (m *agentMachine) state() *api.Agent {
	if m.cur == nil {
		return nil
	}
	a := *m.cur
	return &a
}

// apply applies one hook event at now and reports whether the state
// changed in a way worth telling (see SameAgentState).
func (m *agentMachine) apply(ev *hookEvent, now time.Time) bool {
	old := m.state()
	a := api.Agent{State: api.AgentStarting}
	if old != nil {
		a = *old
	}
	a.LastEvent, a.Event = now, ev.Name
	sub := ev.AgentID != ""
	switch ev.Name {
	case HookSessionStart:
		a = api.Agent{State: api.AgentStarting, LastEvent: now, Event: ev.Name}
		m.lastTool, m.lastInput = "", nil
	case HookUserPromptSubmit, HookSubagentStart:
		setState(&a, api.AgentWorking, "")
	case HookPreToolUse, HookPostToolUse, HookPostToolUseFailure:
		if !sub {
			m.lastTool, m.lastInput = ev.ToolName, ev.ToolInput
		}
		if sub && a.State != api.AgentWorking && a.State != api.AgentStarting {
			break // a background subagent's tool: the agent still idles or waits
		}
		setState(&a, api.AgentWorking, ev.ToolName)
	case HookPermissionRequest:
		if ev.ToolName == toolAskUserQuestion {
			setState(&a, api.AgentWaitingAnswer, "")
			a.Questions = toolQuestions(ev.ToolInput)
			break
		}
		setPermission(&a, ev.ToolName, ev.ToolInput)
	case HookNotification:
		if ev.NotificationType == "permission_prompt" && a.State != api.AgentWaitingPermission && a.State != api.AgentWaitingAnswer {
			setPermission(&a, m.lastTool, m.lastInput)
		}
	case HookStop:
		setState(&a, api.AgentIdle, "")
		a.LastMessage, a.BackgroundTasks = ev.LastMessage, ev.BackgroundTasks
	case HookSubagentStop:
		if a.BackgroundTasks > 0 {
			a.BackgroundTasks--
		}
	case HookStopFailure:
		setState(&a, api.AgentAPIError, "")
		a.Error, a.ResetAt = ev.Error, ev.ResetAt
	case HookSessionEnd:
		setState(&a, api.AgentEnded, "")
	default:
		if old == nil {
			return false // an event it does not know says nothing of the state
		}
	}
	if old == nil || a.State != old.State {
		a.Since = now
	}
	m.cur = &a
	return old == nil || !proto.SameAgentState(old, &a)
}

// setState moves a to state st with tool (working: the tool in use),
// clearing what belongs to other states.
func setState(a *api.Agent, st api.AgentState, tool string) {
	a.State, a.Tool = st, tool
	a.Command, a.ToolInput, a.Questions = "", nil, nil
	a.Error, a.ResetAt = "", nil
	if st != api.AgentIdle {
		a.LastMessage = "" // the last turn's; BackgroundTasks stay: a new turn does not end its subagents
	}
}

func setPermission(a *api.Agent, tool string, input json.RawMessage) {
	setState(a, api.AgentWaitingPermission, tool)
	a.Command, a.ToolInput = toolCommand(input), boundToolInput(input)
}

// moveOn is the state after a person's answer went to the agent: working
// on (the tool allowed or denied, the question answered).
func (m *agentMachine) moveOn(now time.Time, tool string) bool {
	if m.cur == nil {
		return false
	}
	old := m.state()
	a := *old
	setState(&a, api.AgentWorking, tool)
	a.Event = "respond"
	if a.State != old.State {
		a.Since = now
	}
	m.cur = &a
	return !proto.SameAgentState(old, &a)
}

// dialogClosed is the state after a permission dialog was answered in
// the agent's terminal (its hook went away): idle at its prompt, unless
// an event says otherwise.
func (m *agentMachine) dialogClosed(now time.Time) bool {
	if m.cur == nil {
		return false
	}
	old := m.state()
	a := *old
	setState(&a, api.AgentIdle, "")
	a.Event = "dialog answered in the terminal"
	a.Since = now
	m.cur = &a
	return !proto.SameAgentState(old, &a)
}

// waitPermission shows a held permission request again (one that is
// still waiting when another event moved the state on): waiting_answer
// for an AskUserQuestion, waiting_permission for any other tool.
func (m *agentMachine) waitPermission(now time.Time, tool string, input json.RawMessage) bool {
	if m.cur == nil {
		return false
	}
	old := m.state()
	a := *old
	if tool == toolAskUserQuestion {
		setState(&a, api.AgentWaitingAnswer, "")
		a.Questions = toolQuestions(input)
	} else {
		setPermission(&a, tool, input)
	}
	if a.State != old.State {
		a.Since = now
	}
	m.cur = &a
	return !proto.SameAgentState(old, &a)
}
