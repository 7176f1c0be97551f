package geminitest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/legion-dev/legion/internal/followmodel"
)

// Follow turns on the follow mode: a request that no scripted turn
// answers is answered by followmodel.Decide over the request's contents,
// as a model with traits would answer it. Scripted turns still come first.
func (s *Server) Follow(traits followmodel.Traits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.follow = &traits
}

// Transcript is the conversation of a GenerateContent request body as the
// follow model sees it: the text parts of its user and model contents (the
// systemInstruction, the CLI's own prompt, is left out), functionCall
// parts (run_shell_command by its command) and functionResponse parts
// (its output without the CLI's wrapper, see shellOutput; an error when
// the response has an "error", or its output says a non-zero exit code),
// in order. A functionResponse is paired with its
// call by id, else with the oldest unanswered call of the same name. The
// request offers no question tool the model may use (Legion denies
// ask_user, FACTS G21).
func Transcript(body []byte) (followmodel.Transcript, error) {
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				Thought      bool    `json:"thought"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					ID       string         `json:"id"`
					Name     string         `json:"name"`
					Response map[string]any `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return followmodel.Transcript{}, fmt.Errorf("a GenerateContent request that is not JSON with contents: %w", err)
	}
	var t followmodel.Transcript
	var open []*followmodel.Call // calls without a response yet
	n := 0
	for _, c := range req.Contents {
		role := followmodel.User
		if c.Role == "model" {
			role = followmodel.Assistant
		}
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				n++
				call := &followmodel.Call{ID: p.FunctionCall.ID, Tool: p.FunctionCall.Name}
				if call.ID == "" {
					call.ID = "geminitest-call-" + strconv.Itoa(n)
				}
				if call.Tool == "run_shell_command" {
					var args struct {
						Command string `json:"command"`
					}
					json.Unmarshal(p.FunctionCall.Args, &args) // other args: a call with no command
					call.Command = args.Command
				}
				open = append(open, call)
				t.Items = append(t.Items, followmodel.Item{Role: followmodel.Assistant, Call: call})
			case p.FunctionResponse != nil:
				fr := p.FunctionResponse
				i := slices.IndexFunc(open, func(c *followmodel.Call) bool {
					return fr.ID != "" && c.ID == fr.ID || fr.ID == "" && c.Tool == fr.Name
				})
				res := &followmodel.Result{}
				if i >= 0 {
					res.CallID = open[i].ID
					open = slices.Delete(open, i, i+1)
				}
				out, _ := fr.Response["output"].(string)
				out = shellOutput(out)
				if e, ok := fr.Response["error"]; ok && e != nil && e != "" {
					res.IsError = true
					if s, ok := e.(string); ok {
						out += s
					}
				}
				res.Text = out
				res.IsError = res.IsError || followmodel.FailedOutput(out)
				t.Items = append(t.Items, followmodel.Item{Role: followmodel.User, Result: res})
			case p.Text != nil && !p.Thought:
				t.Items = append(t.Items, followmodel.Item{Role: role, Text: *p.Text})
			}
		}
	}
	return t, nil
}

// shellOutput is run_shell_command's output as the model reads it: the
// CLI's <untrusted_context> wrapper, its last line "Process Group PGID: N"
// and the "Output: " before the command's first line taken off (FACTS
// G23), so that a line the command printed starts its line.
func shellOutput(out string) string {
	if in, ok := strings.CutPrefix(out, "<untrusted_context>\n"); ok {
		if in, ok := strings.CutSuffix(in, "\n</untrusted_context>"); ok {
			out = in
		}
	}
	if i := strings.LastIndex(out, "\nProcess Group PGID: "); i >= 0 && !strings.Contains(out[i+1:], "\n") {
		out = out[:i]
	}
	if rest, ok := strings.CutPrefix(out, "Output: "); ok {
		return rest
	}
	return strings.Replace(out, "\nOutput: ", "\n", 1)
}

// followTurn is the follow model's answer to a request body: a call of
// run_shell_command (with a description) when the request declares it, or
// a text that ends the turn.
func followTurn(body []byte, traits followmodel.Traits) (Turn, followmodel.Decision) {
	t, err := Transcript(body)
	if err != nil {
		return Turn{Text: "geminitest: " + err.Error()}, followmodel.Decision{Action: followmodel.Say, Text: err.Error()}
	}
	d := followmodel.Decide(t, traits)
	if d.Action != followmodel.Run {
		return Turn{Text: d.Text}, d
	}
	var req struct {
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	json.Unmarshal(body, &req) // it parsed as contents above
	for _, tl := range req.Tools {
		for _, f := range tl.FunctionDeclarations {
			if f.Name == "run_shell_command" {
				return Turn{Call: &Call{Name: f.Name, Args: map[string]any{"command": d.Command, "description": d.Description}}}, d
			}
		}
	}
	return Turn{Text: fmt.Sprintf("The next step is `%s`, but no run_shell_command tool is offered here.", d.Command)}, d
}

// Transcripts are the requests s was sent so far, as the model saw them.
func (s *Server) Transcripts() ([]followmodel.Transcript, error) {
	var ts []followmodel.Transcript
	for _, r := range s.Requests() {
		tr, err := Transcript(r.Body)
		if err != nil {
			return ts, fmt.Errorf("request %s: %w", r.Path, err)
		}
		ts = append(ts, tr)
	}
	return ts, nil
}
