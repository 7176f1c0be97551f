package anthropictest

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/legion-dev/legion/internal/followmodel"
)

// Follow turns on the follow mode: a request that no scripted turn
// answers is answered by followmodel.Decide over what the request holds
// (its messages; the system prompt is not read), as a model with traits
// would answer it. Scripted turns still come first.
func (s *Server) Follow(traits followmodel.Traits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.follow = &traits
}

// Transcript is the conversation of r as the follow model sees it: every
// text block, Bash and AskUserQuestion call (other tools' calls with no
// command) and tool_result of its messages, in order; the question tool
// when r offers AskUserQuestion.
func (r *Request) Transcript() followmodel.Transcript {
	var t followmodel.Transcript
	if slices.Contains(r.ToolNames(), "AskUserQuestion") {
		t.AskTool = "AskUserQuestion"
	}
	for _, m := range r.Messages {
		role := followmodel.Role(m.Role)
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			t.Items = append(t.Items, followmodel.Item{Role: role, Text: s})
			continue
		}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				t.Items = append(t.Items, followmodel.Item{Role: role, Text: b.Text})
			case "tool_use":
				var in struct {
					Command   string `json:"command"`
					Questions []struct {
						Question string `json:"question"`
					} `json:"questions"`
				}
				json.Unmarshal(b.Input, &in) // a tool with other input is a call with no command
				call := &followmodel.Call{ID: b.ID, Tool: b.Name}
				switch {
				case b.Name == "Bash":
					call.Command = in.Command
				case b.Name == "AskUserQuestion" && len(in.Questions) > 0:
					call.Question = in.Questions[0].Question
				}
				t.Items = append(t.Items, followmodel.Item{Role: role, Call: call})
			case "tool_result":
				t.Items = append(t.Items, followmodel.Item{Role: role, Result: &followmodel.Result{
					CallID: b.ToolUseID, Text: contentText(b.Content), IsError: b.IsError,
				}})
			}
		}
	}
	return t
}

// followTurn is the follow model's answer to r: a Bash call with a
// description, an AskUserQuestion call, or a text that ends the turn. A
// command for a request that offers no Bash tool (a side request of the
// CLI's own) is said in text instead.
func followTurn(r *Request, traits followmodel.Traits) (Turn, followmodel.Decision) {
	d := followmodel.Decide(r.Transcript(), traits)
	switch d.Action {
	case followmodel.Run:
		if !slices.Contains(r.ToolNames(), "Bash") {
			return Turn{Blocks: []Block{Text(fmt.Sprintf("The next step is `%s`, but no Bash tool is offered here.", d.Command))}}, d
		}
		return Turn{Blocks: []Block{Bash(d.Command, d.Description)}}, d
	case followmodel.Ask:
		q := Question{Question: d.Question, Header: "Question"}
		for _, o := range d.Options {
			q.Options = append(q.Options, Option{Label: o, Description: "Answer " + o})
		}
		return Turn{Blocks: []Block{AskUserQuestion(q)}}, d
	}
	return Turn{Blocks: []Block{Text(d.Text)}}, d
}
