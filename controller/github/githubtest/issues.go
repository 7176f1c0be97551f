package githubtest

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Issue is an issue of the repository.
type Issue struct {
	ID          string // node id
	Number      int
	Title, Body string
	State       string // OPEN or CLOSED
	StateReason string // COMPLETED once closed through the API
	Labels      []Label
	Comments    []Comment
}

// Comment is an issue comment.
type Comment struct {
	Author      string // login
	Association string // OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE, ...
	Body        string
	CreatedAt   time.Time
}

// Viewer is the login of the token's user, who writes what the API is
// asked to write, as a collaborator of the repository.
const Viewer = "legion-bot"

// AddIssue opens an issue with labels (created in the repository when
// missing) and returns its number. Issues and pull requests share one
// numbering, as on GitHub.
func (s *Server) AddIssue(title string, labels ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch()
	n := s.nextNumber()
	is := &Issue{ID: fmt.Sprintf("I_kwDOAAAA%04d", n), Number: n, Title: title, State: "OPEN"}
	for _, l := range labels {
		is.Labels = append(is.Labels, s.label(l))
	}
	s.issues = append(s.issues, is)
	return n
}

// nextNumber is the next issue or pull request number.
func (s *Server) nextNumber() int {
	n := len(s.PRs) + len(s.issues) + 1
	for _, pr := range s.PRs {
		n = max(n, pr.Number+1)
	}
	return n
}

// Comment adds a comment by login, whose association with the repository
// is association, to issue number n.
func (s *Server) Comment(n int, login, association, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch()
	if is := s.issue(n); is != nil {
		is.Comments = append(is.Comments, Comment{Author: login, Association: association, Body: body, CreatedAt: s.now()})
	}
	if _, set := s.permissions[login]; !set {
		// What such an author usually may do, until SetPermission says
		// otherwise.
		s.permissions[login] = map[string]string{"OWNER": "admin", "MEMBER": "write", "COLLABORATOR": "write"}[association]
	}
}

// SetLabels sets issue n's labels (a person labelling it on GitHub).
func (s *Server) SetLabels(n int, labels ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch()
	if is := s.issue(n); is != nil {
		is.Labels = nil
		for _, l := range labels {
			is.Labels = append(is.Labels, s.label(l))
		}
	}
}

// Issue returns a copy of issue number n, and whether there is one.
func (s *Server) Issue(n int) (Issue, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	is := s.issue(n)
	if is == nil {
		return Issue{}, false
	}
	c := *is
	c.Labels = slices.Clone(is.Labels)
	c.Comments = slices.Clone(is.Comments)
	return c, true
}

// IssueLabels are the names of issue n's labels.
func (s *Server) IssueLabels(n int) []string {
	is, _ := s.Issue(n)
	var out []string
	for _, l := range is.Labels {
		out = append(out, l.Name)
	}
	return out
}

func (s *Server) issue(n int) *Issue {
	for _, is := range s.issues {
		if is.Number == n {
			return is
		}
	}
	return nil
}

// now is a comment's time: strictly after the previous one, as the
// tests' comments follow each other faster than a clock's resolution
// might tell.
func (s *Server) now() time.Time {
	t := time.Now().UTC().Truncate(time.Second)
	if !t.After(s.last) {
		t = s.last.Add(time.Second)
	}
	s.last = t
	return t
}

// labelsOf is the label list of the issue or pull request of node id.
func (s *Server) labelsOf(id string) *[]Label {
	if pr := s.byID(id); pr != nil {
		return &pr.Labels
	}
	for _, is := range s.issues {
		if is.ID == id {
			return &is.Labels
		}
	}
	return nil
}

// IssuesPageSize is the most issues one page holds (GitHub's is the
// query's first:, up to 100).
var IssuesPageSize = 50

func cursor(i int) string {
	return base64.StdEncoding.EncodeToString([]byte("cursor:v2:" + strconv.Itoa(i)))
}

func fromCursor(c string) int {
	b, err := base64.StdEncoding.DecodeString(c)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), "cursor:v2:"))
	if err != nil {
		return -1
	}
	return n
}

func (s *Server) issueNode(is *Issue, query, field string) map[string]any {
	labels := []any{}
	for _, l := range is.Labels {
		labels = append(labels, map[string]any{"id": l.ID, "name": l.Name})
	}
	comments := []any{}
	for _, c := range is.Comments[max(0, len(is.Comments)-50):] {
		comments = append(comments, map[string]any{"body": c.Body, "createdAt": c.CreatedAt.Format(time.RFC3339),
			"authorAssociation": c.Association, "author": map[string]any{"login": c.Author}})
	}
	linked := []any{} // closedByPullRequestsReferences(first: 1): the newest open one
	for i := len(s.PRs) - 1; i >= 0 && len(linked) == 0; i-- {
		if pr := s.PRs[i]; pr.State == "OPEN" && closes(pr.Body, is.Number) {
			n := s.reviewedNode(pr, query)
			n["headRefName"] = pr.Branch
			linked = append(linked, n)
		}
	}
	n := map[string]any{"id": is.ID, "number": is.Number, "title": is.Title, "state": is.State,
		"labels": map[string]any{"nodes": labels}, "comments": map[string]any{"nodes": comments},
		"closedByPullRequestsReferences": map[string]any{"nodes": linked}}
	if strings.Contains(query, "projectItems(") {
		n["projectItems"] = map[string]any{"nodes": s.projectItems(is.Number, field)}
	}
	return n
}

// closeKeyword is GitHub's "Closes #N" and its kin in a pull request's body.
var closeKeyword = regexp.MustCompile(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+#(\d+)\b`)

// closes says whether body links the pull request to issue n.
func closes(body string, n int) bool {
	for _, m := range closeKeyword.FindAllStringSubmatch(body, -1) {
		if m[1] == strconv.Itoa(n) {
			return true
		}
	}
	return false
}

// handleIssues answers the issue operations; ok is false for others.
func (s *Server) handleIssues(op, query string, v map[string]any) (data any, typ, msg string, ok bool) {
	str := func(k string) string { x, _ := v[k].(string); return x }
	switch op {
	case "LegionIssues":
		var want []string
		if ls, _ := v["labels"].([]any); ls != nil {
			for _, l := range ls {
				want = append(want, fmt.Sprint(l))
			}
		}
		var open []*Issue
		for _, is := range s.issues {
			if is.State == "OPEN" && (want == nil || slices.ContainsFunc(is.Labels, func(l Label) bool { return slices.Contains(want, l.Name) })) {
				open = append(open, is)
			}
		}
		start := 0
		if c := str("after"); c != "" {
			if start = fromCursor(c); start < 0 || start > len(open) {
				return nil, "", fmt.Sprintf("`%s` does not appear to be a valid cursor.", c), true
			}
		}
		end := min(len(open), start+IssuesPageSize)
		nodes := []any{}
		for _, is := range open[start:end] {
			nodes = append(nodes, s.issueNode(is, query, str("field")))
		}
		info := map[string]any{"hasNextPage": end < len(open), "endCursor": nil}
		if end > start {
			info["endCursor"] = cursor(end)
		}
		return map[string]any{"repository": map[string]any{"id": RepositoryID,
			"issues": map[string]any{"nodes": nodes, "pageInfo": info}}}, "", "", true
	case "LegionIssue":
		num, _ := v["number"].(float64)
		is := s.issue(int(num))
		if is == nil {
			return map[string]any{"repository": map[string]any{"id": RepositoryID, "issue": nil}}, "NOT_FOUND",
				fmt.Sprintf("Could not resolve to an Issue with the number of %d.", int(num)), true
		}
		return map[string]any{"repository": map[string]any{"id": RepositoryID, "issue": s.issueNode(is, query, str("field"))}}, "", "", true
	case "LegionLabel":
		var label any
		for _, l := range s.Labels {
			if strings.EqualFold(l.Name, str("label")) {
				label = map[string]any{"id": l.ID}
			}
		}
		return map[string]any{"repository": map[string]any{"id": RepositoryID, "label": label}}, "", "", true
	case "LegionComment":
		body := str("body")
		for _, is := range s.issues {
			if is.ID == str("id") {
				is.Comments = append(is.Comments, Comment{Author: Viewer, Association: "COLLABORATOR", Body: body, CreatedAt: s.now()})
				return map[string]any{"addComment": map[string]any{"commentEdge": map[string]any{"node": map[string]any{"id": fmt.Sprintf("IC_kwDO%d", len(is.Comments))}}}}, "", "", true
			}
		}
		return map[string]any{"addComment": nil}, "NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%s'", str("id")), true
	case "LegionCloseIssue", "LegionReopenIssue":
		field := map[string]string{"LegionCloseIssue": "closeIssue", "LegionReopenIssue": "reopenIssue"}[op]
		for _, is := range s.issues {
			if is.ID == str("id") {
				if op == "LegionCloseIssue" {
					is.State, is.StateReason = "CLOSED", "COMPLETED"
				} else {
					is.State, is.StateReason = "OPEN", "REOPENED"
				}
				return map[string]any{field: map[string]any{"issue": map[string]any{"state": is.State}}}, "", "", true
			}
		}
		return map[string]any{field: nil}, "NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%s'", str("id")), true
	}
	return nil, "", "", false
}
