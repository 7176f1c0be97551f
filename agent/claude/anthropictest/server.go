package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/internal/followmodel"
)

// SessionHeader is the request header by which Claude Code names its
// session.
const SessionHeader = "X-Claude-Code-Session-Id"

// AnySession is the session whose turns answer requests of any session
// that has no matching turn of its own (including requests without the
// session header).
const AnySession = "*"

// Message is a message of a request.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of blocks
}

// Request is a request the server received.
type Request struct {
	Method, Path string // Path includes the query (/v1/messages?beta=true)
	Header       http.Header
	Session      string // the session header's value, "" when absent
	Body         []byte
	Time         time.Time // when the request arrived

	// Fields of a messages request.
	Model     string            `json:"model"`
	MaxTokens int               `json:"max_tokens"`
	Stream    bool              `json:"stream"`
	System    json.RawMessage   `json:"system"`
	Messages  []Message         `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
	Metadata  json.RawMessage   `json:"metadata"`

	Unscripted bool // no scripted turn answered it
	// Followed is the follow model's decision that answered it (Follow);
	// nil when a scripted turn did, or none.
	Followed *followmodel.Decision
}

// ToolNames returns the names of the tools the request offers.
func (r *Request) ToolNames() []string {
	var names []string
	for _, raw := range r.Tools {
		var t struct{ Name string }
		if json.Unmarshal(raw, &t) == nil {
			names = append(names, t.Name)
		}
	}
	return names
}

// FirstUserText returns the text of the first user message (the prompt of
// a conversation, or of a subagent's): the string content, or its text
// blocks joined by newlines.
func (r *Request) FirstUserText() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return contentText(m.Content)
		}
	}
	return ""
}

// LastUserText returns the text of the last user message: the string
// content, or its text blocks joined by newlines.
func (r *Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return contentText(r.Messages[i].Content)
		}
	}
	return ""
}

// ToolResult is a tool_result block of a request.
type ToolResult struct {
	ToolUseID string
	Content   string // a string content, or its text blocks joined by newlines
	IsError   bool
}

// ToolResult returns the tool_result for tool_use id in the request's
// messages, and whether there is one.
func (r *Request) ToolResult(id string) (ToolResult, bool) {
	for _, m := range r.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" && b.ToolUseID == id {
				return ToolResult{ToolUseID: id, Content: contentText(b.Content), IsError: b.IsError}, true
			}
		}
	}
	return ToolResult{}, false
}

func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct{ Type, Text string }
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

type queued struct {
	turn Turn
	left int // answers left; Forever for no end
}

// Server is a fake Anthropic Messages API.
type Server struct {
	*httptest.Server
	// Key, if set, is the only credential accepted, as x-api-key or as
	// Authorization: Bearer (the CLI sends ANTHROPIC_AUTH_TOKEN so). Set it
	// before the first request.
	Key string

	closing chan struct{} // closed when the test ends, to end held streams

	mu       sync.Mutex
	scripts  map[string][]*queued
	follow   *followmodel.Traits // the follow mode's model, nil when off
	requests []*Request
	nextID   int
}

// NewServer starts a fake API on loopback; it is closed when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// NewServerOn is NewServer serving on l instead of loopback: an address
// a pod reaches, such as a real node's IP (kubetest.RealNodeIP). It is
// closed when the test ends.
func NewServerOn(t testing.TB, l net.Listener) *Server {
	t.Helper()
	s := &Server{scripts: map[string][]*queued{}, closing: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Server.Listener.Close()
	s.Server.Listener = l
	s.Server.Start()
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake API on loopback outside a test (`legion demo --agent
// claude`); the caller closes it.
func Start() *Server {
	s := &Server{scripts: map[string][]*queued{}, closing: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close ends held streams and closes the server.
func (s *Server) Close() {
	close(s.closing)
	s.Server.Close()
}

// Script queues turns for session (AnySession for any).
func (s *Server) Script(session string, turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range turns {
		left := t.Repeat + 1
		if t.Repeat == Forever {
			left = Forever
		}
		s.scripts[session] = append(s.scripts[session], &queued{turn: t, left: left})
	}
}

// Clear drops the turns still queued for session (AnySession for any).
func (s *Server) Clear(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.scripts, session)
}

// Pending returns how many turns are still queued for session (a Forever
// turn counts as one).
func (s *Server) Pending(session string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.scripts[session])
}

// Requests returns the requests received so far, oldest first. The
// Requests are shared: do not change them.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// MessageRequests returns the POST /v1/messages requests of session ("" for
// all), oldest first.
func (s *Server) MessageRequests(session string) []*Request {
	var out []*Request
	for _, r := range s.Requests() {
		path, _, _ := strings.Cut(r.Path, "?")
		if r.Method == http.MethodPost && path == "/v1/messages" && (session == "" || r.Session == session) {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return fmt.Sprintf("%s_test%06d", prefix, s.nextID)
}

// take removes and returns the turn that answers r, or false.
func (s *Server) take(r *Request) (Turn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, session := range []string{r.Session, AnySession} {
		q := s.scripts[session]
		for i, e := range q {
			if e.turn.Match != nil && !e.turn.Match(r) {
				continue
			}
			if e.left != Forever {
				e.left--
				if e.left == 0 {
					s.scripts[session] = append(q[:i:i], q[i+1:]...)
				}
			}
			return e.turn, true
		}
	}
	return Turn{}, false
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	req := &Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Session: r.Header.Get(SessionHeader), Body: body, Time: time.Now()}
	requestID := s.newID("req")
	w.Header().Set("request-id", requestID)
	turn, fail := s.decide(r, req)
	s.mu.Lock()
	s.requests = append(s.requests, req) // complete: readers take no lock on its fields
	s.mu.Unlock()
	if r.URL.Path == "/api/hello" && fail == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	if fail == nil {
		fail = turn.Failure
	}
	if fail != nil {
		s.fail(w, requestID, fail)
		return
	}
	msg := s.message(req, turn)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.Encode(msg)
		return
	}
	s.stream(w, r, msg, turn)
}

// decide fills in req from its body and returns the turn that answers it,
// or the failure it gets before any turn is taken.
func (s *Server) decide(r *http.Request, req *Request) (Turn, *Failure) {
	switch {
	case r.URL.Path == "/api/hello" && (r.Method == http.MethodHead || r.Method == http.MethodGet):
		return Turn{}, nil
	case r.URL.Path != "/v1/messages":
		return Turn{}, &Failure{Status: http.StatusNotFound, Error: APIError{Type: "not_found_error", Message: "Not Found"}}
	case r.Method != http.MethodPost:
		return Turn{}, &Failure{Status: http.StatusMethodNotAllowed, Error: APIError{Type: "invalid_request_error", Message: "Method Not Allowed"}}
	}
	if s.Key != "" && r.Header.Get("X-Api-Key") != s.Key && r.Header.Get("Authorization") != "Bearer "+s.Key {
		return Turn{}, Unauthorized()
	}
	if err := json.Unmarshal(req.Body, req); err != nil {
		return Turn{}, &Failure{Status: http.StatusBadRequest, Error: APIError{Type: "invalid_request_error", Message: "invalid JSON body: " + err.Error()}}
	}
	if req.Model == "" {
		return Turn{}, &Failure{Status: http.StatusBadRequest, Error: APIError{Type: "invalid_request_error", Message: "model: Field required"}}
	}
	turn, ok := s.take(req)
	s.mu.Lock()
	follow := s.follow
	s.mu.Unlock()
	switch {
	case ok && turn.Follow && follow != nil && turn.Failure == nil:
		t, d := followTurn(req, *follow)
		t.Stall, t.StreamError, t.EventDelay = turn.Stall, turn.StreamError, turn.EventDelay
		turn, req.Followed = t, &d
	case !ok && follow != nil:
		t, d := followTurn(req, *follow)
		turn, ok, req.Followed = t, true, &d
	}
	if !ok {
		req.Unscripted = true
		turn = Turn{Blocks: []Block{Text(fmt.Sprintf("anthropictest: no scripted turn left for session %q", req.Session))}}
	}
	return turn, nil
}

// errorBody is the body of an error response.
type errorBody struct {
	Type      string   `json:"type"`
	Error     APIError `json:"error"`
	RequestID string   `json:"request_id"`
}

func (s *Server) fail(w http.ResponseWriter, requestID string, f *Failure) {
	for k, vs := range f.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	json.NewEncoder(w).Encode(errorBody{Type: "error", Error: f.Error, RequestID: requestID})
}
