package service_test

import (
	"bytes"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/codex/openaitest"
)

// The question scenario of the kinds that ask in text (TestKinds/codex,
// gemini and opencode /QuestionAnswered): the fake model first calls the
// kind's question tool, which must fail at once, then asks textQuestion
// in text and ends its turn; the person answers textAnswer.
const (
	textQuestion = "Should the plan cover the tests too?"
	textAnswer   = "Yes, cover the tests too."
)

// questionOptions are the choices of the scripted question tool calls.
var questionOptions = []any{
	map[string]any{"label": "Yes", "description": "plan them"},
	map[string]any{"label": "No", "description": "leave them"},
}

// textKindQuestion is the kindQuestion of a kind that asks in text: the
// turn that ended with textQuestion is escalated with it while the agent
// is idle, and the person's answer is its next prompt; check is the
// kind's own checks.
func textKindQuestion(check func()) kindQuestion {
	return kindQuestion{
		escalated: []string{textQuestion},
		state:     api.AgentIdle,
		answer:    textAnswer,
		logged:    []string{"respond: prompt", "by=ana"},
		check:     check,
	}
}

// scriptToolQuestion scripts, on a fake Responses API, the plan phase
// plan after two turns that take its requests: a call of the kind's
// question tool with one question (q: the tool's own fields, with the
// question and questionOptions added), then textQuestion as text.
func scriptToolQuestion(srv *openaitest.Server, plan []openaitest.Turn, tool string, q map[string]any) {
	q["question"], q["options"] = "Cover the tests too?", questionOptions
	call := openaitest.Turn{Tool: tool, Args: map[string]any{"questions": []any{q}}, Match: plan[0].Match}
	srv.Script(append([]openaitest.Turn{call, {Text: textQuestion, Match: plan[0].Match}}, plan...)...)
}

// assertToolRefused checks the requests to a fake Responses API after the
// model called tool: the first function_call_output says the tool is
// unavailable (the CLI refused the call at once).
func assertToolRefused(t testing.TB, srv *openaitest.Server, tool string) {
	t.Helper()
	var out []byte
	for _, r := range srv.Requests() {
		if i := bytes.Index(r.Body, []byte(`"function_call_output"`)); i >= 0 && out == nil {
			out = r.Body[i:min(len(r.Body), i+300)]
		}
	}
	if !bytes.Contains(out, []byte(tool)) || !bytes.Contains(out, []byte("unavailable")) {
		t.Errorf("the answer to the %s call is %q; want it refused as unavailable", tool, out)
	}
}
