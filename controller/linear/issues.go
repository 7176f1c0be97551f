package linear

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/internal/graphql"
)

// opIssues is the one query of a tick, sent once per page. Comments come
// newest first (Linear orders connections by createdAt, newest first, by
// default), so first: N is the latest N; they are sorted oldest first after.
var opIssues = graphql.Operation{Name: "LegionIssues", Idempotent: true, Query: `query LegionIssues($filter: IssueFilter!, $first: Int!, $after: String, $comments: Int!) {
  issues(filter: $filter, first: $first, after: $after) {
    nodes {
      id
      identifier
      title
      branchName
      state { id name type }
      labels(first: 50) { nodes { id name } }
      comments(first: $comments) { nodes { body createdAt user { name displayName } } }
    }
    pageInfo { hasNextPage endCursor }
  }
}`}

// maxPages bounds one Issues call (maxPages × PageSize issues).
const maxPages = 400

// commentSignature ends every comment Legion posts, so that its own
// comments are told apart from people's even though the API key belongs to
// a person.
const commentSignature = "(posted by Legion)"

type issuesData struct {
	Issues *struct {
		Nodes    []issueNode `json:"nodes"`
		PageInfo *struct {
			HasNextPage bool   `json:"hasNextPage"`
			EndCursor   string `json:"endCursor"`
		} `json:"pageInfo"`
	} `json:"issues"`
}

type issueNode struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	Title      string `json:"title"`
	BranchName string `json:"branchName"`
	State      *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"state"`
	Labels struct {
		Nodes []labelNode `json:"nodes"`
	} `json:"labels"`
	Comments struct {
		Nodes []struct {
			Body      string    `json:"body"`
			CreatedAt time.Time `json:"createdAt"`
			User      *struct {
				Name        string `json:"name"`
				DisplayName string `json:"displayName"`
			} `json:"user"`
		} `json:"nodes"`
	} `json:"comments"`
}

type labelNode struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// page is one decoded page of issues.
type page struct {
	nodes []issueNode
	next  string // cursor of the next page; "" on the last
}

// decodeIssuesPage decodes the data of one LegionIssues response.
func decodeIssuesPage(data []byte) (page, error) {
	var d issuesData
	if err := json.Unmarshal(data, &d); err != nil {
		return page{}, fmt.Errorf("%w: want data.issues {nodes, pageInfo}: %s", ErrMalformed, graphql.JSONProblem(err))
	}
	if d.Issues == nil {
		return page{}, fmt.Errorf("%w: want data.issues, got none", ErrMalformed)
	}
	if d.Issues.PageInfo == nil {
		return page{}, fmt.Errorf("%w: want data.issues.pageInfo, got none", ErrMalformed)
	}
	p := page{nodes: d.Issues.Nodes}
	if d.Issues.PageInfo.HasNextPage {
		if d.Issues.PageInfo.EndCursor == "" {
			return page{}, fmt.Errorf("%w: data.issues.pageInfo has a next page but no endCursor", ErrMalformed)
		}
		p.next = d.Issues.PageInfo.EndCursor
	}
	for i, n := range p.nodes {
		switch {
		case n.Identifier == "":
			return page{}, fmt.Errorf("%w: data.issues.nodes[%d] has no identifier", ErrMalformed, i)
		case n.ID == "":
			return page{}, fmt.Errorf("%w: issue %s has no id", ErrMalformed, n.Identifier)
		case n.State == nil || n.State.Name == "":
			return page{}, fmt.Errorf("%w: issue %s has no state name", ErrMalformed, n.Identifier)
		}
	}
	return p, nil
}

// tracked converts an issue node as the controller sees it.
func (c *Client) tracked(n issueNode) controller.TrackedIssue {
	t := controller.TrackedIssue{
		ID:     n.Identifier,
		Title:  n.Title,
		Status: c.status(n.State.Name),
		Labels: make([]string, 0, len(n.Labels.Nodes)),
		Branch: n.BranchName,
	}
	for _, l := range n.Labels.Nodes {
		t.Labels = append(t.Labels, l.Name)
	}
	for _, cm := range n.Comments.Nodes {
		out := controller.Comment{Text: cm.Body, Time: cm.CreatedAt.UTC()}
		if text, ok := stripSignature(cm.Body); ok {
			out.Author, out.Text = controller.AuthorLegion, text
		} else if cm.User != nil {
			out.Author = cmp.Or(cm.User.DisplayName, cm.User.Name)
		}
		t.Comments = append(t.Comments, out)
	}
	slices.SortStableFunc(t.Comments, func(a, b controller.Comment) int { return a.Time.Compare(b.Time) })
	return t
}

// stripSignature returns a comment's text without Legion's signature, and
// whether it had one. Linear may escape the parentheses when it stores
// Markdown.
func stripSignature(body string) (string, bool) {
	b := strings.TrimSpace(body)
	for _, sig := range []string{commentSignature, `\(posted by Legion\)`} {
		if rest, ok := strings.CutSuffix(b, sig); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return body, false
}

// Issues implements controller.Tracker: the team's issues (open ones only
// unless Options.IncludeClosed), ordered by number. It is one logical query
// that follows the cursor pages: ceil(issues / PageSize) requests, never
// one per issue.
func (c *Client) Issues(ctx context.Context) ([]controller.TrackedIssue, error) {
	filter := map[string]any{"team": map[string]any{"key": map[string]any{"eq": c.opts.Team}}}
	if !c.opts.IncludeClosed {
		filter["state"] = map[string]any{"type": map[string]any{"nin": []string{"completed", "canceled"}}}
	}
	var (
		nodes []issueNode
		after any // nil on the first page: JSON null
		seen  = map[string]bool{}
	)
	for n := 0; ; n++ {
		if n == maxPages {
			return nil, fmt.Errorf("issues of team %s: linear: more than %d pages of %d issues; raise the page size", c.opts.Team, maxPages, c.opts.PageSize)
		}
		var raw json.RawMessage
		h, err := c.gql.DoHeader(ctx, opIssues, map[string]any{
			"filter": filter, "first": c.opts.PageSize, "after": after, "comments": c.opts.Comments,
		}, &raw)
		if err != nil {
			return nil, fmt.Errorf("issues of team %s: %w", c.opts.Team, err)
		}
		c.noteBudget(h, n+1)
		p, err := decodeIssuesPage(raw)
		if err != nil {
			return nil, fmt.Errorf("issues of team %s: linear: %s page %d: %w", c.opts.Team, opIssues.Name, n+1, err)
		}
		nodes = append(nodes, p.nodes...)
		if p.next == "" {
			break
		}
		if seen[p.next] {
			return nil, fmt.Errorf("issues of team %s: linear: %s page %d: %w: cursor %q repeats", c.opts.Team, opIssues.Name, n+1, ErrMalformed, p.next)
		}
		seen[p.next] = true
		after = p.next
	}

	out := make([]controller.TrackedIssue, 0, len(nodes))
	memo := make(map[string]issueMemo, len(nodes))
	c.mu.Lock()
	for _, n := range nodes {
		key := strings.ToUpper(n.Identifier)
		if _, dup := memo[key]; dup { // moved between pages while we read
			continue
		}
		m := issueMemo{uuid: n.ID, labels: map[string]bool{}}
		for _, l := range n.Labels.Nodes {
			m.labels[strings.ToLower(l.Name)] = true
			if l.ID != "" {
				c.labels[strings.ToLower(l.Name)] = l.ID
			}
		}
		memo[key] = m
		out = append(out, c.tracked(n))
	}
	c.issues = memo
	c.mu.Unlock()
	slices.SortStableFunc(out, func(a, b controller.TrackedIssue) int {
		return cmp.Or(cmp.Compare(issueNumber(a.ID), issueNumber(b.ID)), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// issueNumber is the number of an identifier like ENG-12; 0 if none.
func issueNumber(id string) int {
	num := id[strings.LastIndexByte(id, '-')+1:]
	if num == "" || num == id {
		return 0
	}
	n := 0
	for _, r := range num {
		if r < '0' || r > '9' || n > 1e8 {
			return 0
		}
		n = n*10 + int(r-'0')
	}
	return n
}
