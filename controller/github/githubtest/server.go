// Package githubtest is a stand-in for GitHub's GraphQL API: an
// httptest.Server that speaks the wire format (POST JSON {query,
// operationName, variables} → {data, errors}) over an in-memory repository
// of pull requests (with their labels, reviews and head commit's checks,
// the repository's merge settings and branch protection), for the
// operations package github sends. It counts
// requests per operation so tests can assert batching, and can be told to
// answer the next requests with canned replies (GitHub's server errors
// and rate limits: ServerError, RateLimitReply), to carry out the next
// writes and lose their answers (LoseAnswers), or to hold the next
// request until the client times out (Stall). It keeps a log of the
// writes that took effect (Writes).
//
// It must never be used outside tests and never reach the network.
package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller/internal/graphql/gqltest"
)

// Label is a repository label.
type Label struct{ ID, Name string }

// PR is a pull request.
type PR struct {
	ID        string // node id
	Number    int
	Branch    string // headRefName
	Base      string // baseRefName
	Title     string
	Body      string
	State     string // OPEN, CLOSED or MERGED
	Mergeable string // MERGEABLE, CONFLICTING or UNKNOWN
	Labels    []Label
	MergedBy  string // merge method used, once merged through the API
	Draft     bool
	// Head is the head commit's oid without ServeGit (HeadOID).
	Head    string
	Reviews []Review // submitted reviews, oldest first (AddReview)
	Checks  []Check  // the head commit's checks (SetChecks)
}

// PointsUsed is what the GraphQL queries have cost so far (Cost).
func (s *Server) PointsUsed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.points
}

// PointsPerHour is GitHub's GraphQL budget of a user's token.
const PointsPerHour = 5000

// RepositoryID is the repository's node id.
const RepositoryID = "R_kgDOLegion"

// Reply is a canned answer (see Inject).
type Reply = gqltest.Reply

// Server is a fake GitHub. Its exported fields may be changed under Lock
// while it serves.
type Server struct {
	*httptest.Server
	gqltest.Recorder // Inject, OnCall, Calls, LastVariables
	Token            string
	Owner, Repo      string

	mu     sync.Mutex
	PRs    []*PR
	Labels []Label // the repository's labels
	Settings

	// git is the bare repository ServeGit serves; "" for none.
	git string

	// permissions are the logins' permissions on the repository.
	permissions map[string]string

	// ReadOnlyLabels makes createLabel refused, as for a token that may
	// not write the repository's labels.
	ReadOnlyLabels bool

	issues   []*Issue
	projects []*Project
	last     time.Time // the newest comment's time
	// access is what the fake says of its token (SetAccess).
	access Access

	// points is what the GraphQL queries cost so far (Cost); reset is
	// when GitHub would start the hour afresh.
	points int
	reset  time.Time

	stamp           int // bumped by every change (touch)
	restOK, rest304 int

	lose   int     // mutations still to carry out without an answer (LoseAnswers)
	stalls []bool  // requests still to hold until the client gives up: carry out (true) or not
	writes []Write // mutations that took effect, in order
}

// NewServer starts a fake GitHub for owner/repo that accepts token; it is
// closed when the test ends.
func NewServer(t testing.TB, token, owner, repo string) *Server {
	t.Helper()
	s := &Server{Token: token, Owner: owner, Repo: repo, permissions: map[string]string{}, reset: time.Now().Add(time.Hour).UTC().Truncate(time.Second)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/"+s.Owner+"/"+s.Repo+".git/") {
			s.serveGit(w, r)
			return
		}
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/repos/") {
			s.serveREST(w, r)
			return
		}
		s.serve(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// AddPR adds a pull request for branch in state with labels and returns it.
func (s *Server) AddPR(branch, state string, labels ...string) *PR {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch()
	n := s.nextNumber()
	pr := &PR{ID: fmt.Sprintf("PR_kwDOAAAA%04d", n), Number: n, Branch: branch, State: state, Mergeable: "MERGEABLE"}
	if state != "OPEN" {
		pr.Mergeable = "UNKNOWN"
	}
	for _, l := range labels {
		pr.Labels = append(pr.Labels, s.label(l))
	}
	s.PRs = append(s.PRs, pr)
	return pr
}

// Lock and Unlock guard the exported fields.
func (s *Server) Lock()   { s.mu.Lock() }
func (s *Server) Unlock() { s.mu.Unlock() }

// LabelNames returns the names of pr's labels.
func (s *Server) LabelNames(pr *PR) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range pr.Labels {
		out = append(out, l.Name)
	}
	return out
}

// State returns pr's state.
func (s *Server) State(pr *PR) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return pr.State
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found","documentation_url":"https://docs.github.com/graphql"}`)
		return
	}
	req, err := gqltest.Decode(r.Body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return
	}
	if s.Record(w, req) {
		return
	}
	op := req.OperationName
	s.mu.Lock()
	want := s.Token
	s.mu.Unlock()
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "4999")
	w.Header().Set("X-RateLimit-Reset", "1767323045")
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") || token != want {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/graphql"})
		return
	}
	s.writeScopes(w)
	if !strings.HasPrefix(req.Query, "query "+op+"(") && !strings.HasPrefix(req.Query, "mutation "+op+"(") {
		writeErrors(w, nil, "", fmt.Sprintf("document does not define operation %q", op))
		return
	}
	if msg := previewMissing(r.Header, req.Query); msg != "" {
		writeErrors(w, nil, "", msg)
		return
	}
	stalled, carryOut := s.takeStall()
	if stalled && !carryOut {
		// Held until the client gives up (its timeout closes the
		// connection), or the server closes: no timer here.
		<-r.Context().Done()
		return
	}
	s.mu.Lock()
	data, typ, msg := s.handle(op, req.Query, req.Variables)
	cost := 1
	lost := stalled
	if strings.HasPrefix(req.Query, "mutation ") {
		s.touch() // GitHub's lists change with what a mutation changed
		if msg == "" {
			lost = s.logWrite(op, req.Variables, stalled)
		}
	} else {
		cost = Cost(req.Query)
	}
	s.points += cost
	if m, ok := data.(map[string]any); ok && strings.Contains(req.Query, "rateLimit {") && m["rateLimit"] == nil {
		m["rateLimit"] = map[string]any{"cost": cost, "limit": PointsPerHour, "remaining": max(0, PointsPerHour-s.points),
			"resetAt": s.reset.Format(time.RFC3339)}
	}
	s.mu.Unlock()
	if stalled {
		// Carried out, and the answer held until the client is gone.
		<-r.Context().Done()
		return
	}
	if lost {
		dropConnection(w)
		return
	}
	if msg != "" {
		writeErrors(w, data, typ, msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErrors(w http.ResponseWriter, data any, typ, msg string) {
	e := map[string]any{"message": msg, "locations": []any{map[string]any{"line": 1, "column": 1}}}
	if typ != "" {
		e["type"] = typ
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "errors": []any{e}})
}

func (s *Server) handle(op, query string, v map[string]any) (any, string, string) {
	str := func(k string) string { x, _ := v[k].(string); return x }
	if op == "LegionPullRequests" || op == "LegionPullRequest" || op == "LegionRepository" || op == "LegionIssues" || op == "LegionIssue" || op == "LegionLabel" {
		if str("owner") != s.Owner || str("name") != s.Repo {
			return map[string]any{"repository": nil}, "NOT_FOUND",
				fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", str("owner"), str("name"))
		}
	}
	if data, typ, msg, ok := s.handlePulls(op, query, v); ok {
		return data, typ, msg
	}
	switch op {
	case "LegionAccess":
		return s.accessData(str("owner"), str("name"))
	case "LegionRepository":
		var label any
		for _, l := range s.Labels {
			if l.Name == str("label") {
				label = map[string]any{"id": l.ID}
			}
		}
		nodes := []any{}
		for i := len(s.PRs) - 1; i >= 0; i-- {
			if pr := s.PRs[i]; pr.Branch == str("branch") && pr.State == "OPEN" {
				nodes = append(nodes, s.node(pr, true))
				break
			}
		}
		return map[string]any{"repository": map[string]any{"id": RepositoryID, "label": label, "pullRequests": map[string]any{"nodes": nodes}}}, "", ""
	case "LegionCreatePullRequest":
		if str("repo") != RepositoryID {
			return map[string]any{"createPullRequest": nil}, "NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%s'", str("repo"))
		}
		if msg := s.checkRefs(str("base"), str("head")); msg != "" {
			return map[string]any{"createPullRequest": nil}, "UNPROCESSABLE", msg
		}
		for _, pr := range s.PRs {
			if pr.Branch == str("head") && pr.State == "OPEN" {
				return map[string]any{"createPullRequest": nil}, "UNPROCESSABLE", fmt.Sprintf("A pull request already exists for %s:%s.", s.Owner, str("head"))
			}
		}
		n := s.nextNumber()
		pr := &PR{ID: fmt.Sprintf("PR_kwDOAAAA%04d", n), Number: n, Branch: str("head"), Base: str("base"),
			Title: str("title"), Body: str("body"), State: "OPEN", Mergeable: "MERGEABLE"}
		s.PRs = append(s.PRs, pr)
		return map[string]any{"createPullRequest": map[string]any{"pullRequest": s.node(pr, true)}}, "", ""
	case "LegionCreateLabel":
		if s.ReadOnlyLabels {
			return map[string]any{"createLabel": nil}, "FORBIDDEN", "Resource not accessible by personal access token"
		}
		for _, l := range s.Labels {
			if strings.EqualFold(l.Name, str("name")) {
				return map[string]any{"createLabel": nil}, "UNPROCESSABLE", "Name has already been taken"
			}
		}
		l := s.label(str("name"))
		return map[string]any{"createLabel": map[string]any{"label": map[string]any{"id": l.ID}}}, "", ""
	case "LegionAddLabels":
		labels := s.labelsOf(str("id"))
		if labels == nil {
			return map[string]any{"addLabelsToLabelable": nil}, "NOT_FOUND", "Could not resolve to a node"
		}
		ids, _ := v["labelIds"].([]any)
		for _, id := range ids {
			i := slices.IndexFunc(s.Labels, func(l Label) bool { return l.ID == id })
			if i < 0 {
				return map[string]any{"addLabelsToLabelable": nil}, "NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%v'", id)
			}
			if !slices.Contains(*labels, s.Labels[i]) {
				*labels = append(*labels, s.Labels[i])
			}
		}
		return map[string]any{"addLabelsToLabelable": map[string]any{"clientMutationId": nil}}, "", ""
	case "LegionRemoveLabels":
		labels := s.labelsOf(str("id"))
		if labels == nil {
			return map[string]any{"removeLabelsFromLabelable": nil}, "NOT_FOUND", "Could not resolve to a node"
		}
		ids, _ := v["labelIds"].([]any)
		*labels = slices.DeleteFunc(*labels, func(l Label) bool { return slices.Contains(ids, any(l.ID)) })
		return map[string]any{"removeLabelsFromLabelable": map[string]any{"clientMutationId": nil}}, "", ""
	}
	if data, typ, msg, ok := s.handleProjects(op, v); ok {
		return data, typ, msg
	}
	if data, typ, msg, ok := s.handleIssues(op, query, v); ok {
		return data, typ, msg
	}
	return nil, "", fmt.Sprintf("unknown operation %q", op)
}

// label is the repository's label name, added to it when missing.
func (s *Server) label(name string) Label {
	for _, l := range s.Labels {
		if l.Name == name {
			return l
		}
	}
	l := Label{ID: "LA_kwDO" + strings.ReplaceAll(name, "-", "_"), Name: name}
	s.Labels = append(s.Labels, l)
	return l
}

func (s *Server) byID(id string) *PR {
	for _, pr := range s.PRs {
		if pr.ID == id {
			return pr
		}
	}
	return nil
}

func (s *Server) node(pr *PR, labels bool) map[string]any {
	n := map[string]any{
		"id": pr.ID, "number": pr.Number, "state": pr.State, "mergeable": pr.Mergeable,
		"url": fmt.Sprintf("https://github.com/%s/%s/pull/%d", s.Owner, s.Repo, pr.Number),
	}
	if labels {
		ls := []any{}
		for _, l := range pr.Labels {
			ls = append(ls, map[string]any{"id": l.ID, "name": l.Name})
		}
		n["labels"] = map[string]any{"nodes": ls}
	}
	return n
}
