package team

import (
	"context"
	"errors"
	"fmt"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/controller/workspace"
)

// Finish completes an issue: with the GitHub review source it pushes the
// branch (the retro's commits; see Publish) and merges the issue's pull
// request; otherwise it merges legion/<issue> into the default
// branch of the workspace (in an issue's pod on a cluster, Legion's clone
// of the team's repository, and pushes that branch back to it:
// workspace.MergeAndPublish). Then, unless keepOpen, it moves the issue to
// Done and removes its labels worker-done and worker-finishing, and last
// it removes the worktree and the branch. On a conflict nothing is
// removed or moved and the error wraps workspace.ErrConflict.
//
// The worktree goes last because it is the finisher's working directory:
// a finisher killed after it was gone but before the issue was Done could
// not be started again (its directory missing) and its issue waited for a
// person. Every step can run again: a finish cut anywhere is completed by
// running it again.
func (t *Team) Finish(ctx context.Context, issue string, keepOpen bool) error {
	if gh, ok := t.Reviews.(*github.Client); ok {
		if err := t.push(ctx, gh, issue); err != nil {
			return fmt.Errorf("finish %s: %w", issue, err)
		}
		prs, err := gh.PullRequests(ctx, []string{issue})
		if err != nil {
			return fmt.Errorf("finish %s: %w", issue, err)
		}
		pr, ok := prs[issue]
		if !ok {
			return fmt.Errorf("finish %s: no pull request for branch %s: open it first (legion issue pr)", issue, workspace.Branch(issue))
		}
		if err := gh.Merge(ctx, pr.Number); err != nil {
			if errors.Is(err, github.ErrConflict) {
				return fmt.Errorf("finish %s: pull request #%d: %w", issue, pr.Number, workspace.ErrConflict)
			}
			return fmt.Errorf("finish %s: merge pull request #%d: %w", issue, pr.Number, err)
		}
	} else if t.Worktrees.IsClone(ctx) {
		// An issue's pod on a cluster: its workspace is Legion's clone
		// of the team's repository, and the merge goes back to it.
		if _, err := t.Worktrees.MergeAndPublish(ctx, issue); err != nil {
			return err
		}
	} else if _, err := t.Worktrees.Merge(ctx, issue); err != nil {
		return err
	}
	if !keepOpen {
		if err := t.Tracker.Move(ctx, issue, controller.StatusDone); err != nil {
			return err
		}
		// The finish phase's labels go once the issue is Done, not before: an
		// issue in Retro without them would run its retro again.
		var errs []error
		for _, l := range []string{controller.LabelWorkerDone, controller.LabelFinishing} {
			errs = append(errs, t.Tracker.RemoveLabel(ctx, issue, l))
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("finish %s: moved to Done, but: %w", issue, err)
		}
	}
	return t.Worktrees.Remove(ctx, issue)
}
