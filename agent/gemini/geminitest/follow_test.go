package geminitest_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent/gemini/geminitest"
	"github.com/legion-dev/legion/internal/followmodel"
)

// prompt is a prompt in Legion's instruction format.
const prompt = "# Legion: plan DEMO-1 (team web)\n\n```sh\nlegion issue show web DEMO-1\n```\n\n" +
	"```sh\nlegion issue comment web DEMO-1 \"Plan: <your plan>\"\n```\n"

// geminiBody is a request as Gemini CLI 0.61.0 sends one (cut down): the
// system instruction, the CLI's context message and the prompt as user
// contents, then more contents.
func geminiBody(t *testing.T, more ...any) string {
	t.Helper()
	contents := []any{
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": "This is the Gemini CLI. We are setting up the context for our chat.\nToday's date is Sunday."}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}},
	}
	b, err := json.Marshal(map[string]any{
		"contents":          append(contents, more...),
		"systemInstruction": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "You are an interactive CLI agent.\n```sh\nrm -rf /\n```"}}},
		"tools": []any{map[string]any{"functionDeclarations": []any{
			map[string]any{"name": "run_shell_command", "parametersJsonSchema": map[string]any{"type": "object"}},
			map[string]any{"name": "read_file", "parametersJsonSchema": map[string]any{"type": "object"}},
		}}},
		"generationConfig": map[string]any{"temperature": 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// answer posts body and returns the parts of the streamed answer, texts
// joined.
func answer(t *testing.T, s *geminitest.Server, body string) []map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/v1beta/models/"+geminitest.Model+":streamGenerateContent?alt=sse", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", geminitest.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var parts []map[string]any
	text := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(strings.TrimSuffix(sc.Text(), "\r"), "data: ")
		if !ok {
			continue
		}
		var chunk struct {
			Candidates []struct {
				Content struct{ Parts []map[string]any }
			}
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		for _, p := range chunk.Candidates[0].Content.Parts {
			if s, ok := p["text"].(string); ok {
				text += s
				continue
			}
			parts = append(parts, p)
		}
	}
	if text != "" {
		parts = append(parts, map[string]any{"text": text})
	}
	return parts
}

func shell(command, description string) []map[string]any {
	return []map[string]any{{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{"command": command, "description": description}}}}
}

func TestFollow(t *testing.T) {
	s := geminitest.NewServer(t)
	s.Follow(followmodel.Traits{})
	call := func(command string) map[string]any {
		return map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{"command": command}}}}}
	}
	response := func(output map[string]any) map[string]any {
		return map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "run_shell_command", "response": output}}}}
	}
	comment := `legion issue comment web DEMO-1 "Plan: Read the issue, write a failing test first, then make it pass"`
	tests := []struct {
		name string
		body string
		want []map[string]any
	}{
		{"first step", geminiBody(t), shell("legion issue show web DEMO-1", "Run legion issue show")},
		{"next step", geminiBody(t, call("legion issue show web DEMO-1"), response(map[string]any{"output": "DEMO-1  Plan it"})),
			shell(comment, "Run legion issue comment")},
		{"question in text", geminiBody(t, call("legion issue show web DEMO-1"), response(map[string]any{"output": "<untrusted_context>\nOutput: Question: Ship it?\nProcess Group PGID: 4445\n</untrusted_context>"})),
			[]map[string]any{{"text": "Before I go on I need an answer to this question: Ship it?"}}},
		{"done", geminiBody(t, call("legion issue show web DEMO-1"), response(map[string]any{"output": ""}),
			call(`legion issue comment web DEMO-1 "Plan: x"`), response(map[string]any{"output": ""})),
			[]map[string]any{{"text": "Done: I ran all 2 steps of the instructions."}}},
		{"no instructions", strings.ReplaceAll(geminiBody(t), "```sh", "```"),
			[]map[string]any{{"text": followmodel.NoInstructions + ": no message gives me commands to run, so I stop here."}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, answer(t, s, tt.body)); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
	for _, tt := range []struct {
		name   string
		output map[string]any
		want   string
	}{
		{"exit code", map[string]any{"output": "<untrusted_context>\nOutput: fatal: Needed a single revision\nExit Code: 128\nProcess Group PGID: 3365\n</untrusted_context>"}, "Exit Code: 128"},
		{"tool error", map[string]any{"error": "Tool execution denied by policy."}, "Tool execution denied by policy."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := geminiBody(t, call("legion issue show web DEMO-1"), response(tt.output))
			if diff := cmp.Diff(shell(comment, "Run legion issue comment"), answer(t, s, body)); diff != "" {
				t.Errorf("answer after a failure (-want +got):\n%s", diff)
			}
			reqs := s.Requests()
			want := []followmodel.Failure{{Command: "legion issue show web DEMO-1", Result: tt.want}}
			if d := reqs[len(reqs)-1].Followed; d == nil || !cmp.Equal(d.Failed, want) {
				t.Errorf("Followed = %+v; want Failed %v", d, want)
			}
		})
	}
	s.Script(geminitest.Turn{Text: "scripted"})
	if diff := cmp.Diff([]map[string]any{{"text": "scripted"}}, answer(t, s, geminiBody(t))); diff != "" {
		t.Errorf("a scripted turn (-want +got):\n%s", diff)
	}
}
