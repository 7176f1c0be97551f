package controller

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller/workspace"
)

// Status is an issue's workflow status; the status is the phase.
type Status string

// The statuses Legion acts on. Trackers map their own names onto these;
// any other status (Backlog, Canceled, ...) gets ActionNone.
const (
	StatusTodo        Status = "Todo"
	StatusInProgress  Status = "In Progress"
	StatusNeedsReview Status = "Needs Review"
	StatusRetro       Status = "Retro"
	StatusDone        Status = "Done"
)

// Labels of the label protocol (README: How an issue moves). Workers add LabelWorkerDone when
// their phase's work is complete; humans answer escalations by adding
// LabelFeedbackGiven. LabelFinishing is Legion's own: the controller adds it
// when it starts the finisher, so that a Retro issue whose finisher ended
// without closing it is told apart from one whose retro is still to run.
const (
	LabelWorkerDone     = "worker-done"
	LabelFinishing      = "worker-finishing"
	LabelInputNeeded    = "user-input-needed"
	LabelFeedbackGiven  = "user-feedback-given"
	LabelApproved       = "worker-approved"
	LabelChangesRequest = "worker-changes-requested"
)

// Mode is what a worker session is started to do: the phase of the issue
// it works on. It is the last part of the worker's unit name.
type Mode string

// Modes of a worker session.
const (
	ModePlan      Mode = "plan"
	ModeImplement Mode = "implement"
	ModeReview    Mode = "review"
	ModeRetro     Mode = "retro"
	ModeFinish    Mode = "finish"
)

// Review is the review outcome found for an issue's branch or pull request.
type Review string

// Review outcomes; ReviewNone means no outcome label was found.
const (
	ReviewNone             Review = ""
	ReviewApproved         Review = "approved"
	ReviewChangesRequested Review = "changes_requested"
)

// Action is what the controller should do for one issue.
type Action string

// Actions, named as in `legion state --json`.
const (
	ActionDispatchPlanner     Action = "dispatch_planner"
	ActionDispatchImplementer Action = "dispatch_implementer"
	ActionDispatchReviewer    Action = "dispatch_reviewer"
	ActionResumeImplementer   Action = "resume_implementer"
	ActionTransitionToRetro   Action = "transition_to_retro"
	ActionDispatchFinisher    Action = "dispatch_finisher"
	ActionEscalateBlocked     Action = "escalate_blocked"
	ActionEscalateUnfinished  Action = "escalate_unfinished" // the finisher ended, the issue is open
	ActionEscalatePermission  Action = "escalate_permission" // the agent waits for a tool's approval
	ActionEscalateIdle        Action = "escalate_idle"       // its turn ended without worker-done
	ActionEscalateAPIError    Action = "escalate_api_error"  // its turn failed at the API (rate limit, auth)
	ActionEndWorker           Action = "end_worker"          // worker-done and its turn ended: end it cleanly
	ActionEscalateBudget      Action = "escalate_budget"     // over its budget: end its agent (if any), ask a person
	ActionEscalateRefused     Action = "escalate_refused"    // the dispatch was refused for a cause only a person can resolve (api.PersonError, issue_held)
	ActionResumeAfterLimit    Action = "resume_after_limit"  // its kind's usage limit lifted: prompt its agent to go on
	ActionRelayFeedback       Action = "relay_feedback"
	ActionFinishDispatch      Action = "finish_dispatch" // its dispatched worker completed before its tracker changes were made: make them
	ActionSkip                Action = "skip"
	ActionNone                Action = "none"
)

// Worker is the live agent session of an issue, if any.
type Worker struct {
	Mode     Mode   `json:"mode"`
	Session  string `json:"session"`
	Blocked  bool   `json:"blocked"`            // waits on an AskUserQuestion
	Question string `json:"question,omitempty"` // the pending question's text
	// Agent is what the agent is doing, from its hooks; nil for an agent
	// without hooks (kind custom), which is left alone while it runs.
	Agent *api.Agent `json:"agent,omitempty"`
}

// agentIn reports whether w's agent is in state s.
func (w *Worker) agentIn(s api.AgentState) bool {
	return w != nil && w.Agent != nil && w.Agent.State == s
}

// FailedWorker is a session of the issue that systemd gave up on: it hit
// its start limit (a restart loop) or failed for good. Its unit stays
// failed until someone runs `systemctl --user reset-failed` on it.
type FailedWorker struct {
	Mode    Mode   `json:"mode"`
	Session string `json:"session"`
	Unit    string `json:"unit"`
	Cause   string `json:"cause,omitempty"` // why, as the helper says
}

// why says why w failed: the helper's cause, or what a failed worker unit
// means when the helper gave none.
func (w FailedWorker) why() string {
	return cmp.Or(w.Cause, "its restarts hit the start limit, or it could not start")
}

// Issue is one issue as the decision sees it.
type Issue struct {
	ID     string   `json:"id"`
	Title  string   `json:"title"`
	Status Status   `json:"status"`
	Labels []string `json:"labels"`
	Review Review   `json:"review"`
	Worker *Worker  `json:"worker,omitempty"` // nil: no live worker
	// Failed are the issue's failed sessions: a mode listed here is not
	// started again until its unit is reset (see FailedWorker).
	Failed []FailedWorker `json:"failed,omitempty"`
	// Feedback is the latest human comment, relayed on user-feedback-given;
	// FeedbackBy is its author.
	Feedback   string `json:"feedback,omitempty"`
	FeedbackBy string `json:"feedback_by,omitempty"`
	// Worktree is the issue's worktree, reported (with would-be merge
	// conflicts); decided on only when it is broken (Problem): no worker
	// is started in it.
	Worktree *workspace.Worktree `json:"worktree,omitempty"`
	// Spend is what the issue's agents spent, read when the team has a
	// budget (nil otherwise, or when it could not be read: SpendError).
	Spend      *Spend `json:"spend,omitempty"`
	SpendError string `json:"spend_error,omitempty"`
	// Dispatched is the issue's dispatch whose tracker changes may not be
	// made yet (see Dispatched); Completed is when each mode's newest
	// session of the issue exited cleanly, as the helper lists them.
	Dispatched *Dispatch          `json:"dispatched,omitempty"`
	Completed  map[Mode]time.Time `json:"completed,omitempty"`
}

// HasLabel reports whether the issue carries label l.
func (i Issue) HasLabel(l string) bool { return slices.Contains(i.Labels, l) }

// failed returns the issue's failed session in mode, or nil.
func (i Issue) failed(mode Mode) *FailedWorker {
	if mode == "" {
		return nil
	}
	for k := range i.Failed {
		if i.Failed[k].Mode == mode {
			return &i.Failed[k]
		}
	}
	return nil
}

// State is everything Decide reads.
type State struct {
	// WIPLimit caps live code workers (every mode but review); 0 is unlimited.
	WIPLimit int `json:"wip_limit"`
	// LabelReviews says review outcomes are labels on the issue itself
	// (the local review source), so they never lag behind worker-done.
	LabelReviews bool    `json:"label_reviews"`
	Issues       []Issue `json:"issues"`
	// Now is the time of the collection; IdleGrace is how long an agent
	// may sit at its prompt without worker-done before it is escalated
	// (0: at once).
	Now       time.Time     `json:"now"`
	IdleGrace time.Duration `json:"idle_grace"`
	// Room is the room the machine and the team have for more agents;
	// the zero Room admits every dispatch.
	Room Room `json:"room"`
	// Budget is the team's budget and its spend today; nil when it has
	// none.
	Budget *SpendBudget `json:"budget,omitempty"`
	// KindOf is the agent kind of each mode (agent.kind, kind_by_mode);
	// Pauses are the kinds waiting at their API's limit (Limits), and
	// LimitWindows each kind's longest limit, which the backoff never
	// exceeds.
	KindOf       map[Mode]string          `json:"kind_of,omitempty"`
	Pauses       map[string]*Pause        `json:"pauses,omitempty"`
	LimitWindows map[string]time.Duration `json:"limit_windows,omitempty"`
	// LimitsProblem says what went wrong with the pauses' file.
	LimitsProblem string `json:"limits_problem,omitempty"`
}

// Decision is the suggested action for one issue and the tracker changes
// that go with it. Applying a decision is idempotent: labels are removed or
// added only when (not) present, moves to the current status are no-ops.
type Decision struct {
	Issue        string   `json:"issue"`
	Action       Action   `json:"suggested_action"`
	Reason       string   `json:"reason"`
	Mode         Mode     `json:"mode,omitempty"`    // the worker mode to start or resume
	MoveTo       Status   `json:"move_to,omitempty"` // new status, if any
	RemoveLabels []string `json:"remove_labels,omitempty"`
	AddLabels    []string `json:"add_labels,omitempty"`
	Comment      string   `json:"comment,omitempty"` // posted on the issue
	// Input is a person's answer for the live worker's agent, delivered as
	// its state needs (sessions.respond): the answer to its question, its
	// next prompt, or with Permission the reason of a denial.
	Input string `json:"input,omitempty"`
	// Permission is a person's decision on the tool the agent waits to
	// use: api.DecisionAllow or api.DecisionDeny.
	Permission string `json:"permission,omitempty"`
	InputBy    string `json:"input_by,omitempty"` // who answered (the comment's author)
	// Room is set when the decision would start an agent but waits for
	// room (Action is ActionSkip): the issue is not stalled.
	Room *RoomWait `json:"waiting_for_room,omitempty"`
}

// codeWorker reports whether a worker in mode counts against the WIP limit:
// every mode but review, which is short-lived.
func codeWorker(mode Mode) bool { return mode != ModeReview }

// Decide returns one decision per issue, in the order of s.Issues. It is
// pure: the same State always gives the same decisions. The WIP limit and
// then the room (s.Room: the team's and the machine's session limits, the
// memory one more agent needs) are applied in issue order, counting live
// workers first and each admitted dispatch as it goes.
func Decide(s State) []Decision {
	room := newAdmission(s)
	live := 0
	for _, is := range s.Issues {
		if is.Worker != nil && codeWorker(is.Worker.Mode) {
			live++
		}
	}
	out := make([]Decision, 0, len(s.Issues))
	resume := resumable(s)
	for _, is := range s.Issues {
		d := applyBudget(applyLimits(decideIssue(is, s), is, s, resume), is, s)
		if wt := is.Worktree; wt != nil && wt.Problem != "" && startsWorker(d.Action) {
			// The worker would run in it: its dispatch would fail.
			d = Decision{Issue: is.ID, Action: ActionSkip,
				Reason: fmt.Sprintf("would %s, but %s", d.Action, wt.Problem)}
		}
		if f := is.failed(d.Mode); f != nil && startsWorker(d.Action) {
			// Starting it again would reset systemd's start limit and so
			// undo what it is for: a restart loop stops and stays stopped
			// until a person looks.
			d = Decision{Issue: is.ID, Action: ActionSkip,
				Reason: fmt.Sprintf("the %s worker failed for good (%s); "+
					"see `journalctl --user -u '%s'`, then `systemctl --user reset-failed '%s'` lets Legion %s again",
					f.Mode, f.why(), f.Unit, f.Unit, d.Action)}
		}
		if d.Mode != "" && startsWorker(d.Action) {
			code := codeWorker(d.Mode)
			if code && s.WIPLimit > 0 && live >= s.WIPLimit {
				d = Decision{Issue: is.ID, Action: ActionSkip,
					Reason: fmt.Sprintf("WIP limit %d reached (%d code workers live); would %s", s.WIPLimit, live, d.Action)}
			} else if w := room.check(); w != nil {
				d = Decision{Issue: is.ID, Action: ActionSkip, Room: w,
					Reason: fmt.Sprintf("waiting for room: %s; would %s", w.Text, d.Action)}
			} else {
				room.admit()
				if code {
					live++
				}
			}
		}
		out = append(out, d)
	}
	return out
}

func startsWorker(a Action) bool {
	switch a {
	case ActionDispatchPlanner, ActionDispatchImplementer, ActionDispatchReviewer,
		ActionResumeImplementer, ActionTransitionToRetro, ActionDispatchFinisher:
		return true
	}
	return false
}

// decideIssue is the status × label table (README: How an issue moves), with two rules
// before it: human-input labels win, and a live worker is never disturbed
// except to escalate its question.
func decideIssue(is Issue, s State) Decision {
	labelReviews := s.LabelReviews
	d := Decision{Issue: is.ID}
	if is.Status == StatusDone {
		// The finisher closes the issue itself (legion worktree finish
		// moves it to Done and takes worker-done away), so Done, not
		// worker-done, says its phase is over. An agent left at its prompt
		// would live on, holding a WIP slot, for ever.
		if w := is.Worker; w.agentIn(api.AgentIdle) && w.Agent.BackgroundTasks == 0 {
			d.Action, d.Reason = ActionEndWorker, "done, and the "+string(w.Mode)+" worker's turn ended: end it"
			return d
		}
		if w := is.Worker; w != nil && w.Agent != nil && w.Agent.State.WaitsOnHuman() {
			// Closed while its agent waited on a person: nobody will answer.
			d.Action, d.Reason = ActionEndWorker, "done, and the "+string(w.Mode)+" worker waits on a human ("+string(w.Agent.State)+"): end it"
			return d
		}
		d.Action, d.Reason = ActionNone, "done"
		return d
	}
	if r := is.Dispatched; r != nil && is.Worker == nil {
		if r.CompletedBy(is.Completed[r.Mode]) {
			// Dispatched, completed, and the controller gone before the
			// tracker changes: the labels still ask for that worker.
			d.Action, d.Mode = ActionFinishDispatch, r.Mode
			if r.MoveTo != is.Status {
				d.MoveTo = r.MoveTo
			}
			d.RemoveLabels = slices.DeleteFunc(slices.Clone(r.RemoveLabels), func(l string) bool { return !is.HasLabel(l) })
			d.Reason = "the " + string(r.Mode) + " worker dispatched before the controller stopped has completed its phase: make that dispatch's tracker changes, not a second run"
			return d
		}
	}
	switch {
	case is.HasLabel(LabelFeedbackGiven):
		if is.Worker == nil {
			return feedbackWithoutWorker(is, s)
		}
		if a := is.Worker.Agent; a != nil && (a.State == api.AgentStarting || a.State == api.AgentWorking) {
			// Typed into a turn, the answer lands wherever the agent's
			// input is then: an agent resumed after a crash that asks its
			// question again took the Enter as the first option, and the
			// text as its next prompt. It waits for the prompt or the
			// question.
			d.Action, d.Reason = ActionSkip, "a human answered; the answer waits until the "+string(is.Worker.Mode)+
				" worker's agent is at its prompt or asks (it is "+string(a.State)+")"
			return d
		}
		d.Action, d.Reason = ActionRelayFeedback, "relay the latest human comment to the "+string(is.Worker.Mode)+" worker"
		d.Input, d.InputBy = is.Feedback, is.FeedbackBy
		if is.Worker.agentIn(api.AgentWaitingPermission) {
			d.Permission, d.Input = PermissionDecision(is.Feedback)
			d.Reason = "relay the human's decision (" + d.Permission + ") on " + is.Worker.Agent.Tool + " to the " + string(is.Worker.Mode) + " worker"
		}
		d.RemoveLabels = []string{LabelFeedbackGiven, LabelInputNeeded}
		return d
	case is.HasLabel(LabelInputNeeded):
		d.Action, d.Reason = ActionSkip, "waiting for user input"
		return d
	case is.Worker.agentIn(api.AgentWaitingPermission):
		a := is.Worker.Agent
		d.Action, d.Reason = ActionEscalatePermission, "the "+string(is.Worker.Mode)+" worker waits for permission to use "+a.Tool
		d.Comment = "The " + string(is.Worker.Mode) + " agent asks permission to use " + a.Tool + ":\n\n" +
			indent(cmp.Or(a.Command, string(a.ToolInput))) +
			"\n\nReply with a comment starting with `approve` to let it, or `deny` and why (anything else is a denial " +
			"with your comment as the agent's instructions), then add the label " + LabelFeedbackGiven + "."
		d.AddLabels = []string{LabelInputNeeded}
		return d
	case is.Worker.agentIn(api.AgentAPIError):
		// Before the question rule: the helper reports this wait as
		// waiting_input too (Blocked).
		a := is.Worker.Agent
		d.Action, d.Reason = ActionEscalateAPIError, "the "+string(is.Worker.Mode)+" worker's turn failed at the API: "+a.Error
		reset := ""
		if a.ResetAt != nil {
			reset = " The limit lifts at " + a.ResetAt.UTC().Format(time.RFC3339) + "."
		}
		d.Comment = "The " + string(is.Worker.Mode) + " agent's turn failed at the model's API: " + strings.TrimRight(cmp.Or(a.Error, "no reason given"), ".") + "." + reset +
			" It is not restarted (that would fail the same way).\n\nWhen it can go on, comment what it should do next " +
			"(for instance `continue`), then add the label " + LabelFeedbackGiven + ": your comment becomes its next prompt."
		d.AddLabels = []string{LabelInputNeeded}
		return d
	case is.Worker != nil && (is.Worker.Blocked || is.Worker.agentIn(api.AgentWaitingAnswer)):
		d.Action, d.Reason = ActionEscalateBlocked, "the "+string(is.Worker.Mode)+" worker asks a question"
		d.Comment = "The " + string(is.Worker.Mode) + " agent asks: " + questionText(is.Worker) +
			"\n\nAnswer in a comment (your words reach the agent as written), then add the label " + LabelFeedbackGiven + "."
		d.AddLabels = []string{LabelInputNeeded}
		return d
	case is.Worker.agentIn(api.AgentIdle) && is.HasLabel(LabelWorkerDone):
		if n := is.Worker.Agent.BackgroundTasks; n > 0 {
			d.Action, d.Reason = ActionSkip, fmt.Sprintf("worker-done, and the %s worker's turn ended, but %d background task(s) still run", is.Worker.Mode, n)
			return d
		}
		d.Action, d.Reason = ActionEndWorker, "worker-done and the "+string(is.Worker.Mode)+" worker's turn ended: end it"
		return d
	case is.Worker.agentIn(api.AgentIdle):
		idle := s.Now.Sub(is.Worker.Agent.Since)
		if idle < s.IdleGrace {
			d.Action, d.Reason = ActionSkip, fmt.Sprintf("the %s worker's turn ended without worker-done %s ago; escalated after %s",
				is.Worker.Mode, idle.Round(time.Second), s.IdleGrace)
			return d
		}
		d.Action, d.Reason = ActionEscalateIdle, "the "+string(is.Worker.Mode)+" worker's turn ended without worker-done"
		d.Comment = "The " + string(is.Worker.Mode) + " agent stopped without finishing its phase (no " + LabelWorkerDone +
			") and says:\n\n" + indent(cmp.Or(is.Worker.Agent.LastMessage, "(nothing)")) +
			"\n\nAnswer in a comment, then add the label " + LabelFeedbackGiven + ": your comment becomes its next prompt."
		d.AddLabels = []string{LabelInputNeeded}
		return d
	case is.Worker != nil:
		d.Action, d.Reason = ActionSkip, "a "+string(is.Worker.Mode)+" worker is live"
		if r := is.Dispatched; r != nil && r.Mode == is.Worker.Mode {
			// Its dispatch's tracker changes were not made (the
			// controller was gone), and a worker-done on the issue may
			// now be the worker's own as well as the previous phase's:
			// the record is kept, and its changes are made once the
			// worker has completed its phase (ActionFinishDispatch).
			d.Reason += "; its dispatch's tracker changes wait for it to end"
			return d
		}
		// If the labels still ask for the very worker that is live, its
		// dispatch went through but the tracker changes that belong to it
		// did not: carry those out now (they are idempotent), or the issue
		// would dispatch the same worker again once this one exits.
		idle := is
		idle.Worker = nil
		w := decideIssue(idle, s)
		add := slices.DeleteFunc(slices.Clone(w.AddLabels), is.HasLabel)
		if startsWorker(w.Action) && w.Mode == is.Worker.Mode &&
			(w.MoveTo != "" && w.MoveTo != is.Status || len(w.RemoveLabels) > 0 || len(add) > 0) {
			d.MoveTo, d.RemoveLabels, d.AddLabels = w.MoveTo, w.RemoveLabels, add
			d.Reason += "; finishing the tracker changes of its dispatch"
		}
		return d
	}

	done := is.HasLabel(LabelWorkerDone)
	switch is.Status {
	case StatusTodo:
		if !done {
			return dispatch(d, ActionDispatchPlanner, ModePlan, "", "new issue: plan it")
		}
		d = dispatch(d, ActionDispatchImplementer, ModeImplement, StatusInProgress, "plan posted: implement it")
	case StatusInProgress:
		if !done {
			// The seeds wait here ("worker running or waiting for PR"), but
			// with no worker live nothing would ever add worker-done: the
			// implementer exited or was lost (reboot, logout, crash).
			return dispatch(d, ActionResumeImplementer, ModeImplement, "",
				"in progress with no live worker and no worker-done: resume the implementer")
		}
		// The table says "dispatch reviewer"; moving to Needs Review with it
		// keeps In Progress + worker-done from dispatching a second reviewer.
		d = dispatch(d, ActionDispatchReviewer, ModeReview, StatusNeedsReview, "implementation done: review it")
	case StatusNeedsReview:
		if !done {
			return dispatch(d, ActionDispatchReviewer, ModeReview, "", "needs review and no reviewer is live")
		}
		switch is.Review {
		case ReviewChangesRequested:
			d = dispatch(d, ActionResumeImplementer, ModeImplement, "", "review requested changes: resume the implementer")
			d.RemoveLabels = []string{LabelWorkerDone, LabelChangesRequest}
			return d
		case ReviewApproved:
			d = dispatch(d, ActionTransitionToRetro, ModeRetro, StatusRetro, "review approved: retro")
			d.RemoveLabels = []string{LabelWorkerDone, LabelApproved}
			return d
		default:
			// This worker-done is not a reviewer's with its outcome (an
			// implementer resumed for changes added it, or the reviewer
			// gave none): review again. With outcome labels on the issue
			// nothing can lag; on a pull request the seeds wait for the
			// label to propagate, but the reviewer adds it before
			// worker-done, and with no reviewer live a missing one would
			// never come.
			where := "on the pull request"
			if labelReviews {
				where = "on the issue"
			}
			d = dispatch(d, ActionDispatchReviewer, ModeReview, "", "worker-done without a review outcome "+where+": review again")
			d.RemoveLabels = []string{LabelWorkerDone}
			return d
		}
	case StatusRetro:
		if !done {
			d = dispatch(d, ActionResumeImplementer, ModeRetro, "", "retro pending and no worker is live")
			if is.HasLabel(LabelFinishing) { // a person took worker-done away to run the retro again
				d.RemoveLabels = []string{LabelFinishing}
			}
			return d
		}
		if is.HasLabel(LabelFinishing) {
			if _, ended := is.Completed[ModeFinish]; !ended && is.failed(ModeFinish) == nil {
				// No finisher live, none ended or failed: a reboot or a
				// logout cut it (its transient unit and its registry entry
				// went with the boot), as it cuts any phase's worker. Run
				// it again, as that phase would be.
				return dispatch(d, ActionDispatchFinisher, ModeFinish, "", "the finisher was cut before it ended (a reboot, a logout): finish again")
			}
			return escalateUnfinished(d, is)
		}
		// worker-done stays until the issue is Done (the seed removes it):
		// with worker-finishing it says the finisher ran, so a finisher
		// that ends without closing the issue is escalated (above) instead
		// of the issue looking like a retro still to run.
		d = dispatch(d, ActionDispatchFinisher, ModeFinish, "", "retro done: finish (merge, clean up, close)")
		d.AddLabels = []string{LabelFinishing}
		return d
	default:
		d.Action, d.Reason = ActionNone, fmt.Sprintf("status %q is not one Legion acts on", is.Status)
		return d
	}
	d.RemoveLabels = []string{LabelWorkerDone}
	return d
}

// feedbackWithoutWorker decides an issue whose human answered (it carries
// user-feedback-given) after the agent that asked is gone: it exited, was
// lost to a reboot or a logout, or failed. The issue's phase worker is
// started or resumed as if no human label were there, and both labels stay,
// so that the next tick, with that worker live, relays the answer to it.
// If the phase starts no worker but escalates again (a finisher that ended
// without closing the issue), the answer is taken as read.
func feedbackWithoutWorker(is Issue, s State) Decision {
	bare := is
	bare.Labels = slices.DeleteFunc(slices.Clone(is.Labels), func(l string) bool {
		return l == LabelFeedbackGiven || l == LabelInputNeeded
	})
	d := decideIssue(bare, s)
	switch {
	case startsWorker(d.Action):
		d.Reason = "feedback given but no live worker to relay it to: " + d.Reason + "; the feedback is relayed once it is live"
	case slices.Contains(d.AddLabels, LabelInputNeeded):
		d.RemoveLabels = append(d.RemoveLabels, LabelFeedbackGiven)
		d.Reason = "feedback given but no live worker to relay it to: " + d.Reason
	default:
		d = Decision{Issue: is.ID, Action: ActionSkip, Reason: "feedback given but no live worker to relay it to (" + d.Reason + ")"}
	}
	return d
}

// escalateUnfinished hands an issue whose finisher ended without closing
// it to a person: running the finisher again unasked could repeat what
// went wrong (a conflict it cannot resolve, a failing merge), and the
// retro is over.
func escalateUnfinished(d Decision, is Issue) Decision {
	d.Action, d.Reason = ActionEscalateUnfinished, "the finisher ended without closing the issue"
	why := ""
	if f := is.failed(ModeFinish); f != nil {
		d.Reason += "; it failed for good"
		why = fmt.Sprintf(" It failed for good (%s): `systemctl --user reset-failed '%s'` before running it again.",
			f.why(), f.Unit)
	}
	d.Comment = "The finisher ended without closing the issue: it is still in Retro, so the merge, " +
		"the clean-up or the move to Done did not happen. Its transcript: `legion sessions logs " + is.ID + "-finish`." + why +
		"\n\nFinish by hand with `legion worktree finish <team> " + is.ID + "` (it merges, removes the worktree and " +
		"the branch, and moves the issue to Done), or remove the labels " + LabelFinishing + " and " + LabelInputNeeded +
		" to run the finisher again."
	d.AddLabels = []string{LabelInputNeeded}
	return d
}

// escalateRefused turns dispatch d, refused for a cause only a person can
// resolve, into an escalation: a person acts as refusal says and removes
// user-input-needed; the phase is then decided again. Waiting instead
// would wait for ever, said only in a log. The causes:
//
//   - the helper refused because another worker unit of the issue runs
//     that is none of its sessions (api.ErrIssueHeld: recovery could not
//     prove it Legion's, so nothing stops it): a person stops that unit;
//   - the dispatch's preparation failed with an api.PersonError (the
//     user's ~/.claude.json unreadable, which Claude Code does not start
//     on either): a person repairs or moves the file.
func escalateRefused(d Decision, refusal error) Decision {
	mode := d.Mode
	d = Decision{Issue: d.Issue, Action: ActionEscalateRefused, Mode: mode, AddLabels: []string{LabelInputNeeded}}
	next := "\n\nThen remove the label " + LabelInputNeeded + ": Legion decides the issue's next phase again."
	if e, ok := errors.AsType[*api.Error](refusal); ok && e.Code == api.CodeIssueHeld {
		d.Reason = "the helper refused the " + string(mode) + " worker: another worker unit of the issue holds it"
		d.Comment = "The " + string(mode) + " worker cannot start: another worker of this issue still runs, and Legion cannot reach it " +
			"(its files were lost or damaged), so it will not stop it on its own. The helper said:\n\n" + indent(e.Message) +
			"\n\nStop that unit (after a look at its transcript, if you like)." + next
		return d
	}
	d.Reason = "the " + string(mode) + " worker cannot start until a person acts: " + refusal.Error()
	d.Comment = "The " + string(mode) + " worker cannot start, and trying again will not help until a person acts:\n\n" +
		indent(refusal.Error()) + next
	return d
}

func dispatch(d Decision, a Action, mode Mode, moveTo Status, reason string) Decision {
	d.Action, d.Mode, d.MoveTo, d.Reason = a, mode, moveTo, reason
	return d
}

// PermissionDecision reads a person's comment on a permission request: a
// first word "approve" (or approved, allow, yes) allows the tool, "deny"
// (or denied, no) denies it with the rest as the reason; any other text
// denies it with the whole comment as the agent's instructions, as Claude
// Code's own "No, and tell Claude what to do differently" does.
func PermissionDecision(comment string) (decision, message string) {
	text := strings.TrimSpace(comment)
	first, rest, _ := strings.Cut(text, " ")
	word := strings.ToLower(strings.TrimRight(first, ".,:;!"))
	rest = strings.TrimSpace(strings.TrimLeft(rest, "-:—, "))
	switch word {
	case "approve", "approved", "allow", "yes":
		return api.DecisionAllow, rest
	case "deny", "denied", "no":
		return api.DecisionDeny, rest
	}
	return api.DecisionDeny, text
}

// questionText is the open question of w, with its options.
func questionText(w *Worker) string {
	if w.Agent == nil || len(w.Agent.Questions) == 0 {
		return w.Question
	}
	var b strings.Builder
	for i, q := range w.Agent.Questions {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(q.Question)
		for _, o := range q.Options {
			b.WriteString("\n- " + o)
		}
	}
	return b.String()
}

// indent makes text a Markdown code block.
func indent(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}
