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
    pullRequest(number: $number) { id number state url mergeable }
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

// Merge merges pull request number with Options.MergeMethod. It reads the
// pull request first (the mutation needs its node id): an already merged
// one is success, a closed one an error, a conflicting one ErrConflict.
func (c *Client) Merge(ctx context.Context, number int) error {
	var d struct {
		Repository *struct {
			PullRequest *prNode `json:"pullRequest"`
		} `json:"repository"`
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
	case pr.Mergeable == "CONFLICTING":
		return fmt.Errorf("merge %s#%d: %w with the base branch: resolve it on the branch", c.repo(), number, ErrConflict)
	}
	var m struct {
		MergePullRequest *struct {
			PullRequest *struct {
				Number int    `json:"number"`
				State  string `json:"state"`
			} `json:"pullRequest"`
		} `json:"mergePullRequest"`
	}
	err = c.gql.Do(ctx, opMerge, map[string]any{"id": pr.ID, "method": c.opts.MergeMethod}, &m)
	if errors.As(err, &ae) && strings.Contains(strings.ToLower(ae.Message), "conflict") {
		return fmt.Errorf("merge %s#%d: %w: %s", c.repo(), number, ErrConflict, ae.Message)
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
	var d struct {
		RemoveLabelsFromLabelable *struct{} `json:"removeLabelsFromLabelable"`
	}
	if err := c.gql.Do(ctx, opRemoveLabels, map[string]any{"id": pr.ID, "labelIds": []string{id}}, &d); err != nil {
		return fmt.Errorf("unlabel %s#%d %s: %w", c.repo(), pr.Number, label, err)
	}
	if d.RemoveLabelsFromLabelable == nil {
		return fmt.Errorf("unlabel %s#%d %s: github: %s: %w: want removeLabelsFromLabelable, got none", c.repo(), pr.Number, label, opRemoveLabels.Name, ErrMalformed)
	}
	return nil
}
