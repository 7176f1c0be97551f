package github

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/internal/graphql"
)

// ProjectOptions name a GitHub project (Projects v2) whose single-select
// field holds each issue's phase, instead of status labels.
type ProjectOptions struct {
	// Number is the project's number; the repository's owner (an
	// organization or a user) owns it.
	Number int
	// Field is the single-select field; "Status" when empty.
	Field string
	// Options name the field's option of each phase, Done included;
	// DefaultProjectOptions fill the missing ones.
	Options map[controller.Status]string
}

// DefaultProjectOptions are the option names of the phases.
var DefaultProjectOptions = map[controller.Status]string{
	controller.StatusTodo:        "Todo",
	controller.StatusInProgress:  "In Progress",
	controller.StatusNeedsReview: "Needs Review",
	controller.StatusRetro:       "Retro",
	controller.StatusDone:        "Done",
}

// projectPhases are the phases a project field carries.
var projectPhases = append(slices.Clone(phases), controller.StatusDone)

// project is a resolved ProjectOptions: the node ids the writes need.
type project struct {
	id, title, fieldID string
	options            map[controller.Status]string // phase → option id
	phaseOf            map[string]controller.Status // option id → phase
}

var opProject = graphql.Operation{Name: "LegionProject", Idempotent: true, Query: `query LegionProject($owner: String!, $number: Int!, $field: String!) {
  repositoryOwner(login: $owner) {
    ... on ProjectV2Owner {
      projectV2(number: $number) {
        id title
        field(name: $field) { ... on ProjectV2SingleSelectField { id name options { id name } } }
      }
    }
  }
}`}

// resolveProject reads the project's, the field's and the options' node
// ids once; a project, field or option that is not there is an error
// that names it and what there is instead.
func (t *Tracker) resolveProject(ctx context.Context) (*project, error) {
	po := t.opts.Project
	if po == nil {
		return nil, nil
	}
	t.mu.Lock()
	p := t.project
	t.mu.Unlock()
	if p != nil {
		return p, nil
	}
	var d struct {
		RepositoryOwner *struct {
			ProjectV2 *struct {
				ID    string `json:"id"`
				Title string `json:"title"`
				Field *struct {
					ID      string `json:"id"`
					Name    string `json:"name"`
					Options []struct {
						ID   string `json:"id"`
						Name string `json:"name"`
					} `json:"options"`
				} `json:"field"`
			} `json:"projectV2"`
		} `json:"repositoryOwner"`
	}
	where := fmt.Sprintf("project %d of %s", po.Number, t.c.opts.Owner)
	err := t.c.gql.Do(ctx, opProject, map[string]any{"owner": t.c.opts.Owner, "number": po.Number, "field": po.Field}, &d)
	var ae *APIError
	if errors.As(err, &ae) && ae.Type == "NOT_FOUND" {
		return nil, fmt.Errorf("%s: not found, or not visible to the token (a classic token needs the project scope): %s", where, ae.Message)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	switch {
	case d.RepositoryOwner == nil:
		return nil, fmt.Errorf("%s: no such owner", where)
	case d.RepositoryOwner.ProjectV2 == nil:
		return nil, fmt.Errorf("%s: not found, or not visible to the token (a classic token needs the project scope)", where)
	case d.RepositoryOwner.ProjectV2.Field == nil || d.RepositoryOwner.ProjectV2.Field.ID == "":
		return nil, fmt.Errorf("%s (%q) has no single-select field %q (github.project_field)", where, d.RepositoryOwner.ProjectV2.Title, po.Field)
	}
	pv := d.RepositoryOwner.ProjectV2
	p = &project{id: pv.ID, title: pv.Title, fieldID: pv.Field.ID, options: map[controller.Status]string{}, phaseOf: map[string]controller.Status{}}
	var have []string
	for _, o := range pv.Field.Options {
		have = append(have, fmt.Sprintf("%q", o.Name))
	}
	var missing []string
	for _, ph := range projectPhases {
		name := po.Options[ph]
		i := slices.IndexFunc(pv.Field.Options, func(o struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		}) bool {
			return strings.EqualFold(o.Name, name)
		})
		if i < 0 {
			missing = append(missing, fmt.Sprintf("%q (%s)", name, ph))
			continue
		}
		p.options[ph] = pv.Field.Options[i].ID
		p.phaseOf[pv.Field.Options[i].ID] = ph
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s (%q): field %q has no option %s: add it to the field, or map the phase to one of %s (github.project_todo, _in_progress, _needs_review, _retro, _done)",
			where, pv.Title, po.Field, strings.Join(missing, ", "), strings.Join(have, ", "))
	}
	t.mu.Lock()
	t.project = p
	t.mu.Unlock()
	return p, nil
}

// projectItemFields read an issue's items in projects and the field's
// value in each.
const projectItemFields = `projectItems(first: 10) { nodes { id project { number } fieldValueByName(name: $field) { ... on ProjectV2ItemFieldSingleSelectValue { optionId name } } } }`

type projectItemNode struct {
	ID      string `json:"id"`
	Project *struct {
		Number int `json:"number"`
	} `json:"project"`
	Value *struct {
		OptionID string `json:"optionId"`
		Name     string `json:"name"`
	} `json:"fieldValueByName"`
}

// projectPhase is the phase n's item in the project carries, and its
// item's id ("" when n is not in the project, or the field is unset).
func (t *Tracker) projectPhase(n issueNode, p *project) (controller.Status, string, bool) {
	for _, it := range n.ProjectItems.Nodes {
		if it.Project == nil || it.Project.Number != t.opts.Project.Number {
			continue
		}
		if it.Value != nil {
			if ph, ok := p.phaseOf[it.Value.OptionID]; ok {
				return ph, it.ID, true
			}
		}
		return "", it.ID, false
	}
	return "", "", false
}

var (
	opAddProjectItem = graphql.Operation{Name: "LegionAddProjectItem", Idempotent: true, Query: `mutation LegionAddProjectItem($project: ID!, $content: ID!) {
  addProjectV2ItemById(input: {projectId: $project, contentId: $content}) { item { id } }
}`}
	opSetProjectField = graphql.Operation{Name: "LegionSetProjectField", Idempotent: true, Query: `mutation LegionSetProjectField($project: ID!, $item: ID!, $field: ID!, $option: String!) {
  updateProjectV2ItemFieldValue(input: {projectId: $project, itemId: $item, fieldId: $field, value: {singleSelectOptionId: $option}}) { projectV2Item { id } }
}`}
)

// moveInProject sets the field of issue ref's item in the project to the
// option of phase to, adding the issue to the project first when it is
// not in it (addProjectV2ItemById returns the existing item when it is).
func (t *Tracker) moveInProject(ctx context.Context, p *project, ref issueRef, to controller.Status) error {
	var a struct {
		Add *struct {
			Item *struct {
				ID string `json:"id"`
			} `json:"item"`
		} `json:"addProjectV2ItemById"`
	}
	t.forget()
	if err := t.c.gql.Do(ctx, opAddProjectItem, map[string]any{"project": p.id, "content": ref.id}, &a); err != nil {
		return fmt.Errorf("add it to project %q: %w", p.title, err)
	}
	if a.Add == nil || a.Add.Item == nil || a.Add.Item.ID == "" {
		return fmt.Errorf("add it to project %q: github: %s: %w: want addProjectV2ItemById.item.id", p.title, opAddProjectItem.Name, ErrMalformed)
	}
	var s struct {
		Update *struct{} `json:"updateProjectV2ItemFieldValue"`
	}
	vars := map[string]any{"project": p.id, "item": a.Add.Item.ID, "field": p.fieldID, "option": p.options[to]}
	if err := t.c.gql.Do(ctx, opSetProjectField, vars, &s); err != nil {
		return fmt.Errorf("set %q of project %q: %w", t.opts.Project.Field, p.title, err)
	}
	if s.Update == nil {
		return fmt.Errorf("set %q of project %q: github: %s: %w: want updateProjectV2ItemFieldValue", t.opts.Project.Field, p.title, opSetProjectField.Name, ErrMalformed)
	}
	return nil
}
