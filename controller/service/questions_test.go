package service_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/controller"
)

// The question tests of the kinds (TestCodexQuestionAsText,
// TestGeminiQuestionAsText, TestOpencodeQuestionAsText): the fake model
// first calls the kind's question tool, which must fail at once, then
// asks textQuestion in text and ends its turn; the person answers
// textAnswer.
const (
	textQuestion = "Should the plan cover the tests too?"
	textAnswer   = "Yes, cover the tests too."
)

// questionOptions are the choices of the scripted question tool calls.
var questionOptions = []any{
	map[string]any{"label": "Yes", "description": "plan them"},
	map[string]any{"label": "No", "description": "leave them"},
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

// answerTextQuestion is what the question tests share once the controller
// runs: the turn that ended with textQuestion is escalated with it, the
// person answers textAnswer in the tracker, and the plan phase (waited for
// with wait) then completes without a restart, the issue answered.
func (e *env) answerTextQuestion(ctx context.Context, id string, wait func(context.Context, string, controller.Mode) api.Session) {
	e.t.Helper()
	e.waitEscalated(ctx, id, 0, textQuestion)
	e.answer(ctx, id, textAnswer)
	s := wait(ctx, id, controller.ModePlan)
	e.stopController()
	assertCompletedAnyCode(e.t, s)
	e.assertAnswered(ctx, id)
}

// assertToolRefused checks the requests to a fake Responses API after the
// model called tool: the first function_call_output says the tool is
// unavailable (the CLI refused the call at once), a later request carries
// textAnswer, and every scripted turn was taken.
func assertToolRefused(t *testing.T, srv *openaitest.Server, tool string) {
	t.Helper()
	var out []byte
	told := false
	for _, r := range srv.Requests() {
		if i := bytes.Index(r.Body, []byte(`"function_call_output"`)); i >= 0 && out == nil {
			out = r.Body[i:min(len(r.Body), i+300)]
		}
		told = told || bytes.Contains(r.Body, []byte(textAnswer))
	}
	if !bytes.Contains(out, []byte(tool)) || !bytes.Contains(out, []byte("unavailable")) {
		t.Errorf("the answer to the %s call is %q; want it refused as unavailable", tool, out)
	}
	if !told {
		t.Errorf("no request carries the answer %q", textAnswer)
	}
	if left := srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted turns were never asked for: %+v", len(left), left)
	}
}
