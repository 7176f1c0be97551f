package controller

import (
	"cmp"
	"fmt"
	"slices"

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

// Labels of the label protocol (seeds/001). Workers add LabelWorkerDone when
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
	ActionRelayFeedback       Action = "relay_feedback"
	ActionSkip                Action = "skip"
	ActionNone                Action = "none"
)

// Worker is the live agent session of an issue, if any.
type Worker struct {
	Mode     Mode   `json:"mode"`
	Session  string `json:"session"`
	Blocked  bool   `json:"blocked"`            // waits on an AskUserQuestion
	Question string `json:"question,omitempty"` // the pending question's text
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
	// Feedback is the latest human comment, relayed on user-feedback-given.
	Feedback string `json:"feedback,omitempty"`
	// Worktree is the issue's worktree, reported (with would-be merge
	// conflicts); decided on only when it is broken (Problem): no worker
	// is started in it.
	Worktree *workspace.Worktree `json:"worktree,omitempty"`
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
	Input        string   `json:"input,omitempty"`   // typed into the live worker, then Enter
}

// codeWorker reports whether a worker in mode counts against the WIP limit:
// every mode but review, which is short-lived (seeds/001).
func codeWorker(mode Mode) bool { return mode != ModeReview }

// Decide returns one decision per issue, in the order of s.Issues. It is
// pure: the same State always gives the same decisions. The WIP limit is
// applied in issue order, counting live code workers first.
func Decide(s State) []Decision {
	live := 0
	for _, is := range s.Issues {
		if is.Worker != nil && codeWorker(is.Worker.Mode) {
			live++
		}
	}
	out := make([]Decision, 0, len(s.Issues))
	for _, is := range s.Issues {
		d := decideIssue(is, s.LabelReviews)
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
		if d.Mode != "" && codeWorker(d.Mode) && startsWorker(d.Action) {
			if s.WIPLimit > 0 && live >= s.WIPLimit {
				d = Decision{Issue: is.ID, Action: ActionSkip,
					Reason: fmt.Sprintf("WIP limit %d reached (%d code workers live); would %s", s.WIPLimit, live, d.Action)}
			} else {
				live++
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

// decideIssue is the status × label table of seeds/001, with two rules
// before it: human-input labels win, and a live worker is never disturbed
// except to escalate its question.
func decideIssue(is Issue, labelReviews bool) Decision {
	d := Decision{Issue: is.ID}
	if is.Status == StatusDone {
		d.Action, d.Reason = ActionNone, "done"
		return d
	}
	switch {
	case is.HasLabel(LabelFeedbackGiven):
		if is.Worker == nil {
			return feedbackWithoutWorker(is, labelReviews)
		}
		d.Action, d.Reason = ActionRelayFeedback, "relay the latest human comment to the "+string(is.Worker.Mode)+" worker"
		d.Input = is.Feedback
		d.RemoveLabels = []string{LabelFeedbackGiven, LabelInputNeeded}
		return d
	case is.HasLabel(LabelInputNeeded):
		d.Action, d.Reason = ActionSkip, "waiting for user input"
		return d
	case is.Worker != nil && is.Worker.Blocked:
		d.Action, d.Reason = ActionEscalateBlocked, "the "+string(is.Worker.Mode)+" worker asks a question"
		d.Comment = "The " + string(is.Worker.Mode) + " agent asks: " + is.Worker.Question +
			"\n\nAnswer in a comment, then add the label " + LabelFeedbackGiven + "."
		d.AddLabels = []string{LabelInputNeeded}
		return d
	case is.Worker != nil:
		d.Action, d.Reason = ActionSkip, "a "+string(is.Worker.Mode)+" worker is live"
		// If the labels still ask for the very worker that is live, its
		// dispatch went through but the tracker changes that belong to it
		// did not: carry those out now (they are idempotent), or the issue
		// would dispatch the same worker again once this one exits.
		idle := is
		idle.Worker = nil
		w := decideIssue(idle, labelReviews)
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
func feedbackWithoutWorker(is Issue, labelReviews bool) Decision {
	bare := is
	bare.Labels = slices.DeleteFunc(slices.Clone(is.Labels), func(l string) bool {
		return l == LabelFeedbackGiven || l == LabelInputNeeded
	})
	d := decideIssue(bare, labelReviews)
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

func dispatch(d Decision, a Action, mode Mode, moveTo Status, reason string) Decision {
	d.Action, d.Mode, d.MoveTo, d.Reason = a, mode, moveTo, reason
	return d
}
