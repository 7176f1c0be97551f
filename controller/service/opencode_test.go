package service_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/agent/opencode/opencodetest"
	"github.com/legion-dev/legion/controller"
)

// startOpencode is start for a team whose agent is the real opencode CLI
// (kind opencode, its default argvs, the bypass policy unless o.extra
// says otherwise), served by a fake Responses API (the returned server).
// The user's ~/.config/opencode/opencode.json names the fake as the openai
// provider, its key read from the manager's environment ({env:…}).
func startOpencode(t *testing.T, o teamOptions) (*env, *openaitest.Server) {
	t.Helper()
	o.opencode = opencodetest.Binary(t)
	if o.idleGrace == "" {
		o.idleGrace = "2s"
	}
	if o.staleAfter == "" {
		o.staleAfter = "2m"
	}
	srv := openaitest.NewServer(t)
	e := start(t, "", o)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	opencodetest.WriteUserConfig(t, srv, home)
	if out, err := e.sd.Systemctl(t, "set-environment", openaitest.KeyEnv+"="+openaitest.Key); err != nil {
		t.Fatalf("systemctl --user set-environment: %v\n%s", err, out)
	}
	logRequests(t, srv)
	return e, srv
}

// logRequests logs srv's requests when t fails.
func logRequests(t *testing.T, srv *openaitest.Server) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range srv.Requests() {
				t.Logf("API request %s title %v unscripted %v: turn %+v", r.Time.Format("15:04:05.000"), r.Title, r.Unscripted, r.Turn)
			}
		}
	})
}

// opencodePhase is codexPhase with opencode's bash tool for every command.
func (e *env) opencodePhase(issue string, mode controller.Mode) []openaitest.Turn {
	turns := e.codexPhase(issue, mode)
	for i, t := range turns {
		if t.Exec != "" {
			b := openaitest.Bash(t.Exec)
			b.Match = t.Match
			turns[i] = b
		}
	}
	return turns
}

// TestOpencodeTodoToDone (issue 21): an issue goes from Todo to Done
// through all five phases with the real opencode CLI as the team's agent
// (kind opencode, bypass policy: --auto) against a local Responses API:
// every phase's bash calls run, each worker ends as completed, none
// restarts, and the implementer's file lands on main.
func TestOpencodeTodoToDone(t *testing.T) {
	e, srv := startOpencode(t, teamOptions{wipLimit: 1})
	ctx := claudeCtx(t, 25*time.Minute)
	id := e.addIssue(ctx, "Write a file")
	for _, m := range allModes {
		srv.Script(e.opencodePhase(id, m)...)
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

// TestOpencodeStallResumed (issue 21): the plan phase's first stream hangs
// (one piece of text, then nothing); the worker's watchdog sees no event
// for stale_after and systemd restarts the worker, which continues the
// conversation (`opencode --continue` with the conversation's own session
// database: the session file holds its ses_ id), the plugin sending the
// resumed prompt; the next request carries the earlier prompt as history;
// the issue still reaches Done.
func TestOpencodeStallResumed(t *testing.T) {
	e, srv := startOpencode(t, teamOptions{wipLimit: 1, staleAfter: "30s"})
	ctx := claudeCtx(t, 25*time.Minute)
	id := e.addIssue(ctx, "Write a file")
	plan := e.opencodePhase(id, controller.ModePlan)
	stall := plan[0]
	stall.Tool, stall.Args, stall.Text, stall.Stall = "", nil, "Thinking about the plan", true
	srv.Script(append([]openaitest.Turn{stall}, plan...)...)
	for _, m := range allModes[1:] {
		srv.Script(e.opencodePhase(id, m)...)
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

// TestOpencodePermissionApprovedAndDenied (issue 21): under the allowlist
// policy opencode asks for a command that is not Legion's or git (its
// permission.asked event, relayed by the plugin as a PermissionRequest
// that the worker holds); both are escalated with the tool and the exact
// command. The first, approved, runs; the second, denied with "deny: not
// now", does not (the plugin answers opencode's API "reject" with the
// message), and the model is told; the phase then completes.
func TestOpencodePermissionApprovedAndDenied(t *testing.T) {
	e, srv := startOpencode(t, teamOptions{wipLimit: 1, extra: "agent.permissions_by_mode = { plan = \"allowlist\" }\n"})
	ctx := claudeCtx(t, 15*time.Minute)
	id := e.addIssue(ctx, "Touch two files")
	plan := e.opencodePhase(id, controller.ModePlan)
	ok, no := openaitest.Bash("touch approved.txt"), openaitest.Bash("touch denied.txt")
	ok.Match, no.Match = plan[0].Match, plan[0].Match
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
		told = told || bytes.Contains(r.Body, []byte("not now"))
	}
	if !told {
		t.Errorf("no request tells the model the command was rejected with \"not now\"")
	}
	if left := srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted turns were never asked for: %+v", len(left), left)
	}
}

// TestOpencodeQuestionAsText: opencode's TUI offers the model its
// question tool, whose dialog Legion's plugin does not answer, so Legion's
// opencode.json denies it (permission question: deny): opencode does not
// offer it, and a call of it fails at once instead of waiting on a dialog
// nobody sees. The model asks in text and ends its turn; the controller
// escalates what it said, and the person's answer is its next prompt; the
// phase then completes.
func TestOpencodeQuestionAsText(t *testing.T) {
	e, srv := startOpencode(t, teamOptions{wipLimit: 1})
	ctx := claudeCtx(t, 10*time.Minute)
	id := e.addIssue(ctx, "Ask first")
	plan := e.opencodePhase(id, controller.ModePlan)
	scriptToolQuestion(srv, plan, "question", map[string]any{"header": "Scope"})
	e.startController()
	e.answerTextQuestion(ctx, id, e.waitCompleted)
	for i, r := range srv.Requests() {
		if tools := responsesTools(t, r); !r.Title && (slices.Contains(tools, "question") || !slices.Contains(tools, "bash")) {
			t.Errorf("request %d offers the tools %q; want bash and not question", i, tools)
		}
	}
	assertToolRefused(t, srv, "question")
}

// responsesTools are the names of the tools a Responses API request body
// offers the model.
func responsesTools(t *testing.T, r openaitest.Request) []string {
	t.Helper()
	tools, err := r.Tools()
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// TestMixedOpencodeTodoToDone (issue 21): a team that plans with opencode
// (agent.kind_by_mode) and implements, reviews, retros and finishes with
// Claude Code completes an issue, each phase's agent its kind's real CLI
// against its own fake API.
func TestMixedOpencodeTodoToDone(t *testing.T) {
	bin := opencodetest.Binary(t)
	e := startClaude(t, teamOptions{wipLimit: 1, staleAfter: "2m", extra: "agent.kind_by_mode = { plan = \"opencode\" }\n"},
		"PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), openaitest.KeyEnv+"="+openaitest.Key)
	srv := openaitest.NewServer(t)
	logRequests(t, srv)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	opencodetest.WriteUserConfig(t, srv, home)
	ctx := claudeCtx(t, 25*time.Minute)
	id := e.addIssue(ctx, "Write a file")
	srv.Script(e.opencodePhase(id, controller.ModePlan)...)
	e.scriptAll(id, controller.ModePlan)
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)

	s := e.waitCompleted(ctx, id, controller.ModePlan)
	if s.Exit == nil || !strings.HasPrefix(s.Exit.Reason, "completed:") {
		t.Errorf("plan session ended %v; want completed", s.Exit)
	}
	for _, m := range allModes[1:] {
		assertCompletedAnyCode(t, e.waitCompleted(ctx, id, m))
	}
	if left := srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted opencode turns were never asked for: %+v", len(left), left)
	}
	if tr := e.transcript(workerID(id, controller.ModePlan)); !strings.Contains(tr, "opencode") {
		t.Errorf("the plan worker did not run opencode; its transcript:\n%s", tail(tr, 10))
	}
	e.assertScripted()
}
