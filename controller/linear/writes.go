package linear

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/internal/graphql"
)

var (
	opTeam = graphql.Operation{Name: "LegionTeam", Idempotent: true, Query: `query LegionTeam($key: String!) {
  teams(filter: {key: {eq: $key}}, first: 2) {
    nodes { id key name states(first: 100) { nodes { id name type } } }
  }
}`}
	opLabel = graphql.Operation{Name: "LegionLabel", Idempotent: true, Query: `query LegionLabel($name: String!) {
  issueLabels(filter: {name: {eqIgnoreCase: $name}}, first: 50) {
    nodes { id name isGroup team { id } }
  }
}`}
	opCreateLabel = graphql.Operation{Name: "LegionCreateLabel", Query: `mutation LegionCreateLabel($teamId: String!, $name: String!, $color: String!) {
  issueLabelCreate(input: {teamId: $teamId, name: $name, color: $color}) {
    success
    issueLabel { id name }
  }
}`}
	opMove = graphql.Operation{Name: "LegionMove", Idempotent: true, Query: `mutation LegionMove($id: String!, $stateId: String!) {
  issueUpdate(id: $id, input: {stateId: $stateId}) { success }
}`}
	opAddLabel = graphql.Operation{Name: "LegionAddLabel", Idempotent: true, Query: `mutation LegionAddLabel($id: String!, $labelId: String!) {
  issueAddLabel(id: $id, labelId: $labelId) { success }
}`}
	opRemoveLabel = graphql.Operation{Name: "LegionRemoveLabel", Idempotent: true, Query: `mutation LegionRemoveLabel($id: String!, $labelId: String!) {
  issueRemoveLabel(id: $id, labelId: $labelId) { success }
}`}
	opIssueComments = graphql.Operation{Name: "LegionIssueComments", Idempotent: true, Query: `query LegionIssueComments($id: String!, $comments: Int!) {
  issue(id: $id) { comments(first: $comments) { nodes { body } } }
}`}
	opComment = graphql.Operation{Name: "LegionComment", Query: `mutation LegionComment($issueId: String!, $body: String!) {
  commentCreate(input: {issueId: $issueId, body: $body}) { success }
}`}
)

// protocolLabels are the labels Legion creates in the team when missing,
// with their colours.
var protocolLabels = map[string]string{
	controller.LabelWorkerDone:     "#4EA7FC",
	controller.LabelFinishing:      "#5E6AD2",
	controller.LabelInputNeeded:    "#F2994A",
	controller.LabelFeedbackGiven:  "#26B5CE",
	controller.LabelApproved:       "#4CB782",
	controller.LabelChangesRequest: "#EB5757",
}

// team is what the writes need to know about the team, resolved once.
type team struct {
	id     string
	states []state
}

type state struct{ id, name, typ string }

// stateID returns the id of the workflow state called name (exact match
// first, then case-insensitive).
func (t *team) stateID(name string) (string, bool) {
	for _, s := range t.states {
		if s.name == name {
			return s.id, true
		}
	}
	for _, s := range t.states {
		if strings.EqualFold(s.name, name) {
			return s.id, true
		}
	}
	return "", false
}

func (t *team) stateNames() string {
	names := make([]string, len(t.states))
	for i, s := range t.states {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// resolveTeam returns the team's id and workflow states, querying them on
// the first call only.
func (c *Client) resolveTeam(ctx context.Context) (*team, error) {
	c.teamMu.Lock()
	defer c.teamMu.Unlock()
	if c.team != nil {
		return c.team, nil
	}
	var d struct {
		Teams *struct {
			Nodes []struct {
				ID     string `json:"id"`
				Key    string `json:"key"`
				States struct {
					Nodes []struct {
						ID   string `json:"id"`
						Name string `json:"name"`
						Type string `json:"type"`
					} `json:"nodes"`
				} `json:"states"`
			} `json:"nodes"`
		} `json:"teams"`
	}
	if err := c.gql.Do(ctx, opTeam, map[string]any{"key": c.opts.Team}, &d); err != nil {
		return nil, err
	}
	if d.Teams == nil {
		return nil, fmt.Errorf("linear: %s: %w: want data.teams, got none", opTeam.Name, ErrMalformed)
	}
	if len(d.Teams.Nodes) == 0 {
		return nil, fmt.Errorf("linear: no team with key %q visible to this API key (the key is the prefix of issue identifiers, e.g. ENG in ENG-12)", c.opts.Team)
	}
	n := d.Teams.Nodes[0]
	if n.ID == "" {
		return nil, fmt.Errorf("linear: %s: %w: team %s has no id", opTeam.Name, ErrMalformed, c.opts.Team)
	}
	t := &team{id: n.ID}
	for _, s := range n.States.Nodes {
		if s.ID == "" || s.Name == "" {
			return nil, fmt.Errorf("linear: %s: %w: a workflow state of team %s has no id or name", opTeam.Name, ErrMalformed, c.opts.Team)
		}
		t.states = append(t.states, state{id: s.ID, name: s.Name, typ: s.Type})
	}
	c.team = t
	return t, nil
}

// issueRef is what mutations take for an issue: its UUID when the last
// Issues saw it, else the identifier itself (Linear accepts both).
func (c *Client) issueRef(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.issues[strings.ToUpper(id)]; ok {
		return m.uuid
	}
	return id
}

// Move implements controller.Tracker: it sets the issue's workflow state to
// the one the status maps to (Options.Statuses).
func (c *Client) Move(ctx context.Context, id string, to controller.Status) error {
	t, err := c.resolveTeam(ctx)
	if err != nil {
		return fmt.Errorf("move %s to %s: %w", id, to, err)
	}
	name := c.stateName(to)
	stateID, ok := t.stateID(name)
	if !ok {
		return fmt.Errorf("move %s to %s: linear team %s has no workflow state %q (it has %s): map the status to one of them in the tracker's status names",
			id, to, c.opts.Team, name, t.stateNames())
	}
	var d struct {
		IssueUpdate *struct{ Success bool } `json:"issueUpdate"`
	}
	if err := c.gql.Do(ctx, opMove, map[string]any{"id": c.issueRef(id), "stateId": stateID}, &d); err != nil {
		return writeErr("move "+id+" to "+string(to), err)
	}
	if d.IssueUpdate == nil || !d.IssueUpdate.Success {
		return fmt.Errorf("move %s to %s: linear: %s: %w: want issueUpdate.success true", id, to, opMove.Name, ErrMalformed)
	}
	return nil
}

// AddLabel implements controller.Tracker. A label of Legion's protocol that
// does not exist yet is created in the team; any other must exist.
func (c *Client) AddLabel(ctx context.Context, id, label string) error {
	if err := checkLabel(label); err != nil {
		return fmt.Errorf("label %s: %w", id, err)
	}
	labelID, err := c.labelID(ctx, label, true)
	if err != nil {
		return fmt.Errorf("label %s %s: %w", id, label, err)
	}
	var d struct {
		IssueAddLabel *struct{ Success bool } `json:"issueAddLabel"`
	}
	if err := c.gql.Do(ctx, opAddLabel, map[string]any{"id": c.issueRef(id), "labelId": labelID}, &d); err != nil {
		return writeErr("label "+id+" "+label, err)
	}
	if d.IssueAddLabel == nil || !d.IssueAddLabel.Success {
		return fmt.Errorf("label %s %s: linear: %s: %w: want issueAddLabel.success true", id, label, opAddLabel.Name, ErrMalformed)
	}
	c.noteLabel(id, label, true)
	return nil
}

// RemoveLabel implements controller.Tracker. Removing a label that does not
// exist, or that the last Issues did not see on the issue, sends nothing.
func (c *Client) RemoveLabel(ctx context.Context, id, label string) error {
	c.mu.Lock()
	m, known := c.issues[strings.ToUpper(id)]
	absent := known && !m.labels[strings.ToLower(label)]
	c.mu.Unlock()
	if absent {
		return nil
	}
	labelID, err := c.labelID(ctx, label, false)
	if err != nil {
		return fmt.Errorf("unlabel %s %s: %w", id, label, err)
	}
	if labelID == "" {
		return nil
	}
	var d struct {
		IssueRemoveLabel *struct{ Success bool } `json:"issueRemoveLabel"`
	}
	if err := c.gql.Do(ctx, opRemoveLabel, map[string]any{"id": c.issueRef(id), "labelId": labelID}, &d); err != nil {
		return writeErr("unlabel "+id+" "+label, err)
	}
	if d.IssueRemoveLabel == nil || !d.IssueRemoveLabel.Success {
		return fmt.Errorf("unlabel %s %s: linear: %s: %w: want issueRemoveLabel.success true", id, label, opRemoveLabel.Name, ErrMalformed)
	}
	c.noteLabel(id, label, false)
	return nil
}

// Comment implements controller.Tracker. The comment ends with Legion's
// signature, which Issues uses to report it with controller.AuthorLegion.
//
// A comment is not idempotent: after a failure that may have posted it (a
// server error, its answer lost) it is not simply sent again. Comment
// looks at the issue's newest comment instead: if that is this one, it
// was posted; if not, it is sent again (up to commentAttempts in all). So
// a comment is posted once although an answer was lost, and a failed one
// is not lost.
func (c *Client) Comment(ctx context.Context, id, text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("comment on %s: the text is empty", id)
	}
	body := strings.TrimRight(text, "\n") + "\n\n" + commentSignature
	var err error
	for range commentAttempts {
		var d struct {
			CommentCreate *struct{ Success bool } `json:"commentCreate"`
		}
		err = c.gql.Do(ctx, opComment, map[string]any{"issueId": c.issueRef(id), "body": body}, &d)
		if err == nil {
			if d.CommentCreate == nil || !d.CommentCreate.Success {
				return fmt.Errorf("comment on %s: linear: %s: %w: want commentCreate.success true", id, opComment.Name, ErrMalformed)
			}
			return nil
		}
		if !errors.Is(err, graphql.ErrUncertain) {
			break
		}
		posted, lerr := c.newestComment(ctx, id, body)
		if lerr != nil {
			return writeErr("comment on "+id, errors.Join(err, fmt.Errorf("look whether it was posted: %w", lerr)))
		}
		if posted {
			return nil
		}
	}
	return writeErr("comment on "+id, err)
}

// commentAttempts bounds the sends of one comment whose earlier sends
// were found not posted.
const commentAttempts = 3

// newestComment reports whether the newest comment on issue id has body.
func (c *Client) newestComment(ctx context.Context, id, body string) (bool, error) {
	var d struct {
		Issue *struct {
			Comments struct {
				Nodes []struct {
					Body string `json:"body"`
				} `json:"nodes"`
			} `json:"comments"`
		} `json:"issue"`
	}
	if err := c.gql.Do(ctx, opIssueComments, map[string]any{"id": c.issueRef(id), "comments": 1}, &d); err != nil {
		return false, err
	}
	if d.Issue == nil {
		return false, fmt.Errorf("linear: %s: %w: want data.issue, got none", opIssueComments.Name, ErrMalformed)
	}
	n := d.Issue.Comments.Nodes
	return len(n) > 0 && n[0].Body == body, nil
}

// writeErr wraps a write's error; Linear's "not found" becomes
// controller.ErrIssueNotFound.
func writeErr(what string, err error) error {
	if notFound(err) {
		return fmt.Errorf("%s: linear: %w", what, controller.ErrIssueNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// noteLabel records a label change of ours in the memo of the last Issues.
func (c *Client) noteLabel(id, label string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.issues[strings.ToUpper(id)]; ok {
		if on {
			m.labels[strings.ToLower(label)] = true
		} else {
			delete(m.labels, strings.ToLower(label))
		}
	}
}

// labelID returns the id of the label called name that the team's issues
// can carry (a team label, else a workspace label). It is looked up once
// and cached; with create, a missing protocol label is created. Without
// create a missing label gives "".
func (c *Client) labelID(ctx context.Context, name string, create bool) (string, error) {
	key := strings.ToLower(name)
	c.mu.Lock()
	id, ok := c.labels[key]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	t, err := c.resolveTeam(ctx)
	if err != nil {
		return "", err
	}
	best, err := c.findLabel(ctx, t, name)
	if err != nil {
		return "", err
	}
	if best == "" {
		if !create {
			return "", nil
		}
		color, ok := protocolLabels[name]
		if !ok {
			return "", fmt.Errorf("linear team %s has no label %q: create it in Linear (Legion creates only its own labels: %s)",
				c.opts.Team, name, strings.Join(slices.Sorted(maps.Keys(protocolLabels)), ", "))
		}
		if best, err = c.createLabel(ctx, t, name, color); err != nil {
			// A create whose answer was lost may have made the label:
			// look again before giving up, so the write goes on now
			// instead of failing until the next lookup.
			var ae *APIError
			if errors.As(err, &ae) || ctx.Err() != nil {
				return "", err
			}
			found, ferr := c.findLabel(ctx, t, name)
			if ferr != nil || found == "" {
				return "", err
			}
			best = found
		}
	}
	c.mu.Lock()
	c.labels[key] = best
	c.mu.Unlock()
	return best, nil
}

// findLabel returns the id of the label called name that the team's
// issues can carry (a team label, else a workspace label), "" when there
// is none.
func (c *Client) findLabel(ctx context.Context, t *team, name string) (string, error) {
	var d struct {
		IssueLabels *struct {
			Nodes []struct {
				ID      string `json:"id"`
				Name    string `json:"name"`
				IsGroup bool   `json:"isGroup"`
				Team    *struct {
					ID string `json:"id"`
				} `json:"team"`
			} `json:"nodes"`
		} `json:"issueLabels"`
	}
	if err := c.gql.Do(ctx, opLabel, map[string]any{"name": name}, &d); err != nil {
		return "", err
	}
	if d.IssueLabels == nil {
		return "", fmt.Errorf("linear: %s: %w: want data.issueLabels, got none", opLabel.Name, ErrMalformed)
	}
	// Rank: team label over workspace label, exact case over folded.
	best, bestRank := "", 0
	for _, n := range d.IssueLabels.Nodes {
		if n.ID == "" || n.IsGroup || !strings.EqualFold(n.Name, name) {
			continue
		}
		rank := 0
		switch {
		case n.Team != nil && n.Team.ID == t.id:
			rank = 4
		case n.Team == nil:
			rank = 2
		default:
			continue // another team's label cannot go on this team's issues
		}
		if n.Name == name {
			rank++
		}
		if rank > bestRank {
			best, bestRank = n.ID, rank
		}
	}
	return best, nil
}

func (c *Client) createLabel(ctx context.Context, t *team, name, color string) (string, error) {
	var d struct {
		IssueLabelCreate *struct {
			Success    bool `json:"success"`
			IssueLabel *struct {
				ID string `json:"id"`
			} `json:"issueLabel"`
		} `json:"issueLabelCreate"`
	}
	if err := c.gql.Do(ctx, opCreateLabel, map[string]any{"teamId": t.id, "name": name, "color": color}, &d); err != nil {
		return "", fmt.Errorf("create label %s: %w", name, err)
	}
	if d.IssueLabelCreate == nil || !d.IssueLabelCreate.Success || d.IssueLabelCreate.IssueLabel == nil || d.IssueLabelCreate.IssueLabel.ID == "" {
		return "", fmt.Errorf("create label %s: linear: %s: %w: want issueLabelCreate {success: true, issueLabel.id}", name, opCreateLabel.Name, ErrMalformed)
	}
	return d.IssueLabelCreate.IssueLabel.ID, nil
}

func checkLabel(l string) error {
	if l == "" || strings.ContainsFunc(l, unicode.IsControl) || strings.TrimSpace(l) != l {
		return fmt.Errorf("bad label %q: want a non-empty name without control characters or surrounding spaces", l)
	}
	return nil
}
