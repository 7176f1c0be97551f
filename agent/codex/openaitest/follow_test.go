package openaitest_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/internal/followmodel"
)

// prompt is a prompt in Legion's instruction format.
const prompt = "# Legion: plan DEMO-1 (team web)\n\n```sh\nlegion issue show web DEMO-1\n```\n\n" +
	"```sh\nlegion issue comment web DEMO-1 \"Plan: <your plan>\"\n```\n"

// codexBody is a request as Codex 0.169.0 sends one (cut down, FACTS X18):
// message items with "type":"message", the developer's permissions text,
// the user's environment context, the prompt, then more items.
func codexBody(t *testing.T, more ...any) string {
	t.Helper()
	input := []any{
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "<permissions instructions>\n```sh\nrm -rf /\n```"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<environment_context>\n  <cwd>/tmp/wt</cwd>\n</environment_context>"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}},
	}
	return marshal(t, map[string]any{
		"model": "fake-model", "instructions": "You are Codex.", "input": append(input, more...), "stream": true, "store": false,
		"tools": []any{
			map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object"}},
			map[string]any{"type": "function", "name": "request_user_input", "parameters": map[string]any{"type": "object"}},
		},
	})
}

// opencodeBody is a request as opencode 1.18 sends one through the AI SDK
// (cut down): messages with a role and no type, the system prompt as a
// system message, then more items.
func opencodeBody(t *testing.T, more ...any) string {
	t.Helper()
	input := []any{
		map[string]any{"role": "system", "content": "You are opencode.\n```sh\nrm -rf /\n```"},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}},
	}
	return marshal(t, map[string]any{
		"model": "gpt-5", "input": append(input, more...), "stream": true,
		"tools": []any{map[string]any{"type": "function", "name": "bash", "parameters": map[string]any{"type": "object"}}},
	})
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// answer posts body and returns the output item of the streamed answer,
// without its ids and status.
func answer(t *testing.T, s *openaitest.Server, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/v1/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+openaitest.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/responses: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var item map[string]any
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string
			Item map[string]any
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		if ev.Type == "response.output_item.done" {
			item = ev.Item
		}
	}
	if item == nil {
		t.Fatal("no response.output_item.done in the stream")
	}
	for _, k := range []string{"id", "call_id", "status"} {
		delete(item, k)
	}
	return item
}

func call(name, args string) map[string]any {
	return map[string]any{"type": "function_call", "name": name, "arguments": args}
}

func text(s string) map[string]any {
	return map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": s, "annotations": []any{}}}}
}

func TestFollow(t *testing.T) {
	s := openaitest.NewServer(t)
	s.Follow(followmodel.Traits{})
	fc := func(name, args, id string) map[string]any {
		return map[string]any{"type": "function_call", "name": name, "arguments": args, "call_id": id}
	}
	out := func(id, output string) map[string]any {
		return map[string]any{"type": "function_call_output", "call_id": id, "output": output}
	}
	comment := `legion issue comment web DEMO-1 \"Plan: Read the issue, write a failing test first, then make it pass\"`
	tests := []struct {
		name string
		body string
		want map[string]any
	}{
		{"codex first step", codexBody(t), call("exec_command", `{"cmd":"legion issue show web DEMO-1"}`)},
		{"codex next step", codexBody(t, fc("exec_command", `{"cmd":"legion issue show web DEMO-1","workdir":"/tmp/wt"}`, "call_1"),
			out("call_1", "Chunk ID: 1a2b\nWall time: 0.0100 seconds\nProcess exited with code 0\nOutput:\nDEMO-1  Plan it\n")),
			call("exec_command", `{"cmd":"`+comment+`"}`)},
		{"codex question in text", codexBody(t, fc("exec_command", `{"cmd":"legion issue show web DEMO-1"}`, "call_1"),
			out("call_1", "Process exited with code 0\nOutput:\nQuestion: Ship it?\n")),
			text("Before I go on I need an answer to this question: Ship it?")},
		{"codex after the answer", codexBody(t, fc("exec_command", `{"cmd":"legion issue show web DEMO-1"}`, "call_1"),
			out("call_1", "Process exited with code 0\nOutput:\nQuestion: Ship it?\n"),
			text("Before I go on I need an answer to this question: Ship it?"),
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "yes"}}}),
			call("exec_command", `{"cmd":"`+comment+`"}`)},
		{"opencode first step", opencodeBody(t), call("bash", `{"command":"legion issue show web DEMO-1","description":"Run legion issue show"}`)},
		{"opencode done", opencodeBody(t, fc("bash", `{"command":"legion issue show web DEMO-1","description":"x"}`, "call_1"), out("call_1", "DEMO-1"),
			fc("bash", `{"command":"legion issue comment web DEMO-1 \"Plan: mine\""}`, "call_2"), out("call_2", "")),
			text("Done: I ran all 2 steps of the instructions.")},
		{"no instructions", strings.ReplaceAll(opencodeBody(t), "```sh", "```"),
			text(followmodel.NoInstructions + ": no message gives me commands to run, so I stop here.")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, answer(t, s, tt.body)); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
	// A failed command is recorded, and the model goes on.
	failed := codexBody(t, fc("exec_command", `{"cmd":"legion issue show web DEMO-1"}`, "call_1"),
		out("call_1", "Chunk ID: 1a2b\nWall time: 0.0100 seconds\nProcess exited with code 1\nOutput:\nlegion: no such issue\n"))
	if diff := cmp.Diff(call("exec_command", `{"cmd":"`+comment+`"}`), answer(t, s, failed)); diff != "" {
		t.Errorf("answer after a failure (-want +got):\n%s", diff)
	}
	reqs := s.Requests()
	want := []followmodel.Failure{{Command: "legion issue show web DEMO-1", Result: "legion: no such issue"}}
	if d := reqs[len(reqs)-1].Followed; d == nil || !cmp.Equal(d.Failed, want) {
		t.Errorf("Followed = %+v; want Failed %v", d, want)
	}
	// A command Codex's sandbox refused is run again outside it, once.
	refused := codexBody(t, fc("exec_command", `{"cmd":"legion issue show web DEMO-1"}`, "call_1"),
		out("call_1", "Process exited with code 1\nOutput:\nlegion: dial unix /run/legion.sock: connect: operation not permitted\n"))
	want2 := call("exec_command", `{"cmd":"legion issue show web DEMO-1","justification":"Run legion issue show web DEMO-1?","sandbox_permissions":"require_escalated"}`)
	if diff := cmp.Diff(want2, answer(t, s, refused)); diff != "" {
		t.Errorf("answer after the sandbox refused a command (-want +got):\n%s", diff)
	}
	again := codexBody(t, fc("exec_command", `{"cmd":"legion issue show web DEMO-1","sandbox_permissions":"require_escalated"}`, "call_1"),
		out("call_1", "Process exited with code 1\nOutput:\noperation not permitted\n"))
	if diff := cmp.Diff(call("exec_command", `{"cmd":"`+comment+`"}`), answer(t, s, again)); diff != "" {
		t.Errorf("answer after an escalated command failed too (-want +got):\n%s", diff)
	}
	// Scripted turns and title requests come first.
	s.Script(openaitest.Turn{Text: "scripted"})
	if diff := cmp.Diff(text("scripted"), answer(t, s, codexBody(t))); diff != "" {
		t.Errorf("a scripted turn (-want +got):\n%s", diff)
	}
	title := marshal(t, map[string]any{"input": []any{map[string]any{"role": "user", "content": "Generate a concise, single-line task title for:\n" + prompt}}})
	if diff := cmp.Diff(text("Legion task"), answer(t, s, title)); diff != "" {
		t.Errorf("a title request (-want +got):\n%s", diff)
	}
}
