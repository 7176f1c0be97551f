package controller

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Dispatcher starts agent sessions and types into them; the helper
// implements it in production.
type Dispatcher interface {
	// Dispatch starts (or, when its session file exists, resumes) the worker
	// of issue in mode. It is a no-op when that worker is already live.
	Dispatch(ctx context.Context, issue string, mode Mode) error
	// Respond delivers a person's answer to the live session named session:
	// text answers its agent's question or is its next prompt; with a
	// permission decision (api.DecisionAllow or api.DecisionDeny) text is
	// the reason of a denial. by names who answered.
	Respond(ctx context.Context, session, text, permission, by string) error
	// End ends the live session's agent cleanly, its phase done: its unit
	// ends as a success, with no restart.
	End(ctx context.Context, session, reason string) error
}

// SessionNamer is what a Dispatcher may also do: name the agent session
// (its conversation's ID) and the worker unit of issue in mode, "" when it
// cannot. The controller's log lines about an issue then carry them, as
// the helper's and the worker's do (the journal fields LEGION_SESSION and
// LEGION_UNIT).
type SessionNamer interface {
	SessionOf(issue string, mode Mode) (session, unit string)
}

// Apply carries out one decision (tracker changes go to src.Tracker, review
// outcome labels to src.Reviews when set): the dispatch or the relay first, then the
// tracker changes; a decision's labels and move wait for its comment, so
// a failed comment leaves them for the next tick, which comments again.
// A failed dispatch leaves the issue exactly as it was, so
// the next tick decides the same thing and tries again; a relay removes
// user-feedback-given only once the text reached the agent. Every step is
// idempotent, so applying the same decision twice changes nothing more.
func Apply(ctx context.Context, src Sources, disp Dispatcher, d Decision, is Issue) error {
	t := src.Tracker
	switch {
	case startsWorker(d.Action):
		if src.Dispatched != nil {
			now := time.Now
			if src.Now != nil {
				now = src.Now
			}
			if err := src.Dispatched.Record(d.Issue, dispatchRecord(d, is, now())); err != nil {
				return fmt.Errorf("apply %s to %s: %w", d.Action, d.Issue, err)
			}
		}
		if err := disp.Dispatch(ctx, d.Issue, d.Mode); err != nil {
			return fmt.Errorf("apply %s to %s: %w", d.Action, d.Issue, err)
		}
	case (d.Action == ActionRelayFeedback || d.Action == ActionResumeAfterLimit) && is.Worker != nil:
		if err := disp.Respond(ctx, is.Worker.Session, d.Input, d.Permission, d.InputBy); err != nil {
			return fmt.Errorf("apply %s to %s: %w", d.Action, d.Issue, err)
		}
	case (d.Action == ActionEndWorker || d.Action == ActionEscalateBudget) && is.Worker != nil:
		if err := disp.End(ctx, is.Worker.Session, d.Reason); err != nil {
			return fmt.Errorf("apply %s to %s: %w", d.Action, d.Issue, err)
		}
	}
	var errs []error
	for _, l := range d.RemoveLabels {
		if src.Reviews != nil && (l == LabelApproved || l == LabelChangesRequest) {
			// The outcome label is on the pull request: a stale one would
			// resume the implementer again on every tick.
			errs = append(errs, src.Reviews.RemoveLabel(ctx, d.Issue, l))
			continue
		}
		errs = append(errs, t.RemoveLabel(ctx, d.Issue, l))
	}
	if d.Comment != "" {
		if err := t.Comment(ctx, d.Issue, d.Comment); err != nil {
			// The labels and the move wait for their comment: an
			// escalation's user-input-needed alone would have a person
			// wait for a question never shown, and the next tick would
			// skip the issue instead of commenting again.
			errs = append(errs, err)
			return fmt.Errorf("apply %s to %s: %w", d.Action, d.Issue, errors.Join(errs...))
		}
	}
	for _, l := range d.AddLabels {
		errs = append(errs, t.AddLabel(ctx, d.Issue, l))
	}
	if d.MoveTo != "" && d.MoveTo != is.Status {
		errs = append(errs, t.Move(ctx, d.Issue, d.MoveTo))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("apply %s to %s: %w", d.Action, d.Issue, err)
	}
	if src.Dispatched != nil && (startsWorker(d.Action) || is.Dispatched != nil && !dispatchLive(is)) {
		// The dispatch's tracker changes are made (or, for an older
		// record, the issue was decided anew and applied); a record
		// whose worker is live waits for its end (decideIssue).
		if err := src.Dispatched.Forget(d.Issue); err != nil {
			return fmt.Errorf("apply %s to %s: %w", d.Action, d.Issue, err)
		}
	}
	return nil
}

// dispatchLive says whether is has a dispatch record whose worker is live.
func dispatchLive(is Issue) bool {
	return is.Dispatched != nil && is.Worker != nil && is.Worker.Mode == is.Dispatched.Mode
}
