package service_test

// The conformance suite of the agent kinds: every e2e scenario that each
// kind must pass is written once here and run for every kind, as
// TestKinds/<kind>/<scenario> (`go test -run 'TestKinds/codex'` runs one
// kind). Each kind gives a kindDriver (claude_test.go, codex_test.go,
// gemini_test.go, opencode_test.go): it starts a team whose agent is the
// kind's real CLI against the kind's fake model API, scripts a phase's
// turns in that API's wire format, reads the requests back, and asks a
// person a question the kind's way. Scenarios only one kind has (Claude's
// idle and rate-limit escalations, mixed-kind teams) stay in the kind's
// file.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
)

// step is one scripted model turn in no kind's wire format, before the
// turns of a phase (phaseTurns): a shell command (id names it, unique in
// the phase; ask: one the CLI must ask a person for, which only Codex's
// model has to say), a text that ends the turn, or (stall) a stream that
// sends the start of text and then hangs.
type step struct {
	id    string
	shell string
	ask   bool
	text  string
	stall bool
}

// modelRequest is a request of a CLI to its fake model API, in no kind's
// wire format: when it came, its body, and whether the stall step's
// stream answered it.
type modelRequest struct {
	time    time.Time
	body    []byte
	stalled bool
}

// kindQuestion is a question the planner asks a person the kind's way,
// and what the suite expects of it.
type kindQuestion struct {
	escalated []string       // what the escalation comment holds
	state     api.AgentState // the planner's agent state while escalated
	answer    string         // the person's answer, in words of their own
	logged    []string       // what the manager's log line of the answer holds
	check     func()         // the kind's own checks once the phase completed
}

// kindDriver is what the suite needs of an agent kind, for one team
// (its env) started with the kind's real CLI and fake model API.
type kindDriver interface {
	// script queues issue's phase mode: the turns of before, then what an
	// agent does in that phase (phaseTurns and its kind's copies).
	script(issue string, mode controller.Mode, before ...step)
	// requests are the requests of issue's phase mode so far (those
	// carrying its prompt; the CLI's side requests, such as titles, left
	// out), oldest first.
	requests(issue string, mode controller.Mode) []modelRequest
	// question scripts issue's plan phase: a question to a person, then
	// the phase's turns.
	question(issue string) kindQuestion
	// assertScripted checks that every scripted turn was taken and no
	// request went unscripted (only: of that phase; "": of any).
	assertScripted(issue string, only controller.Mode)
	// completed checks that session s ended as completed, never
	// restarted (and with which exit code, where the kind's is known).
	completed(t testing.TB, s api.Session)
	// resumeArgs is what the argv of a resumed run of agent session sid
	// holds, as the worker's transcript quotes it.
	resumeArgs(sid string) string
}

// Kind-specific checks a driver may add to a scenario's.
type (
	// todoChecker checks more once issue went from Todo to Done.
	todoChecker interface {
		checkTodoToDone(ctx context.Context, issue string)
	}
	// denialChecker checks more once the planner of issue had ok
	// approved and no denied with "not now".
	denialChecker interface {
		checkDenied(issue string, ok, no step)
	}
	// restartChecker checks more once the worker whose stream stalled
	// at stalled restarted, under stale_after staleAfter.
	restartChecker interface {
		checkRestarted(ctx context.Context, stalled time.Time, staleAfter time.Duration)
	}
)

// kind is an agent kind of the suite: how to start a team with it, its
// stale_after for the stall scenario (the CLI's start-up before its
// first hook must fit in it), and how long each scenario may take.
type kind struct {
	name       string
	start      func(t *testing.T, o teamOptions) (*env, kindDriver)
	stallAfter time.Duration
	budget     map[string]time.Duration
}

var kinds = []kind{
	{
		name: "claude", start: startClaudeKind, stallAfter: 20 * time.Second,
		budget: map[string]time.Duration{"TodoToDone": 4 * time.Minute, "StallResumed": 5 * time.Minute, "PermissionApprovedAndDenied": 3 * time.Minute, "QuestionAnswered": 3 * time.Minute},
	},
	{
		name: "codex", start: startCodexKind, stallAfter: 5 * time.Second,
		budget: map[string]time.Duration{"TodoToDone": 5 * time.Minute, "StallResumed": 5 * time.Minute, "PermissionApprovedAndDenied": 3 * time.Minute, "QuestionAnswered": 6 * time.Minute},
	},
	{
		// Every start of the Gemini CLI takes seconds of node start-up, up
		// to 20 s on a loaded machine (gemini FACTS G19).
		name: "gemini", start: startGeminiKind, stallAfter: 20 * time.Second,
		budget: map[string]time.Duration{"TodoToDone": 12 * time.Minute, "StallResumed": 12 * time.Minute, "PermissionApprovedAndDenied": 6 * time.Minute, "QuestionAnswered": 6 * time.Minute},
	},
	{
		name: "opencode", start: startOpencodeKind, stallAfter: 30 * time.Second,
		budget: map[string]time.Duration{"TodoToDone": 25 * time.Minute, "StallResumed": 25 * time.Minute, "PermissionApprovedAndDenied": 15 * time.Minute, "QuestionAnswered": 10 * time.Minute},
	},
}

// kindScenarios are the scenarios every kind runs, by name.
var kindScenarios = []struct {
	name string
	run  func(ctx context.Context, t *testing.T, k kind)
}{
	{"TodoToDone", kindTodoToDone},
	{"StallResumed", kindStallResumed},
	{"PermissionApprovedAndDenied", kindPermissionApprovedAndDenied},
	{"QuestionAnswered", kindQuestionAnswered},
}

// TestKinds runs every scenario with every kind's real CLI, each under
// its own private systemd user manager with the real controller and
// helper.
func TestKinds(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			for _, sc := range kindScenarios {
				t.Run(sc.name, func(t *testing.T) {
					sc.run(claudeCtx(t, k.budget[sc.name]), t, k)
				})
			}
		})
	}
}

// phaseMatch matches the model requests of issue's phase mode: its
// conversation holds the phase's prompt (the worker's first prompt; it
// stays in the conversation when the agent is prompted again or
// resumed). The retro resumes the implementer's conversation: an
// implement turn never answers a conversation that has reached its retro.
func phaseMatch(issue string, mode controller.Mode) func(body []byte) bool {
	want := []byte(phasePrompt(issue, mode))
	retro := []byte(phasePrompt(issue, controller.ModeRetro))
	return func(body []byte) bool {
		return bytes.Contains(body, want) && (mode != controller.ModeImplement || !bytes.Contains(body, retro))
	}
}

// phasePrompt is how the prompt of issue's phase mode begins.
func phasePrompt(issue string, mode controller.Mode) string {
	return fmt.Sprintf("# Legion: %s %s ", mode, issue)
}

// kindTodoToDone: an issue goes from Todo to Done through all five
// phases with the kind's real CLI as the team's agent (Codex, Gemini and
// opencode under the bypass policy, Claude Code under the default
// allowlist): every phase's commands run, with no permission asked and
// nothing escalated; each worker ends as completed, none restarts; the
// retro runs in the implementer's conversation, resumed; every scripted
// turn is taken and no request goes unscripted; the implementer's file
// lands on main. (Codex's finisher runs with --cd <main checkout>: its
// hooks would fail once its worktree is gone, codex FACTS X21.)
func kindTodoToDone(ctx context.Context, t *testing.T, k kind) {
	e, d := k.start(t, teamOptions{wipLimit: 1})
	id := e.addIssue(ctx, "Write a file")
	for _, m := range allModes {
		d.script(id, m)
	}
	start := time.Now()
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)
	t.Logf("Todo to Done in %s", time.Since(start).Round(time.Millisecond))

	is := e.issue(ctx, id)
	if len(is.Labels) != 0 {
		t.Errorf("labels of the done issue = %v; want none", is.Labels)
	}
	if c := legionComments(is); len(c) != 0 {
		t.Errorf("Legion escalated (comments %q); want no escalation: every tool allowed, every phase finished", c)
	}
	if e.logged("agent state", "state=waiting_permission") {
		t.Errorf("an agent waited for a permission; want every tool of the phases allowed")
	}
	for _, m := range allModes {
		d.completed(t, e.waitCompleted(ctx, id, m))
	}
	if reqs := d.requests(id, controller.ModeRetro); len(reqs) == 0 || !bytes.Contains(reqs[0].body, []byte(phasePrompt(id, controller.ModeImplement))) {
		t.Errorf("the retro's first request (of %d) does not carry the implementer's conversation (its prompt %q)", len(reqs), phasePrompt(id, controller.ModeImplement))
	}
	d.assertScripted(id, "")
	if c, ok := d.(todoChecker); ok {
		c.checkTodoToDone(ctx, id)
	}
}

// kindStallResumed: the plan phase's first stream hangs mid-message (the
// fake sends the start of a text, then nothing). No hook fires and no
// session file is written meanwhile, so after stale_after the worker
// counts the agent stale and systemd restarts it, once; the CLI
// is resumed from its real session file (the transcript says so, with
// the kind's resume argv), and its first request then carries the
// conversation so far: the plan's prompt as history and as the resumed
// prompt. The issue still goes to Done.
func kindStallResumed(ctx context.Context, t *testing.T, k kind) {
	e, d := k.start(t, teamOptions{wipLimit: 1, staleAfter: k.stallAfter.String()})
	id := e.addIssue(ctx, "Stall once")
	d.script(id, controller.ModePlan, step{text: "Let me think about how best to plan this, at some length.", stall: true})
	for _, m := range allModes[1:] {
		d.script(id, m)
	}
	start := time.Now()
	e.startController()

	var stalled time.Time
	e.poll(ctx, "the planner's stream stalled", func() (bool, string) {
		reqs := d.requests(id, controller.ModePlan)
		for _, r := range reqs {
			if r.stalled {
				stalled = r.time
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d requests of the planner", len(reqs))
	})
	unit := workerUnit(t, id, controller.ModePlan)
	e.poll(ctx, "the stalled planner restarted by systemd", func() (bool, string) {
		st, err := e.mgr.State(ctx, unit)
		if err != nil {
			return false, err.Error()
		}
		return st.NRestarts >= 1, fmt.Sprintf("%s/%s NRestarts=%d", st.ActiveState, st.SubState, st.NRestarts)
	})
	t.Logf("stalled %s after the start; restarted %s after the stall", stalled.Sub(start).Round(time.Millisecond), time.Since(stalled).Round(time.Millisecond))
	if c, ok := d.(restartChecker); ok {
		c.checkRestarted(ctx, stalled, k.stallAfter)
	}

	e.assertFinished(ctx, id, id+".txt", "impl "+id)
	t.Logf("Todo to Done in %s", time.Since(start).Round(time.Millisecond))
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	if s.Restarts != 1 || s.Exit == nil || !strings.HasPrefix(s.Exit.Reason, "completed:") {
		t.Errorf("planner session: restarts %d, exit %v; want 1 restart, then completed", s.Restarts, s.Exit)
	}
	for _, m := range allModes[1:] {
		d.completed(t, e.waitCompleted(ctx, id, m))
	}
	tr := e.transcript(workerID(id, controller.ModePlan))
	for _, want := range []string{"run 2 start (resume)", d.resumeArgs(sessionID(id, controller.ModePlan))} {
		if !strings.Contains(tr, want) {
			t.Errorf("the planner's transcript has no %q:\n%s", want, tail(tr, 20))
		}
	}
	prompt := []byte(phasePrompt(id, controller.ModePlan))
	reqs := d.requests(id, controller.ModePlan)
	if len(reqs) < 2 || !reqs[0].stalled {
		t.Fatalf("plan requests: %d, the first stalled %v; want the stalled one, then more", len(reqs), len(reqs) > 0 && reqs[0].stalled)
	}
	if n := bytes.Count(reqs[1].body, prompt); n < 2 {
		t.Errorf("the first request after the restart names the plan prompt %d times; want it as history and as the resumed prompt", n)
	}
	d.assertScripted(id, "")
}

// kindPermissionApprovedAndDenied: under the allowlist policy two
// commands the kind's allow rules do not cover are escalated, each with
// the tool and the exact command, while the planner's agent waits for
// the permission. The first, approved with a comment "approve", runs;
// the second, denied with "deny: not now", does not, and the model is
// told why; the phase then completes. Both decisions are logged with who
// made them. (Codex asks only for a command to run outside its sandbox,
// codex FACTS X15; Gemini's dialog is seen by its Notification hook and
// answered by keys; opencode's by its plugin.)
func kindPermissionApprovedAndDenied(ctx context.Context, t *testing.T, k kind) {
	e, d := k.start(t, teamOptions{wipLimit: 1, extra: "agent.permissions_by_mode = { plan = \"allowlist\" }\n"})
	id := e.addIssue(ctx, "Touch two files")
	ok := step{id: "touch_ok", shell: "touch approved.txt", ask: true}
	no := step{id: "touch_no", shell: "touch denied.txt", ask: true}
	d.script(id, controller.ModePlan, ok, no)
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
	d.completed(t, s)
	e.assertAnswered(ctx, id)
	if _, err := os.Stat(filepath.Join(wt, "denied.txt")); err == nil {
		t.Errorf("the denied command ran: %s exists", filepath.Join(wt, "denied.txt"))
	}
	told := false
	for _, r := range d.requests(id, controller.ModePlan) {
		told = told || bytes.Contains(r.body, []byte("not now"))
	}
	if !told {
		t.Errorf("no request tells the model the command was denied with \"not now\"")
	}
	if c, ok2 := d.(denialChecker); ok2 {
		c.checkDenied(id, ok, no)
	}
	for _, want := range [][]string{
		{"agent state", "state=waiting_permission", "touch approved.txt"},
		{"respond: permission", "by=ana", "what=allow", "touch approved.txt"},
		{"respond: permission", "by=ana", "what=deny", "touch denied.txt", "not now"},
	} {
		if !e.logged(want...) {
			t.Errorf("the manager's log has no line with %q", want)
		}
	}
	d.assertScripted(id, controller.ModePlan)
}

// kindQuestionAnswered: the planner asks a person a question the kind's
// way (Claude Code with AskUserQuestion; the others in text, their
// question tools failing at once: see each driver's question); the
// controller escalates it, the person answers in the tracker in words of
// their own, the planner gets exactly those words, and the phase
// completes without a restart; the answer is logged with who gave it.
func kindQuestionAnswered(ctx context.Context, t *testing.T, k kind) {
	e, d := k.start(t, teamOptions{wipLimit: 1})
	id := e.addIssue(ctx, "Ask first")
	q := d.question(id)
	e.startController()

	e.waitEscalated(ctx, id, 0, q.escalated...)
	if s, ok := e.session(ctx, id, controller.ModePlan); !ok || s.Agent == nil || s.Agent.State != q.state {
		t.Errorf("the planner while its question is escalated: %+v; want its agent %s", s.Agent, q.state)
	}
	e.answer(ctx, id, q.answer)
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	e.stopController()
	d.completed(t, s)
	e.assertAnswered(ctx, id)
	told := false
	for _, r := range d.requests(id, controller.ModePlan) {
		told = told || bytes.Contains(r.body, []byte(q.answer))
	}
	if !told {
		t.Errorf("no request carries the answer %q", q.answer)
	}
	if !e.logged(q.logged...) {
		t.Errorf("the manager's log has no line with %q", q.logged)
	}
	q.check()
	d.assertScripted(id, controller.ModePlan)
}
