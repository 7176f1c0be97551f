package api

import (
	"encoding/json"
	"time"
)

// The agent's own state, as its hooks tell it (for Claude Code:
// SessionStart, UserPromptSubmit, Pre/PostToolUse, PermissionRequest,
// Notification, Stop, StopFailure, Subagent*, SessionEnd). A session's
// State says what systemd and the worker see (running, stale, failed, ...);
// its Agent says what the agent inside is doing. A custom agent has no
// hooks and so no Agent.

// AgentState is what the agent is doing.
type AgentState string

// Agent states.
const (
	AgentStarting          AgentState = "starting"           // started, no prompt submitted yet
	AgentWorking           AgentState = "working"            // a turn is running
	AgentIdle              AgentState = "idle"               // its turn ended: it waits at its prompt
	AgentWaitingPermission AgentState = "waiting_permission" // a permission dialog is open (Tool, Command)
	AgentWaitingAnswer     AgentState = "waiting_answer"     // a question to the human is open (Questions)
	AgentAPIError          AgentState = "api_error"          // its turn failed at the API: rate limit, auth, overload (Error, ResetAt)
	AgentEnded             AgentState = "ended"              // it is ending or ended
)

// WaitsOnHuman reports whether the agent can go on only once a person
// answers: a permission, a question, or an API failure.
func (s AgentState) WaitsOnHuman() bool {
	return s == AgentWaitingPermission || s == AgentWaitingAnswer || s == AgentAPIError
}

// Agent is the agent's state with what goes with it.
type Agent struct {
	State     AgentState      `json:"state"`
	Since     time.Time       `json:"since"`                // when it entered State
	LastEvent time.Time       `json:"last_event,omitzero"`  // the newest hook event
	Event     string          `json:"event,omitempty"`      // that event's name, e.g. "PostToolUse"
	Tool      string          `json:"tool,omitempty"`       // working or waiting_permission: the tool
	Command   string          `json:"command,omitempty"`    // waiting_permission: what the tool would do, exactly (Bash's command, a file's path)
	ToolInput json.RawMessage `json:"tool_input,omitempty"` // waiting_permission: the tool's whole input
	Questions []Question      `json:"questions,omitempty"`  // waiting_answer
	// LastMessage is the agent's last assistant message (Stop's
	// last_assistant_message): what it says when its turn ended.
	LastMessage string `json:"last_message,omitempty"`
	// BackgroundTasks counts subagents still running when its turn
	// ended: a turn is over only once they are done too.
	BackgroundTasks int        `json:"background_tasks,omitempty"`
	Error           string     `json:"error,omitempty"`    // api_error: what failed, as the agent says
	ResetAt         *time.Time `json:"reset_at,omitempty"` // api_error from a rate limit: when it lifts, if the API said
}

// Question is one question of an open AskUserQuestion.
type Question struct {
	Question    string   `json:"question"`
	Header      string   `json:"header,omitempty"`
	Options     []string `json:"options,omitempty"` // the offered answers' labels, in order
	MultiSelect bool     `json:"multi_select,omitempty"`
}

// Permission decisions, in RespondArgs.Decision.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// Groups of Legion's own commands, in SpawnArgs.OwnCommands: the tracker
// commands Legion's instructions name, which a worker allows without
// asking a person when the agent runs one for its own team and issue.
const (
	OwnIssue          = "issue"           // legion issue show|comment|label|unlabel|move TEAM ISSUE …
	OwnState          = "state"           // legion state TEAM [--json]
	OwnWorktreeFinish = "worktree finish" // legion worktree finish TEAM ISSUE
)

// RespondArgs are the args of sessions.respond: a person's answer to what
// the agent waits on, delivered the way the agent's state needs (see
// CmdSessionsRespond). By names who decided, for the journal.
type RespondArgs struct {
	Name     string `json:"name"`
	Text     string `json:"text,omitempty"`     // an answer or a next prompt, as the person wrote it
	Decision string `json:"decision,omitempty"` // waiting_permission: DecisionAllow or DecisionDeny
	By       string `json:"by,omitempty"`       // who answered, e.g. the tracker comment's author
}

// EndArgs are the args of sessions.end.
type EndArgs struct {
	Name   string `json:"name"`
	Reason string `json:"reason"` // e.g. "worker-done and its turn ended"
}

// Commands about the agent inside a session.
const (
	// CmdSessionsRespond delivers a person's answer: with waiting_answer
	// Text answers the open question as written (never an option picked by
	// accident); with waiting_permission Decision allows or denies the tool
	// (Text, with deny, tells the agent why); with idle or api_error Text
	// is its next prompt. Args: RespondArgs; result: StatusResult.
	CmdSessionsRespond = "sessions.respond"
	// CmdSessionsEnd ends the agent cleanly because its phase is done: the
	// worker exits 0 and its unit ends as a success, with no restart.
	// Args: EndArgs; result: StatusResult.
	CmdSessionsEnd = "sessions.end"
)
