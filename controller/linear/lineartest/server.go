// Package lineartest is a stand-in for Linear's GraphQL API: an
// httptest.Server that speaks the wire format (POST JSON {query,
// operationName, variables} → {data, errors}) over an in-memory team, for
// the operations package linear sends. It counts requests per operation so
// tests can assert batching, and can be told to answer the next requests
// with canned replies (rate limits, server errors, garbage), to carry out
// the next writes and lose their answers (LoseAnswers), or to hold the
// next request until the client times out (Stall). It keeps a log of
// the writes that took effect (Writes).
//
// It must never be used outside tests and never reach the network.
package lineartest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller/internal/graphql/gqltest"
)

// State is a workflow state of the team.
type State struct{ ID, Name, Type string }

// Label is an issue label; TeamID "" is a workspace label.
type Label struct{ ID, Name, TeamID string }

// Comment is a comment on an issue.
type Comment struct {
	Body      string
	User      string // display name; "" for none
	CreatedAt time.Time
}

// Issue is an issue of the team.
type Issue struct {
	ID         string // UUID
	Identifier string // KEY-n
	Number     int
	Title      string
	BranchName string
	StateID    string
	LabelIDs   []string
	Comments   []Comment
}

// Reply is a canned answer (see Inject).
type Reply = gqltest.Reply

// RequestsPerHour is the request budget of an API key the fake reports
// (the lower of the figures Linear has published).
const RequestsPerHour = 1500

// Server is a fake Linear. Its exported fields may be changed under Lock
// while it serves.
type Server struct {
	*httptest.Server
	gqltest.Recorder        // Inject, OnCall, Calls, LastVariables
	Key              string // the only API key accepted
	TeamKey          string
	TeamID           string
	UserName         string // author of comments created through the API

	mu     sync.Mutex
	States []State
	Labels []Label
	Issues []*Issue
	nextID int

	used   float64   // the request budget's bucket: requests not yet leaked away
	leaked time.Time // when used was last leaked
	lose   int       // mutations still to carry out without an answer
	stalls []bool    // requests still to hold until the client gives up: carry out (true) or not
	writes []Write   // mutations that took effect, in order
	clock  time.Time
}

// DefaultStates are a team's states in a new Server: Linear's default
// workflow plus the states Legion's statuses are named after.
var DefaultStates = []State{
	{"st-backlog", "Backlog", "backlog"},
	{"st-todo", "Todo", "unstarted"},
	{"st-progress", "In Progress", "started"},
	{"st-review", "Needs Review", "started"},
	{"st-retro", "Retro", "started"},
	{"st-done", "Done", "completed"},
	{"st-canceled", "Canceled", "canceled"},
}

// NewServer starts a fake Linear for team teamKey that accepts key; it is
// closed when the test ends.
func NewServer(t testing.TB, key, teamKey string) *Server {
	t.Helper()
	return NewServerOn(t, nil, key, teamKey)
}

// NewServerOn is NewServer serving on l (nil: a port of 127.0.0.1), an
// address a pod reaches.
func NewServerOn(t testing.TB, l net.Listener, key, teamKey string) *Server {
	t.Helper()
	s := &Server{leaked: time.Now(),
		Key: key, TeamKey: teamKey, TeamID: "team-" + strings.ToLower(teamKey), UserName: "Ada Lovelace",
		States: slices.Clone(DefaultStates),
		clock:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if l != nil {
		s.Server.Listener.Close()
		s.Server.Listener = l
	}
	s.Server.Start()
	t.Cleanup(s.Close)
	return s
}

// Write is a mutation that took effect on the fake.
type Write struct {
	Op        string         // the operation name, e.g. LegionComment
	Variables map[string]any // as the client sent them
	// Lost: the write took effect but its answer was never sent (the
	// connection was closed instead; see LoseAnswers).
	Lost bool
}

// LoseAnswers makes the next n mutations that succeed take effect and then
// lose their answer: the connection is closed before any response is
// written, as when the network or a proxy drops it after the server
// committed. The client sees a transport error and cannot know the write
// happened. Queries and failed mutations are answered as usual.
func (s *Server) LoseAnswers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose += n
}

// Stall makes the next request (any operation) hang without an answer
// until the client gives up on it (its timeout, or its context, closes
// the connection). If carryOut, the fake carries it out first, as a
// server that committed and then stalled on the answer: a mutation takes
// effect, logged in Writes as Lost, since its answer reaches no one;
// otherwise the request is never carried out. Stall does not wait for
// the request.
func (s *Server) Stall(carryOut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalls = append(s.stalls, carryOut)
}

// Writes returns the mutations that took effect so far, in order.
func (s *Server) Writes() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}

// Lock and Unlock guard the exported fields.
func (s *Server) Lock()   { s.mu.Lock() }
func (s *Server) Unlock() { s.mu.Unlock() }

// AddIssue adds an issue in the state called stateName with the labels
// called labels (created as team labels when missing) and returns it.
func (s *Server) AddIssue(title, stateName string, labels ...string) *Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.Issues) + 1
	is := &Issue{
		ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), Identifier: fmt.Sprintf("%s-%d", s.TeamKey, n),
		Number: n, Title: title, BranchName: fmt.Sprintf("ada/%s-%d", strings.ToLower(s.TeamKey), n),
	}
	for _, st := range s.States {
		if st.Name == stateName {
			is.StateID = st.ID
		}
	}
	if is.StateID == "" {
		panic("lineartest: no state " + stateName)
	}
	for _, l := range labels {
		is.LabelIDs = append(is.LabelIDs, s.labelLocked(l, s.TeamID).ID)
	}
	s.Issues = append(s.Issues, is)
	return is
}

// AddLabel adds a label (teamID "" for a workspace label) and returns it.
func (s *Server) AddLabel(name, teamID string) Label {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.labelLocked(name, teamID)
}

func (s *Server) labelLocked(name, teamID string) Label {
	for _, l := range s.Labels {
		if l.Name == name && l.TeamID == teamID {
			return l
		}
	}
	s.nextID++
	l := Label{ID: fmt.Sprintf("lbl-%d", s.nextID), Name: name, TeamID: teamID}
	s.Labels = append(s.Labels, l)
	return l
}

// Comment adds a comment by user to issue is, one minute after the last.
func (s *Server) Comment(is *Issue, user, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = s.clock.Add(time.Minute)
	is.Comments = append(is.Comments, Comment{Body: body, User: user, CreatedAt: s.clock})
}

// Issue returns the issue with identifier id, or nil.
func (s *Server) Issue(id string) *Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issueLocked(id)
}

func (s *Server) issueLocked(id string) *Issue {
	for _, is := range s.Issues {
		if is.ID == id || strings.EqualFold(is.Identifier, id) {
			return is
		}
	}
	return nil
}

// StateName returns the name of the state with id, or "".
func (s *Server) StateName(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked(id).Name
}

func (s *Server) stateLocked(id string) State {
	for _, st := range s.States {
		if st.ID == id {
			return st
		}
	}
	return State{}
}

// LabelNames returns the names of the labels on is.
func (s *Server) LabelNames(is *Issue) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range is.LabelIDs {
		out = append(out, s.labelByID(id).Name)
	}
	return out
}

// RemoveLabel takes the label named name off is (a person unlabelling it
// in Linear).
func (s *Server) RemoveLabel(is *Issue, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	is.LabelIDs = slices.DeleteFunc(is.LabelIDs, func(id string) bool { return s.labelByID(id).Name == name })
}

func (s *Server) labelByID(id string) Label {
	for _, l := range s.Labels {
		if l.ID == id {
			return l
		}
	}
	return Label{}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "GraphQL wants POST", http.StatusMethodNotAllowed)
		return
	}
	req, err := gqltest.Decode(r.Body)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, "GRAPHQL_PARSE_FAILED", "invalid request body: "+err.Error())
		return
	}
	if s.Record(w, req) {
		return
	}
	op := req.OperationName
	s.mu.Lock()
	key := s.Key
	s.mu.Unlock()
	if r.Header.Get("Authorization") != key {
		writeErrors(w, http.StatusBadRequest, "AUTHENTICATION_ERROR", "Authentication required, not authenticated")
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeErrors(w, http.StatusBadRequest, "BAD_USER_INPUT", "Content-Type must be application/json, got "+ct)
		return
	}
	if err := checkDocument(req.Query, op); err != nil {
		writeErrors(w, http.StatusBadRequest, "GRAPHQL_VALIDATION_FAILED", err.Error())
		return
	}

	s.mu.Lock()
	stalled, carryOut := len(s.stalls) > 0, false
	if stalled {
		carryOut, s.stalls = s.stalls[0], s.stalls[1:]
	}
	s.mu.Unlock()
	if stalled && !carryOut {
		// Held until the client gives up (its timeout closes the
		// connection), or the server closes: no timer here.
		<-r.Context().Done()
		return
	}
	s.mu.Lock()
	data, code, msg := s.handle(op, req.Query, req.Variables)
	remaining, reset := s.spend(time.Now())
	lost := stalled
	if msg == "" && strings.HasPrefix(req.Query, "mutation ") {
		if !lost && s.lose > 0 {
			lost = true
			s.lose--
		}
		s.writes = append(s.writes, Write{Op: op, Variables: req.Variables, Lost: lost})
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
	// Linear's account of the API key's request budget (a leaky bucket:
	// Reset is when it is full again).
	w.Header().Set("X-RateLimit-Requests-Limit", strconv.Itoa(RequestsPerHour))
	w.Header().Set("X-RateLimit-Requests-Remaining", strconv.Itoa(remaining))
	w.Header().Set("X-RateLimit-Requests-Reset", strconv.FormatInt(reset.UnixMilli(), 10))
	if msg != "" {
		writeErrors(w, http.StatusOK, code, msg)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// spend takes one request from the key's budget at now and returns what
// is left and when the budget is whole again. The budget is a leaky
// bucket, as Linear describes its limits: it refills continuously at
// RequestsPerHour an hour (a run longer than an hour, or a busy one, is
// not cut off for good once it has spent the hour's figure). Under s.mu.
func (s *Server) spend(now time.Time) (remaining int, full time.Time) {
	rate := float64(RequestsPerHour) / time.Hour.Seconds()
	s.used = max(0, s.used-now.Sub(s.leaked).Seconds()*rate) + 1
	s.leaked = now
	remaining = max(0, RequestsPerHour-int(math.Ceil(s.used)))
	return remaining, now.Add(time.Duration(s.used / rate * float64(time.Second)))
}

// dropConnection closes the request's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// No connection to take over (HTTP/2): abort the handler, which
		// resets the stream without a response.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// checkDocument is a light check of the GraphQL document: it names the
// operation, and its brackets balance.
func checkDocument(q, op string) error {
	if !strings.HasPrefix(q, "query "+op+"(") && !strings.HasPrefix(q, "mutation "+op+"(") {
		return fmt.Errorf("document does not define operation %q", op)
	}
	var stack []rune
	pair := map[rune]rune{')': '(', '}': '{', ']': '['}
	for _, c := range q {
		switch c {
		case '(', '{', '[':
			stack = append(stack, c)
		case ')', '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != pair[c] {
				return fmt.Errorf("syntax error: unexpected %q", c)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		return fmt.Errorf("syntax error: unexpected end of document")
	}
	return nil
}

func writeErrors(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"errors": []any{map[string]any{
			"message":    msg,
			"extensions": map[string]any{"code": code, "type": strings.ToLower(strings.ReplaceAll(code, "_", " ")), "userError": true},
		}},
		"data": nil,
	})
}

// handle answers one operation: data, or an error code and message.
func (s *Server) handle(op, query string, v map[string]any) (any, string, string) {
	str := func(k string) string { x, _ := v[k].(string); return x }
	success := func(field string) (any, string, string) {
		return map[string]any{field: map[string]any{"success": true, "lastSyncId": 1}}, "", ""
	}
	switch op {
	case "LegionIssues":
		return s.issues(query, v)
	case "LegionTeam":
		if !strings.Contains(query, "teams(") {
			return nil, "GRAPHQL_VALIDATION_FAILED", "LegionTeam must query teams"
		}
		nodes := []any{}
		if str("key") == s.TeamKey {
			states := []any{}
			for _, st := range s.States {
				states = append(states, map[string]any{"id": st.ID, "name": st.Name, "type": st.Type})
			}
			nodes = append(nodes, map[string]any{"id": s.TeamID, "key": s.TeamKey, "name": s.TeamKey + " team",
				"states": map[string]any{"nodes": states}})
		}
		return map[string]any{"teams": map[string]any{"nodes": nodes}}, "", ""
	case "LegionLabel":
		nodes := []any{}
		for _, l := range s.Labels {
			if strings.EqualFold(l.Name, str("name")) {
				var team any
				if l.TeamID != "" {
					team = map[string]any{"id": l.TeamID}
				}
				nodes = append(nodes, map[string]any{"id": l.ID, "name": l.Name, "isGroup": false, "team": team})
			}
		}
		return map[string]any{"issueLabels": map[string]any{"nodes": nodes}}, "", ""
	case "LegionCreateLabel":
		if str("teamId") != s.TeamID {
			return nil, "INVALID_INPUT", "Entity not found: Team"
		}
		for _, l := range s.Labels {
			if strings.EqualFold(l.Name, str("name")) && (l.TeamID == s.TeamID || l.TeamID == "") {
				return nil, "INVALID_INPUT", "Duplicate label name"
			}
		}
		l := s.labelLocked(str("name"), s.TeamID)
		return map[string]any{"issueLabelCreate": map[string]any{"success": true, "issueLabel": map[string]any{"id": l.ID, "name": l.Name}}}, "", ""
	case "LegionMove", "LegionAddLabel", "LegionRemoveLabel":
		is := s.issueLocked(str("id"))
		if is == nil {
			return nil, "INVALID_INPUT", "Entity not found: Issue"
		}
		switch op {
		case "LegionMove":
			if s.stateLocked(str("stateId")).ID == "" {
				return nil, "INVALID_INPUT", "Entity not found: WorkflowState"
			}
			is.StateID = str("stateId")
			return success("issueUpdate")
		case "LegionAddLabel":
			if s.labelByID(str("labelId")).ID == "" {
				return nil, "INVALID_INPUT", "Entity not found: IssueLabel"
			}
			if !slices.Contains(is.LabelIDs, str("labelId")) {
				is.LabelIDs = append(is.LabelIDs, str("labelId"))
			}
			return success("issueAddLabel")
		default:
			is.LabelIDs = slices.DeleteFunc(is.LabelIDs, func(id string) bool { return id == str("labelId") })
			return success("issueRemoveLabel")
		}
	case "LegionIssueComments":
		is := s.issueLocked(str("id"))
		if is == nil {
			return nil, "INVALID_INPUT", "Entity not found: Issue"
		}
		first, _ := v["comments"].(float64)
		nodes := []any{}
		for i := len(is.Comments) - 1; i >= 0 && len(nodes) < int(first); i-- { // newest first
			nodes = append(nodes, map[string]any{"body": is.Comments[i].Body})
		}
		return map[string]any{"issue": map[string]any{"comments": map[string]any{"nodes": nodes}}}, "", ""
	case "LegionComment":
		is := s.issueLocked(str("issueId"))
		if is == nil {
			return nil, "INVALID_INPUT", "Entity not found: Issue"
		}
		s.clock = s.clock.Add(time.Minute)
		is.Comments = append(is.Comments, Comment{Body: str("body"), User: s.UserName, CreatedAt: s.clock})
		return success("commentCreate")
	}
	return nil, "GRAPHQL_VALIDATION_FAILED", fmt.Sprintf("unknown operation %q", op)
}

func (s *Server) issues(query string, v map[string]any) (any, string, string) {
	for _, f := range []string{"issues(", "pageInfo", "hasNextPage", "endCursor", "identifier", "labels(", "comments("} {
		if !strings.Contains(query, f) {
			return nil, "GRAPHQL_VALIDATION_FAILED", "LegionIssues lacks " + f
		}
	}
	filter, _ := v["filter"].(map[string]any)
	teamKey := dig(filter, "team", "key", "eq")
	if teamKey != s.TeamKey {
		return nil, "INVALID_INPUT", fmt.Sprintf("filter must select team %s, got %v", s.TeamKey, teamKey)
	}
	var excluded []any
	if x, ok := dig(filter, "state", "type", "nin").([]any); ok {
		excluded = x
	}
	first, ok := v["first"].(float64)
	if !ok || first < 1 || first > 250 {
		return nil, "INVALID_INPUT", "first must be 1 to 250"
	}
	nComments, _ := v["comments"].(float64)
	start := 0
	if after, ok := v["after"].(string); ok {
		b, err := base64.StdEncoding.DecodeString(after)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "cursor:"))
		if err != nil || err2 != nil {
			return nil, "INVALID_INPUT", "bad cursor"
		}
		start = n
	} else if v["after"] != nil {
		return nil, "INVALID_INPUT", "after must be a string or null"
	}

	var match []*Issue
	for _, is := range s.Issues {
		if !slices.Contains(excluded, any(s.stateLocked(is.StateID).Type)) {
			match = append(match, is)
		}
	}
	end := min(start+int(first), len(match))
	nodes := []any{}
	for _, is := range match[min(start, len(match)):end] {
		st := s.stateLocked(is.StateID)
		labels := []any{}
		for _, id := range is.LabelIDs {
			l := s.labelByID(id)
			labels = append(labels, map[string]any{"id": l.ID, "name": l.Name})
		}
		comments := []any{}
		for i := len(is.Comments) - 1; i >= 0 && len(comments) < int(nComments); i-- { // newest first
			cm := is.Comments[i]
			var user any
			if cm.User != "" {
				user = map[string]any{"name": strings.ToLower(strings.Fields(cm.User)[0]), "displayName": cm.User}
			}
			comments = append(comments, map[string]any{"body": cm.Body, "createdAt": cm.CreatedAt.Format("2006-01-02T15:04:05.000Z"), "user": user})
		}
		nodes = append(nodes, map[string]any{
			"id": is.ID, "identifier": is.Identifier, "title": is.Title, "branchName": is.BranchName,
			"state":    map[string]any{"id": st.ID, "name": st.Name, "type": st.Type},
			"labels":   map[string]any{"nodes": labels},
			"comments": map[string]any{"nodes": comments},
		})
	}
	var cursor any
	if end > 0 {
		cursor = base64.StdEncoding.EncodeToString([]byte("cursor:" + strconv.Itoa(end)))
	}
	return map[string]any{"issues": map[string]any{
		"nodes":    nodes,
		"pageInfo": map[string]any{"hasNextPage": end < len(match), "endCursor": cursor},
	}}, "", ""
}

func dig(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}
