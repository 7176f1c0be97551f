package team

import (
	"context"
	"errors"
	"fmt"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github"
)

// github is the team's GitHub client, or an error saying the team does
// not review on GitHub (what = what needed it).
func (t *Team) github(what string) (*github.Client, error) {
	gh, ok := t.Reviews.(*github.Client)
	if !ok {
		return nil, fmt.Errorf("team %s reviews its branches locally (review = %q): %s needs review = \"github\"", t.Name, t.Review, what)
	}
	return gh, nil
}

// PullRequest is the pull request Publish opened or found.
type PullRequest struct {
	github.PullRequest
	Created bool `json:"created"` // false: it was open already
}

// Publish pushes issue's branch to the team's GitHub repository with the
// team's token (git runs t.Legion as its askpass program: the token
// travels neither in argv nor in the environment) and opens the branch's
// pull request into the workspace's default branch, or finds the open one.
// Legion, not the agent, pushes: a sandboxed implementer has neither the
// user's git credentials nor the token in reach, and needs neither gh nor
// a login of its own.
func (t *Team) Publish(ctx context.Context, issue, title, body string) (PullRequest, error) {
	gh, err := t.github("opening a pull request")
	if err != nil {
		return PullRequest{}, err
	}
	if err := t.push(ctx, gh, issue); err != nil {
		return PullRequest{}, err
	}
	base, err := t.Worktrees.DefaultBranch(ctx)
	if err != nil {
		return PullRequest{}, err
	}
	if body != "" {
		body += "\n\n"
	}
	if tr, ok := t.Tracker.(*github.Tracker); ok {
		if n, err := tr.Number(issue); err == nil {
			body += fmt.Sprintf("Closes #%d.\n\n", n) // links the pull request to its issue
		}
	}
	body += fmt.Sprintf("Opened by Legion for issue %s of team %s.", issue, t.Name)
	pr, created, err := gh.OpenPullRequest(ctx, issue, base, title, body)
	if err != nil {
		return PullRequest{}, err
	}
	return PullRequest{pr, created}, nil
}

// push pushes issue's branch to the team's GitHub repository.
func (t *Team) push(ctx context.Context, gh *github.Client, issue string) error {
	if t.Legion == "" {
		return errors.New("push to GitHub: no legion program to answer git's password prompt (team.Team.Legion)")
	}
	url, err := gh.GitURL()
	if err != nil {
		return err
	}
	return t.Worktrees.Push(ctx, issue, url, gh.PushEnv(t.Legion))
}

// isOutcome says whether label is a review outcome, which a team whose
// review is on GitHub keeps on the pull request.
func (t *Team) isOutcome(label string) bool {
	return t.Review == config.ReviewGitHub && (label == controller.LabelApproved || label == controller.LabelChangesRequest)
}

// Label adds label to issue: a review outcome of a team whose review is
// on GitHub to the issue's pull request, anything else to the issue.
func (t *Team) Label(ctx context.Context, issue, label string) error {
	if t.isOutcome(label) {
		gh, err := t.github("labelling a pull request")
		if err != nil {
			return err
		}
		return gh.AddLabel(ctx, issue, label)
	}
	return t.Tracker.AddLabel(ctx, issue, label)
}

// Unlabel removes label from where Label puts it.
func (t *Team) Unlabel(ctx context.Context, issue, label string) error {
	if t.isOutcome(label) {
		gh, err := t.github("labelling a pull request")
		if err != nil {
			return err
		}
		return gh.RemoveLabel(ctx, issue, label)
	}
	return t.Tracker.RemoveLabel(ctx, issue, label)
}
