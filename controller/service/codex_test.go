package service_test

import (
	"bytes"
	"fmt"
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
	match := func(body []byte) bool {
		want := []byte(fmt.Sprintf("# Legion: %s %s ", mode, issue))
		retro := []byte(fmt.Sprintf("# Legion: %s %s ", controller.ModeRetro, issue))
		return bytes.Contains(body, want) && (mode != controller.ModeImplement || !bytes.Contains(body, retro))
	}
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

// TestCodexTodoToDone (issue 21): an issue goes from Todo to Done through
// all five phases with the real Codex CLI as the team's agent (kind codex,
// bypass policy) against a local Responses API: every phase's commands
// run, each worker ends as completed (by SIGINT, see assertCompletedAnyCode),
// none restarts, and the implementer's file lands on main. The finisher
// runs with --cd <main checkout>: its hooks would fail once its worktree
// is gone (codex FACTS X21).
func TestCodexTodoToDone(t *testing.T) {
	e, srv := startCodex(t, teamOptions{wipLimit: 1})
	ctx := claudeCtx(t, 5*time.Minute)
	id := e.addIssue(ctx, "Write a file")
	for _, m := range allModes {
		srv.Script(e.codexPhase(id, m)...)
	}
	start := time.Now()
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)
	t.Logf("Todo to Done in %s", time.Since(start).Round(time.Millisecond))
	for _, m := range allModes {
		assertCompletedAnyCode(t, e.waitCompleted(ctx, id, m))
	}
	if left := srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted turns were never asked for: %+v", len(left), left)
	}
	for _, r := range srv.Requests() {
		if r.Unscripted {
			t.Errorf("an unscripted request at %s", r.Time.Format("15:04:05.000"))
		}
	}
}

// TestCodexStallResumed (issue 21): the plan phase's first stream hangs
// (the fake sends one piece of text, then nothing); the worker's watchdog
// sees no hook for stale_after and systemd restarts the worker, which
// resumes the conversation (`codex resume --last` in its Codex home: the
// session file exists), whose next request goes on with the same
// conversation; the issue still reaches Done.
func TestCodexStallResumed(t *testing.T) {
	e, srv := startCodex(t, teamOptions{wipLimit: 1, staleAfter: "5s"})
	ctx := claudeCtx(t, 5*time.Minute)
	id := e.addIssue(ctx, "Write a file")
	plan := e.codexPhase(id, controller.ModePlan)
	stall := plan[0]
	stall.Exec, stall.Text, stall.Stall = "", "Thinking about the plan", true
	srv.Script(append([]openaitest.Turn{stall}, plan...)...)
	for _, m := range allModes[1:] {
		srv.Script(e.codexPhase(id, m)...)
	}
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)

	s := e.waitCompleted(ctx, id, controller.ModePlan)
	if s.Restarts == 0 {
		t.Errorf("the plan worker never restarted; want a restart for the hung stream")
	}
	if tr := e.transcript(workerID(id, controller.ModePlan)); !strings.Contains(tr, "start (resume)") {
		t.Errorf("the plan worker's restart did not resume the conversation; its transcript:\n%s", tail(tr, 20))
	}
	// The request after the stall is the same conversation: it carries
	// the phase's prompt once, as history, and the resumed prompt.
	var after []openaitest.Request
	for _, r := range srv.Requests() {
		if !r.Title && bytes.Contains(r.Body, []byte("# Legion: plan "+id+" ")) {
			after = append(after, r)
		}
	}
	if len(after) < 2 || !after[0].Turn.Stall {
		t.Fatalf("plan requests: %d, the first stalled %v; want the stalled one, then more", len(after), len(after) > 0 && after[0].Turn.Stall)
	}
	if n := bytes.Count(after[1].Body, []byte("# Legion: plan "+id+" ")); n < 2 {
		t.Errorf("the first request after the restart names the plan prompt %d times; want it as history and as the resumed prompt", n)
	}
	for _, m := range allModes[1:] {
		assertCompletedAnyCode(t, e.waitCompleted(ctx, id, m))
	}
}

// TestCodexPermissionApprovedAndDenied (issue 21): under the allowlist
// policy Codex runs with its own default approvals; two commands it must
// run outside its sandbox are escalated, each with the tool and the exact
// command (Codex's PermissionRequest hook, held by the worker). The first,
// approved, runs; the second, denied with "deny: not now", does not, and
// the model is told why; the phase then completes.
func TestCodexPermissionApprovedAndDenied(t *testing.T) {
	e, srv := startCodex(t, teamOptions{wipLimit: 1, extra: "agent.permissions_by_mode = { plan = \"allowlist\" }\n"})
	ctx := claudeCtx(t, 3*time.Minute)
	id := e.addIssue(ctx, "Touch two files")
	plan := e.codexPhase(id, controller.ModePlan)
	ok, no := plan[0], plan[0]
	ok.Exec, ok.Escalate = "touch approved.txt", true
	no.Exec, no.Escalate = "touch denied.txt", true
	srv.Script(append([]openaitest.Turn{ok, no}, plan...)...)
	e.startController()
	wt := e.team.Worktrees.Path(id)

	e.waitEscalated(ctx, id, 0, "Bash", "touch approved.txt")
	if s, found := e.session(ctx, id, controller.ModePlan); !found || s.Agent == nil || s.Agent.State != api.AgentWaitingPermission || s.Agent.Command != "touch approved.txt" {
		t.Errorf("the planner while its permission is escalated: %+v; want its agent waiting_permission for touch approved.txt", s.Agent)
	}
	e.answer(ctx, id, "approve")
	e.poll(ctx, "approved.txt made", func() (bool, string) {
		_, err := os.Stat(filepath.Join(wt, "approved.txt"))
		return err == nil, fmt.Sprint(err)
	})
	e.waitEscalated(ctx, id, 1, "Bash", "touch denied.txt")
	e.answer(ctx, id, "deny: not now")
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	e.stopController()
	assertCompletedAnyCode(t, s)
	e.assertAnswered(ctx, id)
	if _, err := os.Stat(filepath.Join(wt, "denied.txt")); err == nil {
		t.Errorf("the denied command ran: %s exists", filepath.Join(wt, "denied.txt"))
	}
	told := false
	for _, r := range srv.Requests() {
		told = told || bytes.Contains(r.Body, []byte(`Rejected(\\\"not now\\\")`))
	}
	if !told {
		t.Errorf("no request tells the model the command was rejected with \"not now\"")
	}
	if left := srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted turns were never asked for: %+v", len(left), left)
	}
}

// TestCodexQuestionAsText: Codex offers the model request_user_input,
// which its description keeps to Plan mode (codex FACTS X16); Legion runs
// Codex in its default mode, where a call of it must fail at once rather
// than open a dialog that no hook shows: the model then asks in text and
// ends its turn, the controller escalates what it said, and the person's
// answer is its next prompt; the phase completes without a restart.
func TestCodexQuestionAsText(t *testing.T) {
	e, srv := startCodex(t, teamOptions{wipLimit: 1})
	ctx := claudeCtx(t, 6*time.Minute)
	id := e.addIssue(ctx, "Ask first")
	plan := e.codexPhase(id, controller.ModePlan)
	scriptToolQuestion(srv, plan, "request_user_input", map[string]any{"id": "scope", "header": "Scope"})
	e.startController()
	e.answerTextQuestion(ctx, id, e.waitCompleted)
	assertToolRefused(t, srv, "request_user_input")
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
