package github

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/internal/graphql"
)

// PullRequest is the pull request of an issue's branch.
type PullRequest struct {
	Issue     string   `json:"issue"`
	Branch    string   `json:"branch"`
	Number    int      `json:"number"`
	ID        string   `json:"id"`        // GraphQL node id
	State     string   `json:"state"`     // OPEN or MERGED
	URL       string   `json:"url"`       //
	Mergeable string   `json:"mergeable"` // MERGEABLE, CONFLICTING or UNKNOWN
	Labels    []string `json:"labels"`
	Head      string   `json:"head,omitempty"` // headRefOid: the commit the branch points at
	// Reviews are the pull request's latest APPROVED and CHANGES_REQUESTED
	// reviews (oldest first), whichever commit they were made on.
	Reviews []Review `json:"reviews,omitempty"`
	// Review is the outcome: of the labels and of the reviews made on Head
	// (Outcome).
	Review controller.Review `json:"review"`

	labelIDs map[string]string // label name → node id
}

// prFields are the fields read of every pull request.
const prFields = `id number state url mergeable labels(first: 20) { nodes { id name } }`

// pullsQuery is the batched query for n branches: one aliased
// pullRequests field per branch, the branch names passed as variables.
func pullsQuery(n int) string {
	var b strings.Builder
	b.WriteString("query LegionPullRequests($owner: String!, $name: String!")
	for i := range n {
		fmt.Fprintf(&b, ", $b%d: String!", i)
	}
	b.WriteString(") {\n  repository(owner: $owner, name: $name) {\n")
	for i := range n {
		fmt.Fprintf(&b, "    pr%d: pullRequests(headRefName: $b%d, first: 1, states: [OPEN, MERGED], orderBy: {field: CREATED_AT, direction: DESC}) { ...legionPR }\n", i, i)
	}
	b.WriteString("  }\n}\nfragment legionPR on PullRequestConnection { nodes { " + prFields + " " + reviewFields + " } }")
	return b.String()
}

type prNode struct {
	ID        string `json:"id"`
	Number    int    `json:"number"`
	State     string `json:"state"`
	URL       string `json:"url"`
	Mergeable string `json:"mergeable"`
	Labels    struct {
		Nodes []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"nodes"`
	} `json:"labels"`
	// HeadRefOid and Reviews are read by LegionPullRequests only
	// (reviewFields).
	HeadRefOid string `json:"headRefOid"`
	Reviews    struct {
		Nodes []reviewNode `json:"nodes"`
	} `json:"reviews"`
}

// decodePulls decodes the data of a LegionPullRequests response for the
// given branches (alias prI is branches[i]). A branch without a pull
// request is absent from the result.
func decodePulls(data []byte, branches []string) (map[string]prNode, error) {
	var d struct {
		Repository *map[string]*struct {
			Nodes []prNode `json:"nodes"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%w: want data.repository {prN: {nodes}}: %s", ErrMalformed, graphql.JSONProblem(err))
	}
	if d.Repository == nil {
		return nil, fmt.Errorf("%w: want data.repository, got none", ErrMalformed)
	}
	out := map[string]prNode{}
	for i, br := range branches {
		alias := fmt.Sprintf("pr%d", i)
		conn, ok := (*d.Repository)[alias]
		if !ok || conn == nil {
			return nil, fmt.Errorf("%w: want data.repository.%s (branch %s), got none", ErrMalformed, alias, br)
		}
		if len(conn.Nodes) == 0 {
			continue
		}
		n := conn.Nodes[0]
		if n.ID == "" || n.Number <= 0 || n.State == "" {
			return nil, fmt.Errorf("%w: the pull request of branch %s lacks id, number or state", ErrMalformed, br)
		}
		if err := checkReviews(n); err != nil {
			return nil, fmt.Errorf("%w: the pull request of branch %s: %w", ErrMalformed, br, err)
		}
		out[br] = n
	}
	return out, nil
}

// pullRequest converts a node.
func pullRequest(issue, branch string, n prNode) PullRequest {
	pr := PullRequest{
		Issue: issue, Branch: branch, Number: n.Number, ID: n.ID, State: n.State, URL: n.URL,
		Mergeable: n.Mergeable, Labels: make([]string, 0, len(n.Labels.Nodes)), labelIDs: map[string]string{},
	}
	for _, l := range n.Labels.Nodes {
		pr.Labels = append(pr.Labels, l.Name)
		pr.labelIDs[l.Name] = l.ID
	}
	pr.Head = n.HeadRefOid
	for _, r := range n.Reviews.Nodes {
		pr.Reviews = append(pr.Reviews, r.review())
	}
	pr.Review = Outcome(pr.Labels, pr.Head, pr.Reviews)
	return pr
}

// ReviewOf is the review outcome carried by a pull request's labels. When
// both outcome labels are present, changes requested wins: merging on a
// contradiction is the worse mistake.
func ReviewOf(labels []string) controller.Review {
	switch {
	case slices.Contains(labels, controller.LabelChangesRequest):
		return controller.ReviewChangesRequested
	case slices.Contains(labels, controller.LabelApproved):
		return controller.ReviewApproved
	}
	return controller.ReviewNone
}

// PullRequests returns the pull request (open or merged, newest first) of
// each issue's branch, keyed by issue; issues without one are absent. All
// branches go in one GraphQL query (ceil(n / BatchSize) requests), never
// one request per issue.
func (c *Client) PullRequests(ctx context.Context, issues []string) (map[string]PullRequest, error) {
	uniq := slices.Compact(slices.Sorted(slices.Values(issues)))
	uniq = slices.DeleteFunc(uniq, func(s string) bool { return s == "" })
	out := make(map[string]PullRequest, len(uniq))
	for batch := range slices.Chunk(uniq, c.opts.BatchSize) {
		branches := make([]string, len(batch))
		vars := map[string]any{"owner": c.opts.Owner, "name": c.opts.Repo}
		for i, is := range batch {
			branches[i] = c.Branch(is)
			vars[fmt.Sprintf("b%d", i)] = branches[i]
		}
		op := graphql.Operation{Name: "LegionPullRequests", Query: pullsQuery(len(batch)), Idempotent: true}
		var raw json.RawMessage
		if err := c.gql.Do(ctx, op, vars, &raw); err != nil {
			return nil, fmt.Errorf("pull requests of %s: %w", c.repo(), err)
		}
		nodes, err := decodePulls(raw, branches)
		if err != nil {
			return nil, fmt.Errorf("pull requests of %s: github: %s: %w", c.repo(), op.Name, err)
		}
		for i, is := range batch {
			if n, ok := nodes[branches[i]]; ok {
				out[is] = pullRequest(is, branches[i], n)
			}
		}
	}
	return out, nil
}

// Reviews returns the review outcome of each issue that has one (Outcome:
// an outcome label, or a GitHub review on the head commit); issues whose
// pull request has none, or that have no pull request, are absent, i.e.
// controller.ReviewNone. Same single query as PullRequests.
func (c *Client) Reviews(ctx context.Context, issues []string) (map[string]controller.Review, error) {
	prs, err := c.PullRequests(ctx, issues)
	if err != nil {
		return nil, err
	}
	out := make(map[string]controller.Review, len(prs))
	for is, pr := range prs {
		if pr.Review != controller.ReviewNone {
			out[is] = pr.Review
		}
	}
	return out, nil
}

var _ controller.ReviewSource = (*Client)(nil)
