package anthropictest_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/internal/followmodel"
)

// followPrompt is a prompt in Legion's instruction format.
const followPrompt = "# Legion: plan DEMO-1 (team web)\n\n1. Read the issue:\n\n```sh\nlegion issue show web DEMO-1\n```\n\n" +
	"2. Write your plan:\n\n```sh\nlegion issue comment web DEMO-1 \"Plan: <your plan>\"\n```\n\n" +
	"To ask a person, use the AskUserQuestion tool.\n"

// claudeRequest is a messages request as Claude Code 2.1.330 sends one
// (cut down): a system prompt, the first user message with a
// system-reminder block before the prompt, then messages.
func claudeRequest(t *testing.T, messages ...any) string {
	t.Helper()
	first := map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "<system-reminder>\nAs you answer the user's questions, you can use the following context: none\n</system-reminder>\n"},
		map[string]any{"type": "text", "text": followPrompt, "cache_control": map[string]any{"type": "ephemeral"}},
	}}
	b, err := json.Marshal(map[string]any{
		"model": "claude-opus-5-5", "max_tokens": 32000, "stream": true,
		"system":   []any{map[string]any{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.\n```sh\nrm -rf /\n```"}},
		"messages": append([]any{first}, messages...),
		"tools": []any{
			map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}},
			map[string]any{"name": "AskUserQuestion", "input_schema": map[string]any{"type": "object"}},
		},
		"metadata": map[string]any{"user_id": "u1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assembled is a streamed message put together from its events.
type assembled struct {
	Blocks []map[string]any // text blocks {type, text}; tool_use {type, name, input}
	Stop   string
}

func assemble(t *testing.T, evs []sse) assembled {
	t.Helper()
	var m assembled
	var partial []string
	for _, e := range evs {
		switch e.Name {
		case "content_block_start":
			b := e.Data["content_block"].(map[string]any)
			delete(b, "id")
			m.Blocks = append(m.Blocks, b)
			partial = append(partial, "")
		case "content_block_delta":
			d, i := e.Data["delta"].(map[string]any), int(e.Data["index"].(float64))
			switch d["type"] {
			case "text_delta":
				m.Blocks[i]["text"] = m.Blocks[i]["text"].(string) + d["text"].(string)
			case "input_json_delta":
				partial[i] += d["partial_json"].(string)
			}
		case "message_delta":
			m.Stop = e.Data["delta"].(map[string]any)["stop_reason"].(string)
		}
	}
	for i, b := range m.Blocks {
		if b["type"] == "tool_use" {
			var in any
			if err := json.Unmarshal([]byte(partial[i]), &in); err != nil {
				t.Fatalf("tool_use input %q: %v", partial[i], err)
			}
			b["input"] = in
		}
	}
	return m
}

func TestFollowAnswersWhatTheRequestSays(t *testing.T) {
	s := anthropictest.NewServer(t)
	s.Follow(followmodel.Traits{})
	s.Script("s1", anthropictest.Turn{
		Match:  func(r *anthropictest.Request) bool { return strings.Contains(r.LastUserText(), "scripted") },
		Blocks: []anthropictest.Block{anthropictest.Text("a scripted turn")},
	})
	showCall := map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "legion issue show web DEMO-1", "description": "Show the issue"}},
	}}
	result := func(text string, isError bool) map[string]any {
		return map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": text, "is_error": isError},
		}}
	}
	question := "Which database? (postgres|sqlite)"
	askCall := map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "tool_use", "id": "toolu_2", "name": "AskUserQuestion", "input": map[string]any{"questions": []any{map[string]any{"question": question}}}},
	}}
	answer := map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "content": `The user answered: "` + question + `"="sqlite".`},
	}}
	bash := func(command, description string) assembled {
		return assembled{Stop: "tool_use", Blocks: []map[string]any{{"type": "tool_use", "name": "Bash", "input": map[string]any{"command": command, "description": description}}}}
	}
	comment := bash(`legion issue comment web DEMO-1 "Plan: Read the issue, write a failing test first, then make it pass"`, "Run legion issue comment")

	tests := []struct {
		name string
		body string
		want assembled
	}{
		{"first step", claudeRequest(t), bash("legion issue show web DEMO-1", "Run legion issue show")},
		{"next step", claudeRequest(t, showCall, result("DEMO-1  Plan it\nstatus: Todo", false)), comment},
		{"an error does not stop it", claudeRequest(t, showCall, result("Exit code 1\nno such issue", true)), comment},
		{"a question", claudeRequest(t, showCall, result("DEMO-1  Plan it\n\nQuestion: "+question, false)), assembled{
			Stop: "tool_use", Blocks: []map[string]any{{"type": "tool_use", "name": "AskUserQuestion", "input": map[string]any{"questions": []any{map[string]any{
				"question": question, "header": "Question", "multiSelect": false, "options": []any{
					map[string]any{"label": "postgres", "description": "Answer postgres"},
					map[string]any{"label": "sqlite", "description": "Answer sqlite"},
				},
			}}}}},
		}},
		{"the answer", claudeRequest(t, showCall, result("Question: "+question, false), askCall, answer), comment},
		{"done", claudeRequest(t, showCall, result("", false), map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "tool_use", "id": "toolu_3", "name": "Bash", "input": map[string]any{"command": comment.Blocks[0]["input"].(map[string]any)["command"]}},
		}}, map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_3", "content": ""}}}), assembled{
			Stop: "end_turn", Blocks: []map[string]any{{"type": "text", "text": "Done: I ran all 2 steps of the instructions."}},
		}},
		{"no instructions", strings.Replace(claudeRequest(t), "```sh", "```", -1), assembled{
			Stop: "end_turn", Blocks: []map[string]any{{"type": "text", "text": followmodel.NoInstructions + ": no message gives me commands to run, so I stop here."}},
		}},
		{"a scripted turn first", claudeRequest(t, showCall, result("", false), map[string]any{"role": "user", "content": "scripted"}), assembled{
			Stop: "end_turn", Blocks: []map[string]any{{"type": "text", "text": "a scripted turn"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := assemble(t, readAll(t, bufio.NewReader(post(t, t.Context(), s, "s1", tt.body).Body)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
	reqs := s.MessageRequests("s1")
	if len(reqs) != len(tests) {
		t.Fatalf("%d requests recorded; want %d", len(reqs), len(tests))
	}
	if d := reqs[2].Followed; d == nil || len(d.Failed) != 1 || d.Failed[0].Command != "legion issue show web DEMO-1" {
		t.Errorf("request 2's Followed = %+v; want the failed show recorded", d)
	}
	if last := reqs[len(reqs)-1]; last.Followed != nil || last.Unscripted {
		t.Errorf("the scripted request: Followed %+v, Unscripted %v; want a scripted answer", last.Followed, last.Unscripted)
	}
}

func TestFollowAsksInText(t *testing.T) {
	s := anthropictest.NewServer(t)
	s.Follow(followmodel.Traits{AsksInText: true})
	body := claudeRequest(t, map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "legion issue show web DEMO-1"}},
	}}, map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Question: Ship it?"}}})
	got := assemble(t, readAll(t, bufio.NewReader(post(t, t.Context(), s, "s1", body).Body)))
	want := assembled{Stop: "end_turn", Blocks: []map[string]any{{"type": "text", "text": "Before I go on I need an answer to this question: Ship it?"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
}

// A scripted Follow turn with a Stall holds the follow model's own
// message mid-stream; released, the rest of that message follows, and the
// decision is recorded as for any followed request.
func TestFollowTurnStalls(t *testing.T) {
	s := anthropictest.NewServer(t)
	s.Follow(followmodel.Traits{})
	stall := anthropictest.NewStall(3)
	s.Script(anthropictest.AnySession, anthropictest.Turn{Follow: true, Stall: stall})
	resp := post(t, t.Context(), s, "s1", claudeRequest(t))
	br := bufio.NewReader(resp.Body)
	var evs []sse
	for range 3 {
		e, err := readEvent(br)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	closed(t, stall.Stalled(), "the followed stream to stall after 3 events")
	stall.Release()
	evs = append(evs, readAll(t, br)...)
	want := assembled{Stop: "tool_use", Blocks: []map[string]any{{"type": "tool_use", "name": "Bash", "input": map[string]any{"command": "legion issue show web DEMO-1", "description": "Run legion issue show"}}}}
	if diff := cmp.Diff(want, assemble(t, evs)); diff != "" {
		t.Errorf("the stalled message (-want +got):\n%s", diff)
	}
	reqs := s.MessageRequests("s1")
	if len(reqs) != 1 || reqs[0].Followed == nil || reqs[0].Unscripted {
		t.Fatalf("requests %+v; want one, answered by the follow model", reqs)
	}
	// The turn is used up: the next request is followed as usual.
	if got := assemble(t, readAll(t, bufio.NewReader(post(t, t.Context(), s, "s1", claudeRequest(t)).Body))); len(got.Blocks) != 1 || got.Blocks[0]["name"] != "Bash" {
		t.Errorf("the next request got %+v; want the follow model's Bash call", got)
	}
}

// A scripted Follow turn with a Failure answers with the failure (an
// overloaded API mid-conversation), the model not asked.
func TestFollowTurnFails(t *testing.T) {
	s := anthropictest.NewServer(t)
	s.Follow(followmodel.Traits{})
	s.Script(anthropictest.AnySession, anthropictest.Turn{Follow: true, Failure: anthropictest.Overloaded()})
	resp := post(t, t.Context(), s, "s1", claudeRequest(t))
	resp.Body.Close()
	if resp.StatusCode != 529 {
		t.Errorf("status %d; want 529", resp.StatusCode)
	}
	if r := s.MessageRequests("s1"); len(r) != 1 || r[0].Followed != nil {
		t.Errorf("requests %+v; want one, not followed", r)
	}
	// Cleared, a queued fault answers nothing.
	s.Script(anthropictest.AnySession, anthropictest.Turn{Follow: true, Failure: anthropictest.Overloaded()})
	s.Clear(anthropictest.AnySession)
	if n := s.Pending(anthropictest.AnySession); n != 0 {
		t.Errorf("Pending after Clear = %d; want 0", n)
	}
	resp = post(t, t.Context(), s, "s1", claudeRequest(t))
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status after Clear %d; want 200", resp.StatusCode)
	}
}
