package github

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/legion-dev/legion/controller"
)

// reviewFields are the fields of a pull request that carry its GitHub
// reviews: the commit its branch points at, and its latest approvals and
// change requests with the commit each was made on. LegionPullRequests
// reads them with the labels, in the same batched query.
const reviewFields = `headRefOid reviews(last: 20, states: [APPROVED, CHANGES_REQUESTED]) { nodes { state submittedAt author { login } commit { oid } } }`

// Review states that are outcomes (GitHub's PullRequestReviewState).
const (
	StateApproved         = "APPROVED"
	StateChangesRequested = "CHANGES_REQUESTED"
)

// Review is one submitted GitHub review of a pull request.
type Review struct {
	Author      string    `json:"author"` // login; "" for a deleted account
	State       string    `json:"state"`  // APPROVED or CHANGES_REQUESTED
	Commit      string    `json:"commit"` // the commit reviewed; "" when GitHub no longer has it
	SubmittedAt time.Time `json:"submitted_at"`
}

type reviewNode struct {
	State       string `json:"state"`
	SubmittedAt string `json:"submittedAt"`
	Author      *struct {
		Login string `json:"login"`
	} `json:"author"`
	Commit *struct {
		OID string `json:"oid"`
	} `json:"commit"`
}

// checkReviews requires every review of n to have a state and a time.
func checkReviews(n prNode) error {
	for i, r := range n.Reviews.Nodes {
		if r.State == "" {
			return fmt.Errorf("review %d has no state", i)
		}
		if _, err := time.Parse(time.RFC3339, r.SubmittedAt); err != nil {
			return fmt.Errorf("review %d: want submittedAt as an RFC 3339 time, got %q", i, r.SubmittedAt)
		}
	}
	return nil
}

// review converts a node checked by checkReviews.
func (r reviewNode) review() Review {
	out := Review{State: r.State}
	out.SubmittedAt, _ = time.Parse(time.RFC3339, r.SubmittedAt)
	if r.Author != nil {
		out.Author = r.Author.Login
	}
	if r.Commit != nil {
		out.Commit = r.Commit.OID
	}
	return out
}

// ReviewsOn is the outcome of the GitHub reviews made on commit head,
// the commit the pull request's branch points at. Of each author's
// reviews of head the latest counts (a reviewer who requested changes
// and then approved the same commit approved); changes requested by
// anyone wins over approvals. Reviews of an earlier commit, or of a
// commit GitHub no longer knows, do not count: the commits pushed since
// answer them, and counting them would send the implementer back for
// changes it has made.
func ReviewsOn(head string, reviews []Review) controller.Review {
	if head == "" {
		return controller.ReviewNone
	}
	on := slices.DeleteFunc(slices.Clone(reviews), func(r Review) bool {
		return r.Commit != head || r.State != StateApproved && r.State != StateChangesRequested
	})
	slices.SortStableFunc(on, func(a, b Review) int { return a.SubmittedAt.Compare(b.SubmittedAt) })
	latest := map[string]string{}
	for _, r := range on {
		latest[r.Author] = r.State
	}
	states := slices.Collect(maps.Values(latest))
	switch {
	case slices.Contains(states, StateChangesRequested):
		return controller.ReviewChangesRequested
	case slices.Contains(states, StateApproved):
		return controller.ReviewApproved
	}
	return controller.ReviewNone
}

// Outcome is a pull request's review outcome: its outcome labels
// (ReviewOf) and its GitHub reviews of head (ReviewsOn) together. When
// they disagree, changes requested wins, as between two labels.
func Outcome(labels []string, head string, reviews []Review) controller.Review {
	both := []controller.Review{ReviewOf(labels), ReviewsOn(head, reviews)}
	return slices.MaxFunc(both, func(a, b controller.Review) int { return cmp.Compare(rank[a], rank[b]) })
}

// rank orders outcomes by which wins a disagreement.
var rank = map[controller.Review]int{controller.ReviewNone: 0, controller.ReviewApproved: 1, controller.ReviewChangesRequested: 2}
