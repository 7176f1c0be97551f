package service_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/gemini/geminitest"
	"github.com/legion-dev/legion/controller"
)

// startGemini is start for a team whose agent is the real Gemini CLI (kind
// gemini, its default argvs, the bypass policy unless o.extra says
// otherwise), served by a fake Gemini API (the returned server). The
// user's ~/.gemini/settings.json names the fake's model; the base URL and
// the key are in the manager's environment, as a user would put them.
func startGemini(t *testing.T, o teamOptions) (*env, *geminitest.Server) {
	t.Helper()
	o.gemini = geminitest.Binary(t)
	if o.idleGrace == "" {
		o.idleGrace = "2s"
	}
	if o.staleAfter == "" {
		o.staleAfter = "1m"
	}
	srv := geminitest.NewServer(t)
	e := start(t, "", o)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := geminitest.WriteUserSettings(home); err != nil {
		t.Fatal(err)
	}
	if out, err := e.sd.Systemctl(t, append([]string{"set-environment"}, srv.Env()...)...); err != nil {
		t.Fatalf("systemctl --user set-environment: %v\n%s", err, out)
	}
	t.Cleanup(func() { logGeminiRequests(t, srv) })
	return e, srv
}

// logGeminiRequests logs the fake's requests when t failed.
func logGeminiRequests(t *testing.T, srv *geminitest.Server) {
	if !t.Failed() {
		return
	}
	for _, r := range srv.Requests() {
		t.Logf("API request %s unscripted %v: turn %+v", r.Time.Format("15:04:05.000"), r.Unscripted, r.Turn)
	}
}

// geminiPhase is what a Gemini agent does in each phase: codexPhase's
// commands as calls of the CLI's run_shell_command.
func (e *env) geminiPhase(issue string, mode controller.Mode) []geminitest.Turn {
	var turns []geminitest.Turn
	for _, c := range e.codexPhase(issue, mode) {
		turns = append(turns, geminitest.Turn{Text: c.Text, Shell: c.Exec, Match: c.Match})
	}
	return turns
}

// geminiWait bounds a test of one phase of a Gemini agent: every start of
// the CLI takes seconds of node start-up, up to 20 s on a loaded machine
// (gemini FACTS G19).
const geminiWait = 3 * time.Minute

// assertGeminiScripted checks that every scripted turn was taken and no
// request went unscripted within a phase. An unscripted request right
// after a phase's final answer (a text turn, no tool call) is logged
// with the end of its body, not failed: in two of three clean-clone runs
// the CLI sent one more request 0.2–0.4 s after a phase's final answer
// (the reviewer's once, the finisher's once), while its worker was
// ending it; what it is is not known yet, and its body is logged to find
// out. The issue reached Done each time.
func assertGeminiScripted(t *testing.T, srv *geminitest.Server) {
	t.Helper()
	if left := srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted turns were never asked for: %+v", len(left), left)
	}
	reqs := srv.Requests()
	for i, r := range reqs {
		if !r.Unscripted {
			continue
		}
		body := string(r.Body)
		if len(body) > 600 {
			body = "…" + body[len(body)-600:]
		}
		if i > 0 && !reqs[i-1].Unscripted && reqs[i-1].Turn.Text != "" && reqs[i-1].Turn.Shell == "" && reqs[i-1].Turn.Call == nil {
			t.Logf("an unscripted request at %s, right after a phase's final answer (answered %q): %s", r.Time.Format("15:04:05.000"), r.Turn.Text, body)
			continue
		}
		t.Errorf("an unscripted request at %s, within a phase: %s", r.Time.Format("15:04:05.000"), body)
	}
}

// declaredTools are the names of the functions a Gemini API request body
// offers the model.
func declaredTools(t *testing.T, body []byte) []string {
	t.Helper()
	var req struct {
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("a Gemini API request that is not JSON: %v", err)
	}
	var names []string
	for _, tl := range req.Tools {
		for _, f := range tl.FunctionDeclarations {
			names = append(names, f.Name)
		}
	}
	return names
}

// TestGeminiPlansClaudeImplements (issue 21): a team that plans with the
// Gemini CLI (agent.kind_by_mode) and implements, reviews, retros and
// finishes with Claude Code completes an issue: each phase's agent is its
// kind's real CLI against its own fake API.
func TestGeminiPlansClaudeImplements(t *testing.T) {
	geminiBin := geminitest.Binary(t)
	srv := geminitest.NewServer(t)
	e := startClaude(t, teamOptions{wipLimit: 1, extra: "agent.kind_by_mode = { plan = \"gemini\" }\n"},
		append([]string{"PATH=" + filepath.Dir(geminiBin) + ":" + os.Getenv("PATH")}, srv.Env()...)...)
	t.Cleanup(func() { logGeminiRequests(t, srv) })
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := geminitest.WriteUserSettings(home); err != nil {
		t.Fatal(err)
	}
	ctx := claudeCtx(t, 12*time.Minute)
	id := e.addIssue(ctx, "Write a file")
	srv.Script(e.geminiPhase(id, controller.ModePlan)...)
	e.scriptAll(id, controller.ModePlan)
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)

	for _, m := range allModes {
		assertCompletedAnyCode(t, e.waitCompleted(ctx, id, m))
	}
	assertGeminiScripted(t, srv)
	if tr := e.transcript(workerID(id, controller.ModePlan)); !strings.Contains(tr, "gemini") {
		t.Errorf("the plan worker did not run Gemini; its transcript:\n%s", tail(tr, 10))
	}
	e.assertScripted()
}

// geminiKind is the kinds' suite's driver of the real Gemini CLI
// (startGemini).
type geminiKind struct {
	e   *env
	srv *geminitest.Server
}

func startGeminiKind(t *testing.T, o teamOptions) (*env, kindDriver) {
	e, srv := startGemini(t, o)
	return e, &geminiKind{e: e, srv: srv}
}

// script: a shell step is a run_shell_command call.
func (k *geminiKind) script(issue string, mode controller.Mode, before ...step) {
	m := phaseMatch(issue, mode)
	var turns []geminitest.Turn
	for _, s := range before {
		turns = append(turns, geminitest.Turn{Text: s.text, Shell: s.shell, Stall: s.stall, Match: m})
	}
	k.srv.Script(append(turns, k.e.geminiPhase(issue, mode)...)...)
}

func (k *geminiKind) requests(issue string, mode controller.Mode) []modelRequest {
	m := phaseMatch(issue, mode)
	var out []modelRequest
	for _, r := range k.srv.Requests() {
		if m(r.Body) {
			out = append(out, modelRequest{time: r.Time, body: r.Body, stalled: r.Turn.Stall})
		}
	}
	return out
}

// assertScripted is assertGeminiScripted, over every request whatever
// only says.
func (k *geminiKind) assertScripted(string, controller.Mode) {
	k.e.t.Helper()
	assertGeminiScripted(k.e.t.(*testing.T), k.srv)
}

// completed is assertCompleted: the CLI ends on SIGINT with 0.
func (k *geminiKind) completed(t testing.TB, s api.Session) {
	t.Helper()
	assertCompleted(t, s)
}

// resumeArgs: `gemini --resume <id>`, the session file being there.
func (k *geminiKind) resumeArgs(sid string) string { return "--resume " + sid }

// question: the Gemini CLI's question tool, ask_user, opens a dialog
// that no hook can answer (gemini FACTS G12), even under --approval-mode
// yolo, so Legion's policy file denies it: the CLI does not offer it to
// the model, and a call of it fails at once instead of waiting on a
// dialog nobody sees. The model asks in text and ends its turn.
func (k *geminiKind) question(issue string) kindQuestion {
	plan := k.e.geminiPhase(issue, controller.ModePlan)
	call := geminitest.Turn{Call: &geminitest.Call{Name: "ask_user", Args: map[string]any{"questions": []any{
		map[string]any{"header": "Scope", "question": "Cover the tests too?", "type": "yesno"},
	}}}, Match: plan[0].Match}
	k.srv.Script(append([]geminitest.Turn{call, {Text: textQuestion, Match: plan[0].Match}}, plan...)...)
	return textKindQuestion(func() {
		t := k.e.t.(*testing.T)
		reqs := k.srv.Requests()
		// The call fails at once (gemini FACTS G21): the next request
		// answers it with an error.
		if len(reqs) < 2 || !bytes.Contains(reqs[1].Body, []byte(`"functionResponse":{"name":"ask_user","response":{"error":`)) {
			t.Errorf("the request after the ask_user call does not answer it with an error")
		}
		for i, r := range reqs {
			if tools := declaredTools(t, r.Body); slices.Contains(tools, "ask_user") || !slices.Contains(tools, "run_shell_command") {
				t.Errorf("request %d offers the tools %q; want run_shell_command and not ask_user", i, tools)
			}
		}
	})
}
