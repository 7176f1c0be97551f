package github

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/internal/graphql"
)

var (
	opLabel = graphql.Operation{Name: "LegionLabel", Idempotent: true, Query: `query LegionLabel($owner: String!, $name: String!, $label: String!) {
  repository(owner: $owner, name: $name) { id label(name: $label) { id } }
}`}
	opComment = graphql.Operation{Name: "LegionComment", Query: `mutation LegionComment($id: ID!, $body: String!) {
  addComment(input: {subjectId: $id, body: $body}) { commentEdge { node { id } } }
}`}
	opClose = graphql.Operation{Name: "LegionCloseIssue", Idempotent: true, Query: `mutation LegionCloseIssue($id: ID!) {
  closeIssue(input: {issueId: $id, stateReason: COMPLETED}) { issue { state } }
}`}
	opReopen = graphql.Operation{Name: "LegionReopenIssue", Idempotent: true, Query: `mutation LegionReopenIssue($id: ID!) {
  reopenIssue(input: {issueId: $id}) { issue { state } }
}`}
)

// ref returns what the writes need of issue id: from the last Issues, or
// read with one query. An issue without the opt-in label is refused:
// Legion never writes to issues that are not the team's.
func (t *Tracker) ref(ctx context.Context, id string) (issueRef, error) {
	num, err := t.Number(id)
	if err != nil {
		return issueRef{}, err
	}
	t.mu.Lock()
	ref, ok := t.issues[num]
	t.mu.Unlock()
	if !ok {
		if _, err := t.lookup(ctx, id); err != nil {
			return issueRef{}, err
		}
		t.mu.Lock()
		ref = t.issues[num]
		t.mu.Unlock()
	}
	if !ref.opted {
		return issueRef{}, fmt.Errorf("issue %s (#%d) of %s has no label %q: Legion acts only on issues that carry it", id, num, t.c.repo(), t.opts.Label)
	}
	return ref, nil
}

// note records that label is now on issue num (or off).
func (t *Tracker) note(num int, label, labelID string, on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ref, ok := t.issues[num]
	if !ok {
		return
	}
	if on {
		ref.labels[label] = labelID
	} else {
		delete(ref.labels, label)
	}
}

// labelID is the node id of the repository's label name, created when
// missing (Legion's protocol labels, the status labels).
func (t *Tracker) labelID(ctx context.Context, name string) (string, error) {
	t.mu.Lock()
	id := t.labels[name]
	t.mu.Unlock()
	if id != "" {
		return id, nil
	}
	var d struct {
		Repository *struct {
			ID    string `json:"id"`
			Label *struct {
				ID string `json:"id"`
			} `json:"label"`
		} `json:"repository"`
	}
	if err := t.c.gql.Do(ctx, opLabel, map[string]any{"owner": t.c.opts.Owner, "name": t.c.opts.Repo, "label": name}, &d); err != nil {
		return "", fmt.Errorf("label %q of %s: %w", name, t.c.repo(), err)
	}
	if d.Repository == nil || d.Repository.ID == "" {
		return "", fmt.Errorf("label %q of %s: github: %s: %w: want data.repository.id, got none", name, t.c.repo(), opLabel.Name, ErrMalformed)
	}
	repo := d.Repository.ID
	if d.Repository.Label != nil && d.Repository.Label.ID != "" {
		id = d.Repository.Label.ID
	} else {
		var err error
		if id, err = t.c.createLabel(ctx, repo, name); err != nil {
			// Created although the answer says otherwise (lost, a
			// server error after the write), or by someone else
			// meanwhile ("Name has already been taken"): it is there
			// to read now.
			var ae *APIError
			if errors.Is(err, graphql.ErrUncertain) || errors.As(err, &ae) && ae.Type == "UNPROCESSABLE" {
				if err2 := t.c.gql.Do(ctx, opLabel, map[string]any{"owner": t.c.opts.Owner, "name": t.c.opts.Repo, "label": name}, &d); err2 == nil &&
					d.Repository != nil && d.Repository.Label != nil && d.Repository.Label.ID != "" {
					id, err = d.Repository.Label.ID, nil
				} else if err2 == nil && errors.Is(err, graphql.ErrUncertain) {
					id, err = t.c.createLabel(ctx, repo, name) // not created: once more
				}
			}
		}
		if err != nil {
			return "", fmt.Errorf("label %q of %s: create it: %w (create it by hand, or give the token write access to issues)", name, t.c.repo(), err)
		}
	}
	t.mu.Lock()
	t.labels[name], t.repoID = id, repo
	t.mu.Unlock()
	return id, nil
}

// AddLabel implements controller.Tracker.
func (t *Tracker) AddLabel(ctx context.Context, id, label string) error {
	if _, ok := t.phaseOf(label); ok || label == t.opts.Label {
		return fmt.Errorf("label %s %s: %q is a label Legion keeps itself (a status, or the opt-in label): move the issue instead", id, label, label)
	}
	return t.addLabel(ctx, id, label)
}

func (t *Tracker) addLabel(ctx context.Context, id, label string) error {
	ref, err := t.ref(ctx, id)
	if err != nil {
		return err
	}
	if _, ok := ref.labels[label]; ok {
		return nil
	}
	lid, err := t.labelID(ctx, label)
	if err != nil {
		return err
	}
	t.forget()
	if err := t.c.addLabels(ctx, ref.id, lid); err != nil {
		return fmt.Errorf("label %s %s: %w", id, label, err)
	}
	num, _ := t.Number(id)
	t.note(num, label, lid, true)
	return nil
}

// RemoveLabel implements controller.Tracker.
func (t *Tracker) RemoveLabel(ctx context.Context, id, label string) error {
	ref, err := t.ref(ctx, id)
	if err != nil {
		return err
	}
	lid, ok := ref.labels[label]
	if !ok {
		return nil
	}
	t.forget()
	if err := t.c.removeLabels(ctx, ref.id, lid); err != nil {
		return fmt.Errorf("unlabel %s %s: %w", id, label, err)
	}
	num, _ := t.Number(id)
	t.note(num, label, "", false)
	return nil
}

// Move implements controller.Tracker: the status label of to replaces
// the others; Done closes the issue (completed) and removes them; a
// closed issue moved to another phase is reopened.
func (t *Tracker) Move(ctx context.Context, id string, to controller.Status) error {
	if to != controller.StatusDone {
		if _, ok := t.opts.Statuses[to]; !ok {
			return fmt.Errorf("move %s to %q: want one of Todo, In Progress, Needs Review, Retro, Done", id, to)
		}
	}
	ref, err := t.ref(ctx, id)
	if err != nil {
		return err
	}
	if to != controller.StatusDone && !ref.open {
		t.forget()
		if err := t.c.setState(ctx, opReopen, ref.id); err != nil {
			return fmt.Errorf("move %s to %s: reopen: %w", id, to, err)
		}
	}
	p, err := t.resolveProject(ctx)
	if err != nil {
		return fmt.Errorf("move %s to %s: %w", id, to, err)
	}
	if p != nil {
		if err := t.moveInProject(ctx, p, ref, to); err != nil {
			return fmt.Errorf("move %s to %s: %w", id, to, err)
		}
	} else if to != controller.StatusDone {
		if err := t.addLabel(ctx, id, t.opts.Statuses[to]); err != nil {
			return fmt.Errorf("move %s to %s: %w", id, to, err)
		}
	}
	for _, p := range phases {
		if t.opts.Project != nil {
			break // the phase is the project's field; status labels are a person's
		}
		if p != to {
			if err := t.RemoveLabel(ctx, id, t.opts.Statuses[p]); err != nil {
				return fmt.Errorf("move %s to %s: %w", id, to, err)
			}
		}
	}
	if to == controller.StatusDone && ref.open {
		t.forget()
		if err := t.c.setState(ctx, opClose, ref.id); err != nil {
			return fmt.Errorf("move %s to Done: close: %w", id, err)
		}
	}
	num, _ := t.Number(id)
	t.mu.Lock()
	if r, ok := t.issues[num]; ok {
		r.open = to != controller.StatusDone
		t.issues[num] = r
	}
	t.mu.Unlock()
	return nil
}

// Comment implements controller.Tracker. The comment ends with Legion's
// signature, which Issues uses to report it with controller.AuthorLegion.
//
// GitHub's addComment is not idempotent: after a failure that may have
// posted it (a server error, its answer lost or never sent) it is not
// simply sent again. Comment reads the issue instead: if its newest
// comment is this one, it was posted; if not, it is sent again (up to
// commentAttempts in all). So a comment is posted once although an
// answer was lost, and a failed one is not lost.
func (t *Tracker) Comment(ctx context.Context, id, text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("comment on %s: the text is empty", id)
	}
	ref, err := t.ref(ctx, id)
	if err != nil {
		return err
	}
	body := strings.TrimRight(text, "\n") + "\n\n" + commentSignature
	for range commentAttempts {
		var d struct {
			AddComment *struct{} `json:"addComment"`
		}
		t.forget()
		err = t.c.gql.Do(ctx, opComment, map[string]any{"id": ref.id, "body": body}, &d)
		if err == nil {
			if d.AddComment == nil {
				return fmt.Errorf("comment on %s: github: %s: %w: want addComment, got none", id, opComment.Name, ErrMalformed)
			}
			return nil
		}
		if !errors.Is(err, graphql.ErrUncertain) {
			break
		}
		n, lerr := t.lookup(ctx, id)
		if lerr != nil {
			return fmt.Errorf("comment on %s: %w", id, errors.Join(err, fmt.Errorf("look whether it was posted: %w", lerr)))
		}
		if c := n.Comments.Nodes; len(c) > 0 && c[len(c)-1].Body == body {
			return nil
		}
	}
	return fmt.Errorf("comment on %s: %w", id, err)
}

// commentAttempts bounds the sends of one comment whose earlier sends
// were found not posted.
const commentAttempts = 3

// setState closes or reopens the issue of node id.
func (c *Client) setState(ctx context.Context, op graphql.Operation, id string) error {
	var d map[string]*struct {
		Issue *struct {
			State string `json:"state"`
		} `json:"issue"`
	}
	if err := c.gql.Do(ctx, op, map[string]any{"id": id}, &d); err != nil {
		return err
	}
	for _, v := range d {
		if v != nil && v.Issue != nil {
			return nil
		}
	}
	return fmt.Errorf("github: %s: %w: want the issue's new state, got none", op.Name, ErrMalformed)
}

// createLabel creates label name in the repository of node id repo and
// returns the label's node id.
func (c *Client) createLabel(ctx context.Context, repo, name string) (string, error) {
	var m struct {
		CreateLabel *struct {
			Label *struct {
				ID string `json:"id"`
			} `json:"label"`
		} `json:"createLabel"`
	}
	color := labelColors[name]
	if color == "" {
		color = "ededed"
	}
	vars := map[string]any{"repo": repo, "name": name, "color": color, "description": "Legion's label"}
	if err := c.gql.Do(ctx, opCreateLabel, vars, &m); err != nil {
		return "", err
	}
	if m.CreateLabel == nil || m.CreateLabel.Label == nil || m.CreateLabel.Label.ID == "" {
		return "", fmt.Errorf("github: %s: %w: want createLabel.label.id, got none", opCreateLabel.Name, ErrMalformed)
	}
	return m.CreateLabel.Label.ID, nil
}

// addLabels puts the label of node id label on the issue or pull request
// of node id labelable.
func (c *Client) addLabels(ctx context.Context, labelable, label string) error {
	var d struct {
		AddLabelsToLabelable *struct{} `json:"addLabelsToLabelable"`
	}
	if err := c.gql.Do(ctx, opAddLabels, map[string]any{"id": labelable, "labelIds": []string{label}}, &d); err != nil {
		return err
	}
	if d.AddLabelsToLabelable == nil {
		return fmt.Errorf("github: %s: %w: want addLabelsToLabelable, got none", opAddLabels.Name, ErrMalformed)
	}
	return nil
}

// removeLabels takes the label of node id label off labelable.
func (c *Client) removeLabels(ctx context.Context, labelable, label string) error {
	var d struct {
		RemoveLabelsFromLabelable *struct{} `json:"removeLabelsFromLabelable"`
	}
	if err := c.gql.Do(ctx, opRemoveLabels, map[string]any{"id": labelable, "labelIds": []string{label}}, &d); err != nil {
		return err
	}
	if d.RemoveLabelsFromLabelable == nil {
		return fmt.Errorf("github: %s: %w: want removeLabelsFromLabelable, got none", opRemoveLabels.Name, ErrMalformed)
	}
	return nil
}
