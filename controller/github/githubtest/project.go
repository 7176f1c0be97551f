package githubtest

import (
	"fmt"
	"strings"
)

// Project is a project (Projects v2) of the repository's owner with one
// single-select field.
type Project struct {
	Number         int
	ID, Title      string
	Field, FieldID string
	Options        []Label       // the field's options (ID, Name)
	items          map[int]*item // by issue number
}

type item struct{ id, option string }

// AddProject gives the repository's owner project number with a
// single-select field of the options.
func (s *Server) AddProject(number int, title, field string, options ...string) *Project {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &Project{Number: number, ID: fmt.Sprintf("PVT_kwDO%04d", number), Title: title, Field: field,
		FieldID: fmt.Sprintf("PVTSSF_%04d", number), items: map[int]*item{}}
	for i, o := range options {
		p.Options = append(p.Options, Label{ID: fmt.Sprintf("%08x", number*1000+i), Name: o})
	}
	s.projects = append(s.projects, p)
	return p
}

// ProjectStatus is the option issue n has in project p's field ("" for
// none, "-" when n is not in the project).
func (s *Server) ProjectStatus(p *Project, n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := p.items[n]
	if !ok {
		return "-"
	}
	for _, o := range p.Options {
		if o.ID == it.option {
			return o.Name
		}
	}
	return ""
}

// SetProjectStatus puts issue n into project p with option (a person
// moving its card).
func (s *Server) SetProjectStatus(p *Project, n int, option string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch()
	it := p.items[n]
	if it == nil {
		it = &item{id: fmt.Sprintf("PVTI_%04d_%d", p.Number, n)}
		p.items[n] = it
	}
	for _, o := range p.Options {
		if o.Name == option {
			it.option = o.ID
		}
	}
}

// projectItems renders issue n's items, the field named field's value in
// each.
func (s *Server) projectItems(n int, field string) []any {
	out := []any{}
	for _, p := range s.projects {
		it, ok := p.items[n]
		if !ok {
			continue
		}
		var value any
		if field == p.Field {
			for _, o := range p.Options {
				if o.ID == it.option {
					value = map[string]any{"optionId": o.ID, "name": o.Name}
				}
			}
		}
		out = append(out, map[string]any{"id": it.id, "project": map[string]any{"number": p.Number}, "fieldValueByName": value})
	}
	return out
}

// handleProjects answers the project operations; ok is false for others.
func (s *Server) handleProjects(op string, v map[string]any) (data any, typ, msg string, ok bool) {
	str := func(k string) string { x, _ := v[k].(string); return x }
	byID := func(id string) *Project {
		for _, p := range s.projects {
			if p.ID == id {
				return p
			}
		}
		return nil
	}
	switch op {
	case "LegionProject":
		if !strings.EqualFold(str("owner"), s.Owner) {
			return map[string]any{"repositoryOwner": nil}, "", "", true
		}
		num, _ := v["number"].(float64)
		for _, p := range s.projects {
			if p.Number != int(num) {
				continue
			}
			var field any
			if p.Field == str("field") {
				opts := []any{}
				for _, o := range p.Options {
					opts = append(opts, map[string]any{"id": o.ID, "name": o.Name})
				}
				field = map[string]any{"id": p.FieldID, "name": p.Field, "options": opts}
			}
			return map[string]any{"repositoryOwner": map[string]any{"projectV2": map[string]any{"id": p.ID, "title": p.Title, "field": field}}}, "", "", true
		}
		return map[string]any{"repositoryOwner": map[string]any{"projectV2": nil}}, "NOT_FOUND",
			fmt.Sprintf("Could not resolve to a ProjectV2 with the number %d.", int(num)), true
	case "LegionAddProjectItem":
		p := byID(str("project"))
		if p == nil {
			return map[string]any{"addProjectV2ItemById": nil}, "NOT_FOUND", "Could not resolve to a node with the global id of '" + str("project") + "'", true
		}
		for _, is := range s.issues {
			if is.ID == str("content") {
				it := p.items[is.Number]
				if it == nil {
					it = &item{id: fmt.Sprintf("PVTI_%04d_%d", p.Number, is.Number)}
					p.items[is.Number] = it
				}
				return map[string]any{"addProjectV2ItemById": map[string]any{"item": map[string]any{"id": it.id}}}, "", "", true
			}
		}
		return map[string]any{"addProjectV2ItemById": nil}, "NOT_FOUND", "Could not resolve to a node with the global id of '" + str("content") + "'", true
	case "LegionSetProjectField":
		p := byID(str("project"))
		if p == nil || str("field") != p.FieldID {
			return map[string]any{"updateProjectV2ItemFieldValue": nil}, "NOT_FOUND", "Could not resolve to a node", true
		}
		for _, it := range p.items {
			if it.id != str("item") {
				continue
			}
			for _, o := range p.Options {
				if o.ID == str("option") {
					it.option = o.ID
					return map[string]any{"updateProjectV2ItemFieldValue": map[string]any{"projectV2Item": map[string]any{"id": it.id}}}, "", "", true
				}
			}
			return map[string]any{"updateProjectV2ItemFieldValue": nil}, "", "The single select option Id does not belong to the field", true
		}
		return map[string]any{"updateProjectV2ItemFieldValue": nil}, "NOT_FOUND", "Could not resolve to a node with the global id of '" + str("item") + "'", true
	}
	return nil, "", "", false
}
