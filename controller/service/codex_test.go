package service_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/codex/codextest"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/controller"
)

// startCodex is start for a team whose agent is the real Codex CLI (kind
// codex, its default argvs, the bypass policy), served by a fake Responses
// API (the returned server). The user's ~/.codex/config.toml names the
// fake as the model provider, with its key in the manager's environment:
// Legion copies that config into each conversation's Codex home.
func startCodex(t *testing.T, o teamOptions) (*env, *openaitest.Server) {
	t.Helper()
	o.codex = codextest.Binary(t)
	if o.idleGrace == "" {
		o.idleGrace = "2s"
	}
	if o.staleAfter == "" {
		o.staleAfter = "1m"
	}
	srv := openaitest.NewServer(t)
	e := start(t, "", o)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WriteUserConfig(home); err != nil {
		t.Fatal(err)
	}
	if out, err := e.sd.Systemctl(t, "set-environment", openaitest.KeyEnv+"="+openaitest.Key); err != nil {
		t.Fatalf("systemctl --user set-environment: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range srv.Requests() {
				t.Logf("API request %s title %v unscripted %v: turn %+v", r.Time.Format("15:04:05.000"), r.Title, r.Unscripted, r.Turn)
			}
		}
	})
	return e, srv
}

// codexPhase is what a Codex agent does in each phase, as phaseTurns for
// Claude, with shell commands only (Codex's exec_command).
func (e *env) codexPhase(issue string, mode controller.Mode) []openaitest.Turn {
	label := func(l string) string { return e.lcmd("issue", "label", teamName, issue, l) }
	match := phaseMatch(issue, mode)
	var turns []openaitest.Turn
	switch mode {
	case controller.ModePlan:
		turns = []openaitest.Turn{
			{Exec: e.lcmd("issue", "comment", teamName, issue, `"Plan: write `+issue+`.txt and commit it."`)},
			{Exec: label(controller.LabelWorkerDone)},
			{Text: "The plan is posted on " + issue + "."},
		}
	case controller.ModeImplement:
		turns = []openaitest.Turn{
			{Exec: "printf 'impl " + issue + "\\n' > " + issue + ".txt && git add " + issue + ".txt && git commit -q -m 'implement " + issue + "'"},
			{Exec: label(controller.LabelWorkerDone)},
			{Text: issue + " is implemented and committed."},
		}
	case controller.ModeReview:
		turns = []openaitest.Turn{
			{Exec: label(controller.LabelApproved)},
			{Exec: label(controller.LabelWorkerDone)},
			{Text: "Approved."},
		}
	case controller.ModeRetro:
		turns = []openaitest.Turn{
			{Exec: e.lcmd("issue", "comment", teamName, issue, `"Retro: it went well."`)},
			{Exec: label(controller.LabelWorkerDone)},
			{Text: "Retro done."},
		}
	case controller.ModeFinish:
		turns = []openaitest.Turn{
			{Exec: e.lcmd("worktree", "finish", teamName, issue)},
			{Text: issue + " is merged and done."},
		}
	}
	for i := range turns {
		turns[i].Match = match
	}
	return turns
}

// assertCompletedAnyCode checks that session s ended as completed, never
// restarted, whatever its exit code (assertCompleted wants 0). Codex's
// exit is SIGINT's: the worker ends an agent with SIGINT, which Codex
// does not catch (codex FACTS X2).
func assertCompletedAnyCode(t testing.TB, s api.Session) {
	t.Helper()
	if s.Exit == nil || !strings.HasPrefix(s.Exit.Reason, "completed:") {
		t.Errorf("session %s ended %v; want a reason starting with \"completed:\"", s.Name, s.Exit)
	}
	if s.Restarts != 0 {
		t.Errorf("session %s restarted %d times; want 0", s.Name, s.Restarts)
	}
}

// TestMixedKindsTodoToDone (issue 21): a team that plans with Codex
// (agent.kind_by_mode) and implements, reviews, retros and finishes with
// Claude Code completes an issue: each phase's agent is its kind's real
// CLI against its own fake API.
func TestMixedKindsTodoToDone(t *testing.T) {
	codexBin := codextest.Binary(t)
	e := startClaude(t, teamOptions{wipLimit: 1, extra: "agent.kind_by_mode = { plan = \"codex\" }\n"},
		"PATH="+filepath.Dir(codexBin)+":"+os.Getenv("PATH"), openaitest.KeyEnv+"="+openaitest.Key)
	srv := openaitest.NewServer(t)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WriteUserConfig(home); err != nil {
		t.Fatal(err)
	}
	ctx := claudeCtx(t, 5*time.Minute)
	id := e.addIssue(ctx, "Write a file")
	srv.Script(e.codexPhase(id, controller.ModePlan)...)
	e.scriptAll(id, controller.ModePlan)
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)

	assertCompletedAnyCode(t, e.waitCompleted(ctx, id, controller.ModePlan))
	for _, m := range allModes[1:] {
		assertCompletedAnyCode(t, e.waitCompleted(ctx, id, m))
	}
	if left := srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted Codex turns were never asked for: %+v", len(left), left)
	}
	if tr := e.transcript(workerID(id, controller.ModePlan)); !strings.Contains(tr, "codex") {
		t.Errorf("the plan worker did not run Codex; its transcript:\n%s", tail(tr, 10))
	}
	e.assertScripted()
}

// responsesKind is what the kinds' suite's drivers of the CLIs on a fake
// Responses API (Codex, opencode) share.
type responsesKind struct {
	e   *env
	srv *openaitest.Server
}

func (k *responsesKind) requests(issue string, mode controller.Mode) []modelRequest {
	m := phaseMatch(issue, mode)
	var out []modelRequest
	for _, r := range k.srv.Requests() {
		if !r.Title && m(r.Body) {
			out = append(out, modelRequest{time: r.Time, body: r.Body, stalled: r.Turn.Stall})
		}
	}
	return out
}

func (k *responsesKind) assertScripted(issue string, only controller.Mode) {
	t := k.e.t
	t.Helper()
	if left := k.srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted turns were never asked for: %+v", len(left), left)
	}
	for _, r := range k.srv.Requests() {
		if r.Unscripted && (only == "" || phaseMatch(issue, only)(r.Body)) {
			t.Errorf("an unscripted request at %s", r.Time.Format("15:04:05.000"))
		}
	}
}

// codexKind is the kinds' suite's driver of the real Codex CLI
// (startCodex).
type codexKind struct{ responsesKind }

func startCodexKind(t *testing.T, o teamOptions) (*env, kindDriver) {
	e, srv := startCodex(t, o)
	return e, &codexKind{responsesKind{e: e, srv: srv}}
}

// script: a shell step is an exec_command call; one that asks, a call
// to run outside Codex's sandbox.
func (k *codexKind) script(issue string, mode controller.Mode, before ...step) {
	m := phaseMatch(issue, mode)
	var turns []openaitest.Turn
	for _, s := range before {
		turns = append(turns, openaitest.Turn{Text: s.text, Exec: s.shell, Escalate: s.ask, Stall: s.stall, Match: m})
	}
	k.srv.Script(append(turns, k.e.codexPhase(issue, mode)...)...)
}

// completed is assertCompletedAnyCode: the worker ends Codex with
// SIGINT, which Codex does not catch (codex FACTS X2).
func (k *codexKind) completed(t testing.TB, s api.Session) {
	t.Helper()
	assertCompletedAnyCode(t, s)
}

// resumeArgs: `codex resume --last` in the conversation's Codex home,
// where its session file is.
func (k *codexKind) resumeArgs(string) string { return "resume --last" }

// question: Codex offers the model request_user_input, which its
// description keeps to Plan mode (codex FACTS X16); Legion runs Codex in
// its default mode, where a call of it must fail at once rather than
// open a dialog that no hook shows: the model then asks in text and ends
// its turn, and the person's answer is its next prompt.
func (k *codexKind) question(issue string) kindQuestion {
	scriptToolQuestion(k.srv, k.e.codexPhase(issue, controller.ModePlan), "request_user_input", map[string]any{"id": "scope", "header": "Scope"})
	return textKindQuestion(func() { assertToolRefused(k.e.t, k.srv, "request_user_input") })
}

// checkDenied: Codex tells the model the reason as its rejection.
func (k *codexKind) checkDenied(string, step, step) {
	told := false
	for _, r := range k.srv.Requests() {
		told = told || bytes.Contains(r.Body, []byte(`Rejected(\\\"not now\\\")`))
	}
	if !told {
		k.e.t.Errorf("no request tells the model the command was rejected with \"not now\"")
	}
}
