// Package openaitest is a stand-in for the OpenAI Responses API as the
// Codex CLI calls it, for tests that run the real CLI offline: an
// httptest.Server on loopback that answers POST /v1/responses, streaming,
// from a script of turns, and records every request.
//
// Point Codex at it with a custom model provider (agent/codex/FACTS.md
// X4): model_provider = "<id>" and [model_providers.<id>] base_url =
// s.URL + "/v1", env_key naming a variable that holds Key, wire_api =
// "responses".
//
// # Follow mode
//
// After Follow, a request that no scripted turn answers is answered by a
// model that knows nothing but what the request holds
// (internal/followmodel, whose doc says what it does and its traits): the
// request's input becomes a transcript (see Transcript), and its decision
// becomes a call of the shell tool the request offers (Codex's
// exec_command with {"cmd"}, else opencode's bash with {"command",
// "description"}) or a text. Questions come as text: neither CLI offers a
// question tool Legion lets a model use. Request.Followed records the
// decision. Title requests are answered as before.
//
// # What is faithful
//
// The SSE stream as Codex 0.169.0 reads it: "event: NAME\ndata: JSON\n\n"
// with response.created, response.output_item.added, output_text.delta
// (the text in several pieces) or function_call_arguments.done,
// response.output_item.done (the whole item), response.completed (the
// response with its output and usage); each event flushed on its own.
// A request without "Authorization: Bearer <Key>" gets 401. A turn's
// Failure is an error body as the API sends it (limits.go: a rate limit,
// a spent quota, a ChatGPT plan's usage limit, with their headers).
//
// # What is simplified
//
// A stalled turn (Turn.Stall) is recorded like any other; Codex's own
// stream idle timeout (stream_idle_timeout_ms of the provider, FACTS X17)
// drops it in the end.
//
// No reasoning items, no content_part events, no logprobs; usage is fixed
// (Usage); the request is not validated. Codex's title requests (FACTS
// X12, the input asks to "Generate a concise, single-line task title") are
// answered with a fixed title and take no turn.
package openaitest

import (
	"bytes"
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

	"github.com/legion-dev/legion/internal/followmodel"
)

// Usage is the usage of every response.completed, as the Responses API
// reports it: the cached tokens are part of the input's, the reasoning
// tokens part of the output's. Every field differs, so a reader of the
// agent's files can tell which one it sees.
var Usage = map[string]any{
	"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 40},
	"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 5},
	"total_tokens": 110,
}

// Key is the API key the server accepts.
const Key = "sk-legion-openaitest"

// KeyEnv is the variable the provider of WriteUserConfig reads Key from:
// give the CLI KeyEnv=Key in its environment.
const KeyEnv = "FAKE_OPENAI_API_KEY"

// Turn is one scripted answer: a text, or a call of Codex's exec_command
// tool running Exec (a shell command line).
type Turn struct {
	Text string
	Exec string
	// Escalate asks for Exec to run outside Codex's sandbox
	// (sandbox_permissions "require_escalated"): under Codex's default
	// approval policy that is an approval (FACTS X15).
	Escalate bool
	// Stall stops the stream after the first piece of Text and holds the
	// connection open until the client goes away (or the server closes):
	// a hung stream.
	Stall bool
	// Tool and Args are a call of another tool by name, e.g. opencode's
	// bash with {"command", "description"} (when Exec is empty).
	Tool string
	Args map[string]any
	// Failure, if set, answers with an HTTP error instead of a stream
	// (RateLimited, QuotaExceeded, UsageLimitReached).
	Failure *Failure
	// Repeat is how many more requests this turn answers after the first
	// (Forever: every matching request from then on).
	Repeat int
	// Match says whether a request may take the turn (nil: any).
	Match func(body []byte) bool
}

// Request is a request the server received.
type Request struct {
	Time       time.Time
	Path       string
	Body       []byte
	Title      bool // one of Codex's title requests
	Unscripted bool // no turn matched: answered "nothing scripted"
	Turn       Turn // the turn it took
	// Followed is the follow model's decision that answered it (Follow);
	// nil when a scripted turn did, or none.
	Followed *followmodel.Decision
}

// Tools are the names of the tools the request offers the model.
func (r Request) Tools() ([]string, error) {
	var req struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &req); err != nil {
		return nil, fmt.Errorf("a Responses API request that is not JSON: %w", err)
	}
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Name)
	}
	return names, nil
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

// WriteUserConfig writes home/.codex/config.toml as a user's own Codex
// config whose model provider is s (model "fake-model", key from KeyEnv).
func (s *Server) WriteUserConfig(home string) error {
	cfg := fmt.Sprintf(`model = "fake-model"
model_provider = "fake"

[model_providers.fake]
name = "Fake"
base_url = %q
env_key = %q
wire_api = "responses"
`, s.URL+"/v1", KeyEnv)
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(cfg), 0o600)
}

// WriteOpencodeUserConfig writes home/.config/opencode/opencode.json as a
// user's own opencode config whose openai provider is s (opencode FACTS
// O2: model "openai/gpt-5", also as the small model of title requests),
// with the key read from KeyEnv ({env:…}, opencode's substitution).
func (s *Server) WriteOpencodeUserConfig(home string) error {
	cfg := map[string]any{
		"$schema":     "https://opencode.ai/config.json",
		"model":       "openai/gpt-5",
		"small_model": "openai/gpt-5",
		"provider": map[string]any{"openai": map[string]any{"options": map[string]any{
			"baseURL": s.URL + "/v1", "apiKey": "{env:" + KeyEnv + "}",
		}}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "opencode.json"), b, 0o600)
}

// Bash is a turn that calls opencode's bash tool with command.
func Bash(command string) Turn {
	return Turn{Tool: "bash", Args: map[string]any{"command": command, "description": "Run " + command}}
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

// titleMarkers are in the input of Codex's and opencode's title
// requests (codex FACTS X12, opencode FACTS O2).
var titleMarkers = [][]byte{[]byte("Generate a concise, single-line task title"), []byte("You are a title generator")}

func isTitle(body []byte) bool {
	for _, m := range titleMarkers {
		if bytes.Contains(body, m) {
			return true
		}
	}
	return false
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+Key {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	req := Request{Time: time.Now(), Path: r.URL.Path, Body: body, Title: isTitle(body)}
	s.mu.Lock()
	switch {
	case req.Title:
		req.Turn = Turn{Text: "Legion task"}
	default:
		req.Unscripted = true
		req.Turn = Turn{Text: "nothing scripted"}
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
	}
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	s.mu.Unlock()
	if req.Turn.Failure != nil {
		req.Turn.Failure.write(w)
		return
	}
	s.stream(w, r, fmt.Sprintf("%d_%d", n, req.Time.UnixNano()), req.Turn)
}

// stream writes turn as a Responses API event stream.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, turn Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(fields)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
	resp := map[string]any{"id": "resp_" + id, "object": "response", "created_at": time.Now().Unix(), "status": "in_progress", "model": "fake-model", "output": []any{}}
	send("response.created", map[string]any{"response": resp})
	var item map[string]any
	if turn.Exec != "" || turn.Tool != "" {
		name, in := turn.Tool, turn.Args
		if turn.Exec != "" {
			name, in = "exec_command", map[string]any{"cmd": turn.Exec}
			if turn.Escalate {
				in["sandbox_permissions"], in["justification"] = "require_escalated", "Run "+turn.Exec+"?"
			}
		}
		args, _ := json.Marshal(in)
		item = map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": "call_" + id, "name": name, "arguments": string(args), "status": "completed"}
		send("response.output_item.added", map[string]any{"output_index": 0, "item": item})
		send("response.function_call_arguments.done", map[string]any{"item_id": "fc_" + id, "output_index": 0, "arguments": string(args)})
	} else {
		part := map[string]any{"type": "output_text", "text": turn.Text, "annotations": []any{}}
		item = map[string]any{"type": "message", "id": "msg_" + id, "status": "completed", "role": "assistant", "content": []any{part}}
		send("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "id": "msg_" + id, "status": "in_progress", "role": "assistant", "content": []any{}}})
		for _, word := range strings.SplitAfter(turn.Text, " ") {
			send("response.output_text.delta", map[string]any{"item_id": "msg_" + id, "output_index": 0, "content_index": 0, "delta": word})
			if turn.Stall {
				select {
				case <-r.Context().Done():
				case <-s.closed:
				}
				return
			}
		}
	}
	send("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	resp["status"], resp["output"] = "completed", []any{item}
	resp["usage"] = Usage
	send("response.completed", map[string]any{"response": resp})
}
