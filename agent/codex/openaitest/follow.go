package openaitest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/legion-dev/legion/internal/followmodel"
)

// Follow turns on the follow mode: a request that no scripted turn
// answers (title requests aside) is answered by followmodel.Decide over
// the request's input, as a model with traits would answer it. Scripted
// turns still come first.
func (s *Server) Follow(traits followmodel.Traits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.follow = &traits
}

// Transcript is the conversation of a Responses API request body as the
// follow model sees it: the user and assistant messages' text parts (the
// developer and system messages, Codex's permissions and opencode's system
// prompt, are left out), function_call items (exec_command by its cmd,
// bash by its command) and function_call_output items, in order (an error
// when its output says a non-zero exit code, codex FACTS X26; opencode's
// bash output says none, opencode FACTS O21, so its failures are not
// seen). Codex
// writes message items with "type":"message", opencode (the AI SDK) with
// a role and no type; both are read. The request offers no question tool
// the model may use (Codex's request_user_input is unavailable in Default
// mode, FACTS X24; Legion denies opencode's, FACTS O19).
func Transcript(body []byte) (followmodel.Transcript, error) {
	var req struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return followmodel.Transcript{}, fmt.Errorf("a Responses API request that is not JSON: %w", err)
	}
	var t followmodel.Transcript
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		t.Items = append(t.Items, followmodel.Item{Role: followmodel.User, Text: s})
		return t, nil
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		CallID    string          `json:"call_id"`
		Output    json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return followmodel.Transcript{}, fmt.Errorf("the input of a Responses API request: want a string or a list of items: %w", err)
	}
	for _, it := range items {
		switch {
		case it.Type == "function_call":
			var args struct {
				Cmd     string `json:"cmd"`
				Command any    `json:"command"`
			}
			json.Unmarshal([]byte(it.Arguments), &args) // other arguments: a call with no command
			call := &followmodel.Call{ID: it.CallID, Tool: it.Name}
			switch it.Name {
			case "exec_command":
				call.Command = args.Cmd
			case "bash":
				call.Command, _ = args.Command.(string)
			}
			t.Items = append(t.Items, followmodel.Item{Role: followmodel.Assistant, Call: call})
		case it.Type == "function_call_output":
			out := contentText(it.Output)
			t.Items = append(t.Items, followmodel.Item{Role: followmodel.User, Result: &followmodel.Result{
				CallID: it.CallID, Text: out, IsError: followmodel.FailedOutput(out),
			}})
		case (it.Type == "message" || it.Type == "") && (it.Role == "user" || it.Role == "assistant"):
			var s string
			if json.Unmarshal(it.Content, &s) == nil {
				t.Items = append(t.Items, followmodel.Item{Role: followmodel.Role(it.Role), Text: s})
				continue
			}
			var parts []struct{ Type, Text string }
			json.Unmarshal(it.Content, &parts) // content of another shape: no text
			for _, p := range parts {
				if p.Type == "input_text" || p.Type == "output_text" || p.Type == "text" {
					t.Items = append(t.Items, followmodel.Item{Role: followmodel.Role(it.Role), Text: p.Text})
				}
			}
		}
	}
	return t, nil
}

// contentText is a function_call_output's output: a string, or its text
// parts joined by newlines.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	json.Unmarshal(raw, &parts) // another shape: no text
	var texts []string
	for _, p := range parts {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n")
}

// followTurn is the follow model's answer to a request body: a call of
// Codex's exec_command when the request offers it, else of opencode's
// bash (with a description), or a text that ends the turn. A command for a
// request that offers neither tool is said in text.
func followTurn(body []byte, traits followmodel.Traits) (Turn, followmodel.Decision) {
	t, err := Transcript(body)
	if err != nil {
		return Turn{Text: "openaitest: " + err.Error()}, followmodel.Decision{Action: followmodel.Say, Text: err.Error()}
	}
	tools, _ := Request{Body: body}.Tools()
	if cmd, ok := sandboxRefused(body, t); ok && slices.Contains(tools, "exec_command") {
		// What exec_command's description tells Codex's model to do when
		// its sandbox refused a command: run it again, asking to run it
		// outside (codex FACTS X15); the approval policy then decides.
		d := followmodel.Decision{Action: followmodel.Run, Command: cmd, Description: "Run it outside the sandbox"}
		return Turn{Exec: cmd, Escalate: true}, d
	}
	d := followmodel.Decide(t, traits)
	if d.Action != followmodel.Run {
		return Turn{Text: d.Text}, d
	}
	switch {
	case slices.Contains(tools, "exec_command"):
		return Turn{Exec: d.Command}, d
	case slices.Contains(tools, "bash"):
		return Turn{Tool: "bash", Args: map[string]any{"command": d.Command, "description": d.Description}}, d
	}
	return Turn{Text: fmt.Sprintf("The next step is `%s`, but no shell tool is offered here.", d.Command)}, d
}

// sandboxRefusals are what a command refused by Codex's sandbox prints
// (a write outside the workspace's roots, a socket it may not connect).
var sandboxRefusals = []string{"Operation not permitted", "operation not permitted", "Permission denied", "Read-only file system", "cannot lock ref"}

// sandboxRefused is the command of the transcript's last call when it ran
// inside Codex's sandbox (no sandbox_permissions asked in the request
// body's last exec_command call) and its result says the sandbox refused
// it: the command to run again outside.
func sandboxRefused(body []byte, t followmodel.Transcript) (string, bool) {
	n := len(t.Items)
	if n < 2 || t.Items[n-1].Result == nil || t.Items[n-2].Call == nil || t.Items[n-2].Call.Tool != "exec_command" {
		return "", false
	}
	out, call := t.Items[n-1].Result.Text, t.Items[n-2].Call
	refused := false
	for _, r := range sandboxRefusals {
		refused = refused || strings.Contains(out, r)
	}
	if !refused || escalated(body, call.ID) {
		return "", false
	}
	return call.Command, true
}

// escalated says whether the body's exec_command call id asked to run
// outside the sandbox.
func escalated(body []byte, id string) bool {
	var req struct {
		Input []struct {
			Type      string `json:"type"`
			CallID    string `json:"call_id"`
			Arguments string `json:"arguments"`
		} `json:"input"`
	}
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	for _, it := range req.Input {
		if it.Type == "function_call" && it.CallID == id {
			var args struct {
				SandboxPermissions string `json:"sandbox_permissions"`
			}
			json.Unmarshal([]byte(it.Arguments), &args) // no such argument: not escalated
			return args.SandboxPermissions == "require_escalated"
		}
	}
	return false
}

// Transcripts are the model requests s was sent so far (title requests
// left out), as the model saw them.
func (s *Server) Transcripts() ([]followmodel.Transcript, error) {
	var ts []followmodel.Transcript
	for _, r := range s.Requests() {
		if r.Title {
			continue
		}
		tr, err := Transcript(r.Body)
		if err != nil {
			return ts, fmt.Errorf("request %s: %w", r.Path, err)
		}
		ts = append(ts, tr)
	}
	return ts, nil
}
