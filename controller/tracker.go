package controller

import (
	"context"
	"errors"
	"time"
)

// Tracker is an issue tracker as the controller uses it. Issues is one
// batched query per tick; the write methods are idempotent: adding a label
// that is there, removing one that is not, or moving an issue to its current
// status changes nothing and is not an error.
type Tracker interface {
	// Issues returns the team's issues in a stable order: every open one;
	// a tracker may leave out closed ones (Done, Canceled).
	Issues(ctx context.Context) ([]TrackedIssue, error)
	Move(ctx context.Context, id string, to Status) error
	AddLabel(ctx context.Context, id, label string) error
	RemoveLabel(ctx context.Context, id, label string) error
	Comment(ctx context.Context, id, text string) error
}

// TrackedIssue is an issue as a tracker reports it.
type TrackedIssue struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Status   Status    `json:"status"`
	Labels   []string  `json:"labels"`
	Comments []Comment `json:"comments,omitempty"`
	Branch   string    `json:"branch,omitempty"`
}

// Comment is one comment on an issue.
type Comment struct {
	Author string    `json:"author"` // "legion" for the controller's own
	Text   string    `json:"text"`
	Time   time.Time `json:"time"`
}

// AuthorLegion marks comments the controller wrote itself; the latest
// comment by anyone else is the human feedback that is relayed.
const AuthorLegion = "legion"

// LatestHumanComment returns the text of the newest comment not written by
// Legion, or "".
func (t TrackedIssue) LatestHumanComment() string {
	return t.latestHuman().Text
}

// latestHuman is the newest comment not written by Legion, or a zero one.
func (t TrackedIssue) latestHuman() Comment {
	for i := len(t.Comments) - 1; i >= 0; i-- {
		if t.Comments[i].Author != AuthorLegion {
			return t.Comments[i]
		}
	}
	return Comment{}
}

// ErrIssueNotFound is returned by trackers for an unknown issue identifier.
var ErrIssueNotFound = errors.New("issue not found")
