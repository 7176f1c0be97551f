// Package geminitest is a stand-in for the Gemini API as the Gemini CLI
// calls it, for tests that run the real CLI offline: an httptest.Server on
// loopback that answers POST /v1beta/models/<model>:streamGenerateContent
// ?alt=sse from a script of turns, and records every request.
//
// Point the CLI at it with GOOGLE_GEMINI_BASE_URL=s.URL and
// GEMINI_API_KEY=Key in its environment, and model.name set in its
// settings (agent/gemini/FACTS.md G2, G5).
//
// # Follow mode
//
// After Follow, a request that no scripted turn answers is answered by a
// model that knows nothing but what the request holds
// (internal/followmodel, whose doc says what it does and its traits): the
// request's contents become a transcript (see Transcript), and its
// decision becomes a run_shell_command call with {"command",
// "description"} or a text. Questions come as text (Legion denies the
// CLI's ask_user tool). Request.Followed records the decision.
//
// # What is faithful
//
// The stream as Gemini CLI 0.61.0 reads it: server-sent events
// "data: JSON\r\n\r\n", each a GenerateContentResponse
// {candidates:[{content:{role:"model",parts:[…]},index:0}],usageMetadata,
// modelVersion,responseId}, the text in several chunks, finishReason
// "STOP" and the usage on the last; a tool call as one functionCall part
// {name,args}. Each chunk is flushed on its own. A request without the
// header "x-goog-api-key: <Key>" gets 403 with the API's error body. A
// turn's Failure is an error body as the API sends it (limits.go: a spent
// quota, 429 RESOURCE_EXHAUSTED with its google.rpc details).
//
// # What is simplified
//
// No thought parts, no safety ratings, no citation metadata; usage is
// fixed (Usage); the request is not validated. countTokens and the other methods
// get 404 (the CLI with a set model does not call them, FACTS G2).
package geminitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/internal/followmodel"
	"github.com/legion-dev/legion/units/sdtest"
)

// Key is the API key the server accepts.
const Key = "legion-geminitest-key"

// Usage is the usageMetadata of every response (on its last chunk), as
// the API reports it: the cached tokens are part of the prompt's, the
// thoughts' and the tool-use prompt's are apart from the prompt's and the
// candidates', the total is prompt + tool-use prompt + candidates +
// thoughts. Every field differs, so a reader of the CLI's files can tell
// which one it sees.
var Usage = map[string]any{
	"promptTokenCount": 100, "cachedContentTokenCount": 40, "toolUsePromptTokenCount": 3,
	"candidatesTokenCount": 10, "thoughtsTokenCount": 5, "totalTokenCount": 118,
}

// Model is the model the settings of the tests name.
const Model = "gemini-2.5-flash"

// Env is the environment that points the Gemini CLI at s with Key.
func (s *Server) Env() []string {
	return []string{"GOOGLE_GEMINI_BASE_URL=" + s.URL, "GEMINI_API_KEY=" + Key}
}

// Turn is one scripted answer: a text, a call of the CLI's
// run_shell_command tool running Shell (a shell command line), or a call
// of another tool.
type Turn struct {
	Text  string
	Shell string
	// Call calls the tool Call.Name with Call.Args (e.g. write_file with
	// file_path and content).
	Call *Call
	// Stall stops the stream after the first chunk of Text and holds the
	// connection open until the client goes away (or the server closes):
	// a hung stream.
	Stall bool
	// Failure, if set, answers with an HTTP error instead of a stream
	// (Exhausted: a spent quota).
	Failure *Failure
	// Repeat is how many more requests this turn answers after the first
	// (Forever: every matching request from then on).
	Repeat int
	// Match says whether a request may take the turn (nil: any).
	Match func(body []byte) bool
}

// Call is a function call of a Turn.
type Call struct {
	Name string
	Args map[string]any
}

// Request is a request the server received.
type Request struct {
	Time       time.Time
	Path       string
	Body       []byte
	Unscripted bool // no turn matched: answered "nothing scripted"
	Turn       Turn // the turn it took
	// Followed is the follow model's decision that answered it (Follow);
	// nil when a scripted turn did, or none.
	Followed *followmodel.Decision
}

// Server is the fake API.
type Server struct {
	URL    string
	srv    *httptest.Server
	closed chan struct{} // closed when the test ends: stalled streams end

	mu     sync.Mutex
	turns  []Turn
	reqs   []Request
	follow *followmodel.Traits // the follow mode's model, nil when off
}

// NewServer starts a server that t's cleanup closes.
func NewServer(t testing.TB) *Server {
	s := &Server{closed: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(func() {
		close(s.closed)
		s.srv.Close()
	})
	return s
}

// Script queues turns.
func (s *Server) Script(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// Requests are the requests so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Left are the turns no request has taken.
func (s *Server) Left() []Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Turn(nil), s.turns...)
}

func apiError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
	w.Write(b)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "Method not found: "+r.URL.Path)
		return
	}
	if r.Header.Get("x-goog-api-key") != Key {
		apiError(w, http.StatusForbidden, "PERMISSION_DENIED", "API key not valid. Please pass a valid API key.")
		return
	}
	req := Request{Time: time.Now(), Path: r.URL.Path, Body: body, Unscripted: true, Turn: Turn{Text: "nothing scripted"}}
	s.mu.Lock()
	for i, t := range s.turns {
		if t.Match == nil || t.Match(body) {
			req.Turn, req.Unscripted = t, false
			switch {
			case t.Repeat == Forever:
			case t.Repeat > 0:
				s.turns[i].Repeat--
			default:
				s.turns = append(s.turns[:i:i], s.turns[i+1:]...)
			}
			break
		}
	}
	if req.Unscripted && s.follow != nil {
		t, d := followTurn(body, *s.follow)
		req.Turn, req.Unscripted, req.Followed = t, false, &d
	}
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	s.mu.Unlock()
	if req.Turn.Failure != nil {
		req.Turn.Failure.write(w)
		return
	}
	s.stream(w, r, fmt.Sprintf("resp-%d-%d", n, req.Time.UnixNano()), req.Turn)
}

// stream writes turn as the API's server-sent events.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, turn Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(parts []any, last bool) {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		chunk := map[string]any{"candidates": []any{cand}, "modelVersion": Model, "responseId": id}
		if last {
			cand["finishReason"] = "STOP"
			chunk["usageMetadata"] = Usage
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		w.(http.Flusher).Flush()
	}
	if turn.Shell != "" {
		turn.Call = &Call{Name: "run_shell_command", Args: map[string]any{"command": turn.Shell, "description": "Run " + turn.Shell}}
	}
	if turn.Call != nil {
		call := map[string]any{"name": turn.Call.Name, "args": turn.Call.Args}
		send([]any{map[string]any{"functionCall": call}}, true)
		return
	}
	words := strings.SplitAfter(turn.Text, " ")
	for i, word := range words {
		send([]any{map[string]any{"text": word}}, i == len(words)-1)
		if turn.Stall {
			select {
			case <-r.Context().Done():
			case <-s.closed:
			}
			return
		}
	}
}

// Version is the Gemini CLI version the tests run: cliversion.Gemini's
// pin, which scripts/install-agent-clis installs.
const Version = cliversion.GeminiTested

// EnvBinary names the environment variable that, when set, is the path of
// the gemini binary to run instead of the installed one.
var EnvBinary = cliversion.Gemini.TestEnv

// cli is the Gemini CLI the tests run.
var cli = sdtest.PinnedCLI{
	What:      "the Gemini CLI",
	Want:      "Gemini CLI " + Version,
	EnvVar:    EnvBinary,
	Installed: InstalledPath(),
	Install:   "run scripts/install-agent-clis",
	VersionOK: func(v string) bool { got, err := cliversion.Gemini.Parse(v); return err == nil && got == Version },
}

// InstalledPath is where scripts/install-agent-clis puts the gemini
// binary: ${XDG_CACHE_HOME:-$HOME/.cache}/legion/gemini/VERSION/node_modules/.bin/gemini.
func InstalledPath() string {
	return filepath.Join(sdtest.StartCacheDir, "legion", "gemini", Version, "node_modules", ".bin", "gemini")
}

// Binary returns the path of the real Gemini CLI: $LEGION_GEMINI if set,
// else InstalledPath. It skips the test when there is no such executable,
// or when the installed one does not report Version; with CI=true it
// fails the test instead (sdtest.Require).
func Binary(t testing.TB) string {
	t.Helper()
	return cli.Path(t)
}

// WriteUserSettings writes home/.gemini/settings.json as a user's own
// Gemini settings naming Model (the CLI's default "Auto" picks models by
// itself, FACTS G2).
func WriteUserSettings(home string) error {
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(`{"model": {"name": "`+Model+`"}}`+"\n"), 0o600)
}
