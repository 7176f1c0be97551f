package github

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/legion-dev/legion/controller/internal/graphql"
)

var (
	opPullRequest = graphql.Operation{Name: "LegionPullRequest", Idempotent: true, Query: `query LegionPullRequest($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    mergeCommitAllowed squashMergeAllowed rebaseMergeAllowed
    pullRequest(number: $number) {
      id number state url mergeable mergeStateStatus reviewDecision
      commits(last: 1) { nodes { commit { oid statusCheckRollup { state contexts(first: 50) { nodes {
        __typename
        ... on CheckRun { name status conclusion isRequired(pullRequestNumber: $number) }
        ... on StatusContext { context state isRequired(pullRequestNumber: $number) }
      } } } } } }
    }
  }
}`}
	opMerge = graphql.Operation{Name: "LegionMerge", Query: `mutation LegionMerge($id: ID!, $method: PullRequestMergeMethod!) {
  mergePullRequest(input: {pullRequestId: $id, mergeMethod: $method}) {
    pullRequest { number state }
  }
}`}
	opRemoveLabels = graphql.Operation{Name: "LegionRemoveLabels", Idempotent: true, Query: `mutation LegionRemoveLabels($id: ID!, $labelIds: [ID!]!) {
  removeLabelsFromLabelable(input: {labelableId: $id, labelIds: $labelIds}) { clientMutationId }
}`}
)

// Merge merges pull request number with Options.MergeMethod, or else the
// first method the repository allows of merge, squash and rebase. It
// reads the pull request and the repository first, in one query (the
// mutation needs the node id, the method the repository's settings): an
// already merged pull request is success, a closed one an error, a
// method the repository does not allow an error naming those it does, a
// conflicting pull request ErrConflict, and one with checks not passed or
// that GitHub holds back or refuses ErrBlocked, naming the checks and the
// review wanted.
func (c *Client) Merge(ctx context.Context, number int) error {
	var d struct {
		Repository *mergeRepository `json:"repository"`
	}
	err := c.gql.Do(ctx, opPullRequest, map[string]any{"owner": c.opts.Owner, "name": c.opts.Repo, "number": number}, &d)
	var ae *APIError
	if errors.As(err, &ae) && ae.Type == "NOT_FOUND" {
		return fmt.Errorf("merge %s#%d: github: no such pull request", c.repo(), number)
	}
	if err != nil {
		return fmt.Errorf("merge %s#%d: %w", c.repo(), number, err)
	}
	if d.Repository == nil {
		return fmt.Errorf("merge %s#%d: github: %s: %w: want data.repository, got none", c.repo(), number, opPullRequest.Name, ErrMalformed)
	}
	pr := d.Repository.PullRequest
	switch {
	case pr == nil:
		return fmt.Errorf("merge %s#%d: github: no such pull request", c.repo(), number)
	case pr.ID == "":
		return fmt.Errorf("merge %s#%d: github: %s: %w: the pull request has no id", c.repo(), number, opPullRequest.Name, ErrMalformed)
	case pr.State == "MERGED":
		return nil
	case pr.State == "CLOSED":
		return fmt.Errorf("merge %s#%d: github: the pull request is closed without merging; reopen it or merge by hand", c.repo(), number)
	}
	method, err := c.mergeMethod(d.Repository.mergeSettings)
	if err != nil {
		return fmt.Errorf("merge %s#%d: %w", c.repo(), number, err)
	}
	if pr.Mergeable == "CONFLICTING" || pr.MergeStateStatus == "DIRTY" {
		return fmt.Errorf("merge %s#%d: %w with the base branch: resolve it on the branch", c.repo(), number, ErrConflict)
	}
	if why := pr.blocked(); len(why) > 0 {
		return fmt.Errorf("merge %s#%d: %w: %s; %s", c.repo(), number, ErrBlocked, strings.Join(why, "; "), afterBlocked)
	}
	var m struct {
		MergePullRequest *struct {
			PullRequest *struct {
				Number int    `json:"number"`
				State  string `json:"state"`
			} `json:"pullRequest"`
		} `json:"mergePullRequest"`
	}
	err = c.gql.Do(ctx, opMerge, map[string]any{"id": pr.ID, "method": method}, &m)
	if errors.As(err, &ae) {
		switch msg := strings.ToLower(ae.Message); {
		case strings.Contains(msg, "conflict"):
			return fmt.Errorf("merge %s#%d: %w: %s", c.repo(), number, ErrConflict, ae.Message)
		case strings.Contains(msg, "not allowed on this repository"):
			// The repository's settings allow the method, a ruleset of
			// the base branch does not (its allowed merge methods).
			return fmt.Errorf("merge %s#%d: github: %s: the base branch's rules allow fewer merge methods than the repository's settings: set github.merge_method to one they allow", c.repo(), number, ae.Message)
		case refusedAsBlocked(msg):
			why := append([]string{"GitHub says: " + ae.Message}, pr.checks()...)
			return fmt.Errorf("merge %s#%d: %w: %s; %s", c.repo(), number, ErrBlocked, strings.Join(why, "; "), afterBlocked)
		}
	}
	if err != nil {
		return fmt.Errorf("merge %s#%d: %w", c.repo(), number, err)
	}
	if m.MergePullRequest == nil || m.MergePullRequest.PullRequest == nil {
		return fmt.Errorf("merge %s#%d: github: %s: %w: want mergePullRequest.pullRequest, got none", c.repo(), number, opMerge.Name, ErrMalformed)
	}
	return nil
}

// RemoveLabel removes label from the pull request of issue's branch (the
// controller clears worker-approved / worker-changes-requested once it has
// acted on them). No pull request, or no such label on it, is not an error.
func (c *Client) RemoveLabel(ctx context.Context, issue, label string) error {
	prs, err := c.PullRequests(ctx, []string{issue})
	if err != nil {
		return fmt.Errorf("unlabel %s %s: %w", issue, label, err)
	}
	pr, ok := prs[issue]
	if !ok {
		return nil
	}
	id, ok := pr.labelIDs[label]
	if !ok {
		return nil
	}
	if err := c.removeLabels(ctx, pr.ID, id); err != nil {
		return fmt.Errorf("unlabel %s#%d %s: %w", c.repo(), pr.Number, label, err)
	}
	return nil
}
