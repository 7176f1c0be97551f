package service_test

// End-to-end tests with the real Claude Code CLI (claudetest.Binary: the
// pinned version scripts/install-claude-code installs; skipped without it,
// failed with CI=true) as the team's agent, against a fake Anthropic API
// (anthropictest) that scripts each session's turns, under a private
// systemd user manager, driven by the real controller legion@demo and
// helper. The CLI gets the API's address and token from the manager's
// environment, as a user's agents would get theirs, never from argv.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units/unitname"
)

// startClaude is start for a team whose agent is the real Claude Code
// CLI with the default argv and kind, served by a fake API (e.api) that
// accepts only claudetest.Token. The manager's environment gives every
// agent the API's address and the token, non-essential traffic off, and
// managerEnv (KEY=VALUE). idle_grace is 2s unless o says otherwise, and
// stale_after a minute: a real agent writes nothing to its session file
// while a turn streams or a tool runs.
func startClaude(t *testing.T, o teamOptions, managerEnv ...string) *env {
	t.Helper()
	o.claude = claudetest.Binary(t)
	if o.idleGrace == "" {
		o.idleGrace = "2s"
	}
	if o.staleAfter == "" {
		o.staleAfter = "1m"
	}
	srv := anthropictest.NewServer(t)
	srv.Key = claudetest.Token
	e := start(t, "", o)
	e.api = srv
	vars := append([]string{
		"ANTHROPIC_BASE_URL=" + srv.URL,
		"ANTHROPIC_AUTH_TOKEN=" + claudetest.Token,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, managerEnv...)
	if out, err := e.sd.Systemctl(t, append([]string{"set-environment"}, vars...)...); err != nil {
		t.Fatalf("systemctl --user set-environment: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range srv.MessageRequests("") {
				t.Logf("API request %s session %s unscripted %v: last user text %q%s",
					r.Time.Format("15:04:05.000"), r.Session, r.Unscripted, clip(r.LastUserText(), 200), toolResults(r))
			}
		}
	})
	return e
}

// toolResults lists, for a failure's log, the tool results the last
// user message of r carries: what each tool call of the scripted turns
// (a legion command, say) answered.
func toolResults(r *anthropictest.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != "user" {
			continue
		}
		var blocks []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
		}
		if json.Unmarshal(r.Messages[i].Content, &blocks) != nil {
			return ""
		}
		var out strings.Builder
		for _, b := range blocks {
			if res, ok := r.ToolResult(b.ToolUseID); ok && b.Type == "tool_result" {
				fmt.Fprintf(&out, "; tool result %s error %v: %q", b.ToolUseID, res.IsError, clip(res.Content, 300))
			}
		}
		return out.String()
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// claudeCtx bounds a test with the real CLI.
func claudeCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// lcmd is a command line running the legion binary, as an agent's Bash
// tool call would (the binary's absolute path: the allow rules name it).
func (e *env) lcmd(args ...string) string {
	return e.bin + " " + strings.Join(args, " ")
}

// toolID is the tool_use id of step what of issue's phase mode, unique in
// a test and traceable in its requests and session files.
func toolID(issue string, mode controller.Mode, what string) string {
	return "toolu_" + strings.ReplaceAll(issue, "-", "") + "_" + string(mode) + "_" + what
}

// say is a turn that ends with text.
func say(text string) anthropictest.Turn {
	return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(text)}}
}

// use is a turn that calls one tool.
func use(b anthropictest.Block) anthropictest.Turn {
	return anthropictest.Turn{Blocks: []anthropictest.Block{b}}
}

// bash is a turn that runs command with the Bash tool, as tool_use id.
func bash(id, command string) anthropictest.Turn {
	return use(anthropictest.Bash(command, "Run "+strings.Fields(command)[0]).WithID(id))
}

// inPhase matches the requests of issue's phase mode: its conversation
// holds the phase's prompt (the worker's first prompt; it stays in the
// conversation when the agent is prompted again or resumed). The retro
// resumes the implementer's session: an implement turn never answers a
// conversation that has reached its retro.
func inPhase(issue string, mode controller.Mode) func(*anthropictest.Request) bool {
	want := []byte(fmt.Sprintf("# Legion: %s %s ", mode, issue))
	retro := []byte(fmt.Sprintf("# Legion: %s %s ", controller.ModeRetro, issue))
	return func(r *anthropictest.Request) bool {
		return bytes.Contains(r.Body, want) && (mode != controller.ModeImplement || !bytes.Contains(r.Body, retro))
	}
}

// script queues turns for issue's phase mode, in its agent session (the
// retro's is the implementer's), each matching only that phase.
func (e *env) script(issue string, mode controller.Mode, turns ...anthropictest.Turn) {
	m := inPhase(issue, mode)
	for i := range turns {
		turns[i].Match = m
	}
	e.api.Script(sessionID(issue, mode), turns...)
}

// doneID is the tool_use id of a phase's last tracker command: worker-done,
// or the finisher's `legion worktree finish`.
func doneID(issue string, mode controller.Mode) string { return toolID(issue, mode, "done") }

// phaseTurns is what an agent does in each phase of the worker skill,
// with the team's commands, ending with a text turn:
//
//   - plan: comment the plan, worker-done;
//   - implement: write ISSUE.txt (the Write tool), git add and commit it,
//     worker-done;
//   - review: worker-approved, worker-done;
//   - retro: comment, worker-done;
//   - finish: `legion worktree finish` (merge, clean up, Done).
func (e *env) phaseTurns(issue string, mode controller.Mode) []anthropictest.Turn {
	label := func(l string) string { return e.lcmd("issue", "label", teamName, issue, l) }
	switch mode {
	case controller.ModePlan:
		return []anthropictest.Turn{
			bash(toolID(issue, mode, "comment"), e.lcmd("issue", "comment", teamName, issue, `"Plan: write `+issue+`.txt and commit it."`)),
			bash(doneID(issue, mode), label(controller.LabelWorkerDone)),
			say("The plan is posted on " + issue + "."),
		}
	case controller.ModeImplement:
		return []anthropictest.Turn{
			use(anthropictest.Write(filepath.Join(e.team.Worktrees.Path(issue), issue+".txt"), "impl "+issue+"\n").WithID(toolID(issue, mode, "write"))),
			bash(toolID(issue, mode, "add"), "git add "+issue+".txt"),
			bash(toolID(issue, mode, "commit"), `git commit -q -m "implement `+issue+`"`),
			bash(doneID(issue, mode), label(controller.LabelWorkerDone)),
			say(issue + " is implemented and committed."),
		}
	case controller.ModeReview:
		return []anthropictest.Turn{
			bash(toolID(issue, mode, "approve"), label(controller.LabelApproved)),
			bash(doneID(issue, mode), label(controller.LabelWorkerDone)),
			say("Approved."),
		}
	case controller.ModeRetro:
		return []anthropictest.Turn{
			bash(toolID(issue, mode, "comment"), e.lcmd("issue", "comment", teamName, issue, `"Retro: it went well."`)),
			bash(doneID(issue, mode), label(controller.LabelWorkerDone)),
			say("Retro done."),
		}
	case controller.ModeFinish:
		return []anthropictest.Turn{
			bash(doneID(issue, mode), e.lcmd("worktree", "finish", teamName, issue)),
			say(issue + " is merged and done."),
		}
	}
	e.t.Fatalf("no turns for mode %q", mode)
	return nil
}

// allModes are the phases of an issue, in order.
var allModes = []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeRetro, controller.ModeFinish}

// scriptAll scripts every phase of issue with phaseTurns, except those in
// skip.
func (e *env) scriptAll(issue string, skip ...controller.Mode) {
	for _, m := range allModes {
		if !slices.Contains(skip, m) {
			e.script(issue, m, e.phaseTurns(issue, m)...)
		}
	}
}

// sessions is `legion sessions list --json`'s sessions.
func (e *env) sessions(ctx context.Context) []api.Session {
	e.t.Helper()
	var out struct{ Sessions []api.Session }
	if err := json.Unmarshal([]byte(e.legion(ctx, "sessions", "list", "--json")), &out); err != nil {
		e.t.Fatalf("legion sessions list --json: %v", err)
	}
	return out.Sessions
}

// session is the helper's session of issue's worker in mode.
func (e *env) session(ctx context.Context, issue string, mode controller.Mode) (api.Session, bool) {
	e.t.Helper()
	for _, s := range e.sessions(ctx) {
		if s.Issue == issue && s.Mode == string(mode) {
			return s, true
		}
	}
	return api.Session{}, false
}

// waitCompleted waits until the worker of issue in mode has exited as
// completed (the agent ended cleanly once its phase was done) and returns
// its session.
func (e *env) waitCompleted(ctx context.Context, issue string, mode controller.Mode) api.Session {
	e.t.Helper()
	var s api.Session
	e.poll(ctx, fmt.Sprintf("the %s worker of %s completed", mode, issue), func() (bool, string) {
		var ok bool
		if s, ok = e.session(ctx, issue, mode); !ok {
			return false, "no session"
		}
		return s.State == api.StateExited && s.Exit != nil, fmt.Sprintf("%s exit %v agent %+v", s.State, s.Exit, s.Agent)
	})
	return s
}

// assertCompleted checks that session s ended as completed, exit code 0,
// never restarted.
func assertCompleted(t testing.TB, s api.Session) {
	t.Helper()
	if s.Exit == nil || !strings.HasPrefix(s.Exit.Reason, "completed:") || s.Exit.Code == nil || *s.Exit.Code != 0 {
		t.Errorf("session %s ended %v; want exit code 0 with a reason starting with \"completed:\"", s.Name, s.Exit)
	}
	if s.Restarts != 0 {
		t.Errorf("session %s restarted %d times; want 0", s.Name, s.Restarts)
	}
}

// toolResultRequest is the first request of session that carries the
// tool_result of tool_use id, and that result.
func (e *env) toolResultRequest(session, id string) (*anthropictest.Request, anthropictest.ToolResult, bool) {
	for _, r := range e.api.MessageRequests(session) {
		if res, ok := r.ToolResult(id); ok {
			return r, res, true
		}
	}
	return nil, anthropictest.ToolResult{}, false
}

// assertScripted fails the test for every request no scripted turn
// answered.
func (e *env) assertScripted() {
	e.t.Helper()
	for _, r := range e.api.MessageRequests("") {
		if r.Unscripted {
			e.t.Errorf("unscripted API request of session %s: last user text %q", r.Session, clip(r.LastUserText(), 300))
		}
	}
}

// assertToolOK checks that tool_use id of session ran and its result
// reached the API with no error.
func (e *env) assertToolOK(session, id string) {
	e.t.Helper()
	_, res, ok := e.toolResultRequest(session, id)
	switch {
	case !ok:
		e.t.Errorf("no request of session %s carries the result of %s", session, id)
	case res.IsError:
		e.t.Errorf("tool %s of session %s failed: %q", id, session, res.Content)
	}
}

// dialogText matches what the CLI's start-up dialogs say (onboarding,
// folder trust, a custom API key, bypass mode's warning) in a transcript.
var dialogText = regexp.MustCompile(`(?i)trust|let's get started|choose the text style|detected a custom api key|bypass permissions mode`)

// legionComments are the issue's comments written by Legion.
func legionComments(is controller.TrackedIssue) []string {
	var out []string
	for _, c := range is.Comments {
		if c.Author == controller.AuthorLegion {
			out = append(out, c.Text)
		}
	}
	return out
}

// TestClaudeTodoToDone (issue 18, a and g): an issue goes from Todo to
// Done through all five phases with the real CLI: each phase's tools run
// with no permission prompt under the default allowlist policy, each
// worker ends as completed within seconds of its last tracker command,
// none restarts, no start-up dialog shows in any new session, and the
// implementer's file lands on main.
func TestClaudeTodoToDone(t *testing.T) {
	e := startClaude(t, teamOptions{wipLimit: 1})
	ctx := claudeCtx(t, 4*time.Minute)
	id := e.addIssue(ctx, "Write a file")
	e.scriptAll(id)
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
		t.Errorf("an agent waited for a permission; want every tool of the phases allowed by the allowlist policy")
	}
	for _, m := range allModes {
		s := e.waitCompleted(ctx, id, m)
		assertCompleted(t, s)
		// Within seconds of the phase's last command: its result went to
		// the API, the agent's last turn ended, the controller ended it.
		req, _, ok := e.toolResultRequest(sessionID(id, m), doneID(id, m))
		if !ok {
			t.Errorf("%s: no request carries the result of its last command %s", m, doneID(id, m))
			continue
		}
		if lag := s.Exit.Time.Sub(req.Time); lag < 0 || lag > 10*time.Second {
			t.Errorf("%s worker exited %s after its last command's result reached the API; want within 10s", m, lag)
		} else {
			t.Logf("%s worker ended %s after its last command", m, lag.Round(time.Millisecond))
		}
	}
	for _, m := range allModes {
		sid := sessionID(id, m)
		for _, turn := range e.phaseTurns(id, m) {
			for _, b := range turn.Blocks {
				if b.Type == "tool_use" {
					e.assertToolOK(sid, b.ID)
				}
			}
		}
	}
	e.assertScripted()

	// (g) No dialog at the start of any session: each one's first request
	// came with its prompt, and no transcript shows a dialog's text.
	for _, m := range []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeFinish} {
		reqs := e.api.MessageRequests(sessionID(id, m))
		if len(reqs) == 0 || !strings.Contains(reqs[0].FirstUserText(), fmt.Sprintf("# Legion: %s %s ", m, id)) {
			t.Errorf("%s: the first API request is not the phase's prompt (%d requests)", m, len(reqs))
		}
	}
	for _, m := range allModes {
		wid := workerID(id, m)
		if loc := dialogText.FindStringIndex(e.transcript(wid)); loc != nil {
			tr := e.transcript(wid)
			t.Errorf("the %s transcript shows a dialog (%q):\n%s", m, tr[loc[0]:loc[1]], tail(tr[max(0, loc[0]-500):min(len(tr), loc[1]+500)], 20))
		}
	}
	// The retro ran in the implementer's own session, resumed.
	if text, _ := e.sessionFile(id, controller.ModeRetro); !strings.Contains(text, "Retro done.") {
		t.Errorf("the implementer's session has no retro in it:\n%s", tail(text, 5))
	}
}

// workerID is the id of the worker of issue in mode: it names the
// worker's transcript (for the retro, not the agent session's id).
func workerID(issue string, mode controller.Mode) string {
	return claudecode.SessionID(teamID, issue, string(mode)).String()
}

// claudeSession reads the Claude Code session file of issue's phase mode
// (the retro's is the implementer's).
func (e *env) claudeSession(issue string, mode controller.Mode) claudetest.Session {
	e.t.Helper()
	sid := sessionID(issue, mode)
	files, _ := filepath.Glob(filepath.Join(e.sd.Home, ".claude", "projects", "*", sid+".jsonl"))
	if len(files) != 1 {
		e.t.Fatalf("session files of %s %s (%s): %v; want one", issue, mode, sid, files)
	}
	s, err := claudetest.ReadSession(files[0])
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// waitEscalated waits until issue carries user-input-needed and a
// comment of Legion's after the first skip ones that contains every one
// of want, and returns that comment.
func (e *env) waitEscalated(ctx context.Context, issue string, skip int, want ...string) string {
	e.t.Helper()
	var got string
	e.poll(ctx, fmt.Sprintf("%s escalated with %q", issue, want), func() (bool, string) {
		is := e.issue(ctx, issue)
		cs := legionComments(is)
		if len(cs) <= skip || !slices.Contains(is.Labels, controller.LabelInputNeeded) {
			return false, fmt.Sprintf("labels %v legion comments %q", is.Labels, cs)
		}
		got = cs[skip]
		for _, w := range want {
			if !strings.Contains(got, w) {
				return false, fmt.Sprintf("labels %v comment %q", is.Labels, got)
			}
		}
		return true, ""
	})
	e.t.Logf("escalated: %s", got)
	return got
}

// answer answers an escalation as a person does in the tracker: a comment,
// then user-feedback-given.
func (e *env) answer(ctx context.Context, issue, text string) {
	e.t.Helper()
	e.legion(ctx, "issue", "comment", "--author", "ana", teamName, issue, text)
	e.legion(ctx, "issue", "label", teamName, issue, controller.LabelFeedbackGiven)
}

// assertAnswered checks that issue carries neither human-input label.
func (e *env) assertAnswered(ctx context.Context, issue string) {
	e.t.Helper()
	is := e.issue(ctx, issue)
	if slices.Contains(is.Labels, controller.LabelInputNeeded) || slices.Contains(is.Labels, controller.LabelFeedbackGiven) {
		e.t.Errorf("labels of %s = %v; want neither human-input label once answered", issue, is.Labels)
	}
}

// stopController stops legion@demo, and with it the team's workers: the
// end of a test that needs only the first phase.
func (e *env) stopController() {
	e.t.Helper()
	ctl, _ := unitname.ControllerUnit(teamName)
	if _, err := e.sd.Systemctl(e.t, "stop", ctl); err != nil {
		e.t.Fatal(err)
	}
}

// assertSessionScripted fails the test for every request of session no
// scripted turn answered.
func (e *env) assertSessionScripted(session string) {
	e.t.Helper()
	for _, r := range e.api.MessageRequests(session) {
		if r.Unscripted {
			e.t.Errorf("unscripted API request of session %s: last user text %q", r.Session, clip(r.LastUserText(), 300))
		}
	}
}

// waitToolResult waits until a request of session carries the result of
// tool_use id and returns it.
func (e *env) waitToolResult(ctx context.Context, session, id string) anthropictest.ToolResult {
	e.t.Helper()
	var res anthropictest.ToolResult
	e.poll(ctx, "the result of "+id+" at the API", func() (bool, string) {
		var ok bool
		_, res, ok = e.toolResultRequest(session, id)
		return ok, fmt.Sprintf("%d requests of session %s", len(e.api.MessageRequests(session)), session)
	})
	return res
}

// logged reports whether a line of the manager's log (the workers' and
// the helper's output) holds every one of want.
func (e *env) logged(want ...string) bool {
	for _, l := range strings.Split(e.sd.Log(), "\n") {
		all := true
		for _, w := range want {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}

// TestClaudeQuestionAnswered (issue 18, b): the planner asks with
// AskUserQuestion; the controller escalates the question with its
// options; a person answers in the tracker in words of their own (not an
// option, with a digit in it); the agent gets exactly those words, as the
// session file's answers and the API's tool_result show, and the phase
// completes.
func TestClaudeQuestionAnswered(t *testing.T) {
	e := startClaude(t, teamOptions{wipLimit: 1})
	ctx := claudeCtx(t, 3*time.Minute)
	id := e.addIssue(ctx, "Ask first")
	q := anthropictest.Question{
		Question: "Which format should the plan's notes use?", Header: "Format",
		Options: []anthropictest.Option{{Label: "Markdown", Description: "headings and lists"}, {Label: "Plain text", Description: "no markup"}},
	}
	ask := toolID(id, controller.ModePlan, "ask")
	e.script(id, controller.ModePlan, append([]anthropictest.Turn{use(anthropictest.AskUserQuestion(q).WithID(ask))},
		e.phaseTurns(id, controller.ModePlan)...)...)
	e.startController()

	e.waitEscalated(ctx, id, 0, q.Question, "Markdown", "Plain text")
	if s, ok := e.session(ctx, id, controller.ModePlan); !ok || s.Agent == nil || s.Agent.State != api.AgentWaitingAnswer {
		t.Errorf("the planner while its question is escalated: %+v; want its agent waiting_answer", s.Agent)
	}
	answer := "Neither: reStructuredText, in 2 files"
	e.answer(ctx, id, answer)
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	e.stopController()
	assertCompleted(t, s)
	e.assertAnswered(ctx, id)

	sid := sessionID(id, controller.ModePlan)
	want := fmt.Sprintf("%q=%q", q.Question, answer)
	if _, res, ok := e.toolResultRequest(sid, ask); !ok || res.IsError || !strings.Contains(res.Content, want) {
		t.Errorf("the question's tool_result at the API: %+v (found %v); want no error and %s", res, ok, want)
	}
	block, line, ok := e.claudeSession(id, controller.ModePlan).ToolResult(ask)
	if !ok {
		t.Fatalf("no tool_result of the question in the planner's session file")
	}
	if diff := cmp.Diff(map[string]string{q.Question: answer}, line.Answers()); diff != "" {
		t.Errorf("answers in the session file (-want +got):\n%s", diff)
	}
	if block.IsError || !strings.Contains(block.ResultText(), want) {
		t.Errorf("tool_result in the session file %q (is_error %v); want it to hold %s", block.ResultText(), block.IsError, want)
	}
	if !e.logged("respond: answer", "by=ana") {
		t.Errorf("the manager's log has no line of the answer by ana")
	}
	e.assertSessionScripted(sid)
}

// TestClaudePermissionApprovedAndDenied (issue 18, c): two commands the
// allowlist does not cover are escalated, each with the tool and the exact
// command. The first, approved with a comment "approve", runs; the second,
// denied with "deny: not now", does not, and the agent is told why; the
// phase then completes. Both decisions are logged with who made them.
func TestClaudePermissionApprovedAndDenied(t *testing.T) {
	e := startClaude(t, teamOptions{wipLimit: 1})
	ctx := claudeCtx(t, 3*time.Minute)
	id := e.addIssue(ctx, "Touch two files")
	okID, noID := toolID(id, controller.ModePlan, "touch_ok"), toolID(id, controller.ModePlan, "touch_no")
	e.script(id, controller.ModePlan, append([]anthropictest.Turn{bash(okID, "touch approved.txt"), bash(noID, "touch denied.txt")},
		e.phaseTurns(id, controller.ModePlan)...)...)
	e.startController()
	sid := sessionID(id, controller.ModePlan)
	wt := e.team.Worktrees.Path(id)

	e.waitEscalated(ctx, id, 0, "Bash", "touch approved.txt")
	if s, ok := e.session(ctx, id, controller.ModePlan); !ok || s.Agent == nil || s.Agent.State != api.AgentWaitingPermission || s.Agent.Command != "touch approved.txt" {
		t.Errorf("the planner while its permission is escalated: %+v; want its agent waiting_permission for touch approved.txt", s.Agent)
	}
	e.answer(ctx, id, "approve")
	if res := e.waitToolResult(ctx, sid, okID); res.IsError {
		t.Errorf("the approved command failed: %q", res.Content)
	}
	if _, err := os.Stat(filepath.Join(wt, "approved.txt")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}

	e.waitEscalated(ctx, id, 1, "Bash", "touch denied.txt")
	e.answer(ctx, id, "deny: not now")
	if res := e.waitToolResult(ctx, sid, noID); !res.IsError || res.Content != "not now" {
		t.Errorf("the denied command's tool_result: %+v; want is_error with the reason \"not now\"", res)
	}
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	e.stopController()
	assertCompleted(t, s)
	e.assertAnswered(ctx, id)
	if _, err := os.Stat(filepath.Join(wt, "denied.txt")); err == nil {
		t.Errorf("the denied command ran: %s exists", filepath.Join(wt, "denied.txt"))
	}
	block, _, ok := e.claudeSession(id, controller.ModePlan).ToolResult(noID)
	if !ok || !block.IsError || block.ResultText() != "not now" {
		t.Errorf("the denial in the session file: %+v (found %v); want an error result \"not now\"", block, ok)
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
	e.assertSessionScripted(sid)
}

// TestClaudeIdleEscalated (issue 18, d): the planner's turn ends without
// worker-done. After idle_grace the controller escalates what it last
// said; the person's answer becomes its next prompt (the API gets exactly
// that text), and it then finishes the phase.
func TestClaudeIdleEscalated(t *testing.T) {
	e := startClaude(t, teamOptions{wipLimit: 1})
	ctx := claudeCtx(t, 3*time.Minute)
	id := e.addIssue(ctx, "Stop and ask")
	last := "I am not sure the plan should cover the tests. Should it?"
	e.script(id, controller.ModePlan, append([]anthropictest.Turn{say(last)}, e.phaseTurns(id, controller.ModePlan)...)...)
	e.startController()
	sid := sessionID(id, controller.ModePlan)

	e.waitEscalated(ctx, id, 0, last)
	idleSince := e.api.MessageRequests(sid)[0].Time
	if s, ok := e.session(ctx, id, controller.ModePlan); !ok || s.Agent == nil || s.Agent.State != api.AgentIdle {
		t.Errorf("the planner while escalated: %+v; want its agent idle", s.Agent)
	}
	if is := e.issue(ctx, id); len(is.Comments) > 0 && is.Comments[len(is.Comments)-1].Time.Sub(idleSince) < 2*time.Second {
		t.Errorf("escalated %s after the turn's request; want at least idle_grace (2s)", is.Comments[len(is.Comments)-1].Time.Sub(idleSince))
	}
	reply := "Yes, cover the tests too; then post the plan and label it worker-done."
	e.answer(ctx, id, reply)
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	e.stopController()
	assertCompleted(t, s)
	e.assertAnswered(ctx, id)

	reqs := e.api.MessageRequests(sid)
	if len(reqs) < 2 || strings.TrimSpace(reqs[1].LastUserText()) != reply {
		got := ""
		if len(reqs) >= 2 {
			got = reqs[1].LastUserText()
		}
		t.Errorf("the request after the escalation has the user text %q; want the answer %q", got, reply)
	}
	if !slices.Contains(e.claudeSession(id, controller.ModePlan).Prompts(), reply) {
		t.Errorf("the planner's session file has no prompt %q: %q", reply, e.claudeSession(id, controller.ModePlan).Prompts())
	}
	if !e.logged("respond: prompt", "by=ana") {
		t.Errorf("the manager's log has no line of the prompt by ana")
	}
	e.assertSessionScripted(sid)
}

// TestClaudeStallRestartedAndResumed (issue 18, e): the implementer's API
// stream stalls mid-message. No hook fires and the session file is not
// written while the CLI's spinner keeps redrawing, so after stale_after the
// worker counts the agent stale and systemd restarts it; the CLI is
// resumed (--resume) from its real session file and the issue still goes
// to Done.
func TestClaudeStallRestartedAndResumed(t *testing.T) {
	e := startClaude(t, teamOptions{wipLimit: 1, staleAfter: "20s"})
	ctx := claudeCtx(t, 5*time.Minute)
	id := e.addIssue(ctx, "Stall once")
	stall := anthropictest.NewStall(4) // message_start, content_block_start, ping, one delta
	e.scriptAll(id, controller.ModeImplement)
	e.script(id, controller.ModeImplement, append([]anthropictest.Turn{{
		Blocks: []anthropictest.Block{anthropictest.Text("Let me think about how best to write this file, at some length.")},
		Stall:  stall,
	}}, e.phaseTurns(id, controller.ModeImplement)...)...)
	start := time.Now()
	e.startController()

	select {
	case <-stall.Stalled():
	case <-ctx.Done():
		t.Fatalf("the implementer's stream never stalled: %v", ctx.Err())
	}
	stalled := time.Now()
	unit := workerUnit(t, id, controller.ModeImplement)
	e.poll(ctx, "the stalled implementer restarted by systemd", func() (bool, string) {
		st, err := e.mgr.State(ctx, unit)
		if err != nil {
			return false, err.Error()
		}
		return st.NRestarts >= 1, fmt.Sprintf("%s/%s NRestarts=%d", st.ActiveState, st.SubState, st.NRestarts)
	})
	select {
	case <-stall.Gone():
	case <-ctx.Done():
		t.Fatalf("the stalled CLI never let go of its stream: %v", ctx.Err())
	}
	restarted := time.Now()
	t.Logf("stalled %s after the start; restarted %s after the stall", stalled.Sub(start).Round(time.Millisecond), restarted.Sub(stalled).Round(time.Millisecond))
	if d := restarted.Sub(stalled); d < 20*time.Second {
		t.Errorf("restarted %s after the stall; want stale_after (20s) at least", d)
	}

	e.assertFinished(ctx, id, id+".txt", "impl "+id)
	t.Logf("Todo to Done in %s", time.Since(start).Round(time.Millisecond))
	s := e.waitCompleted(ctx, id, controller.ModeImplement)
	if s.Restarts != 1 || s.Exit == nil || !strings.HasPrefix(s.Exit.Reason, "completed:") {
		t.Errorf("implementer session: restarts %d, exit %v; want 1 restart, then completed", s.Restarts, s.Exit)
	}
	for _, m := range []controller.Mode{controller.ModePlan, controller.ModeReview, controller.ModeRetro, controller.ModeFinish} {
		assertCompleted(t, e.waitCompleted(ctx, id, m))
	}
	sid := sessionID(id, controller.ModeImplement)
	tr := e.transcript(workerID(id, controller.ModeImplement))
	for _, want := range []string{"run 2 start (resume)", "--resume " + sid} {
		if !strings.Contains(tr, want) {
			t.Errorf("the implementer's transcript has no %q:\n%s", want, tail(tr, 20))
		}
	}
	// The resumed CLI read its session file: the first request after the
	// restart carries the first run's prompt and the new one.
	prompt := fmt.Sprintf("# Legion: %s %s ", controller.ModeImplement, id)
	var resumed *anthropictest.Request
	for _, r := range e.api.MessageRequests(sid) {
		if r.Time.After(restarted) {
			resumed = r
			break
		}
	}
	if resumed == nil || bytes.Count(resumed.Body, []byte(prompt)) < 2 {
		t.Errorf("the first request after the restart does not carry the conversation so far (the prompt twice)")
	}
	e.assertScripted()
}

// TestClaudeRateLimitWaitedOut: the real Claude Code stops at the
// model API's usage limit (a 429, its StopFailure "rate_limit", no reset
// time given: agent/claude/FACTS.md F1e, F1i). Legion does not escalate:
// it pauses the kind (a minute, the first backoff), holds a new planner
// of the same kind, says so in legion state, keeps the worker as it is
// (no restart), and when the pause ends prompts the same conversation to
// go on, without a person; the phase then finishes and the held issue
// is dispatched.
func TestClaudeRateLimitWaitedOut(t *testing.T) {
	e := startClaude(t, teamOptions{wipLimit: 2}, "CLAUDE_CODE_MAX_RETRIES=0")
	ctx := claudeCtx(t, 4*time.Minute)
	id := e.addIssue(ctx, "Hit the rate limit")
	e.script(id, controller.ModePlan, append([]anthropictest.Turn{{Failure: anthropictest.RateLimited(2*time.Second, time.Now().Add(90*time.Second))}},
		e.phaseTurns(id, controller.ModePlan)...)...)
	e.startController()
	sid := sessionID(id, controller.ModePlan)
	unit := workerUnit(t, id, controller.ModePlan)

	// The limit: the planner's agent in api_error, the kind paused.
	var limitedAt time.Time
	for {
		if s, ok := e.session(ctx, id, controller.ModePlan); ok && s.Agent != nil && s.Agent.State == api.AgentAPIError {
			limitedAt = s.Agent.Since
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the planner never stopped at the limit")
		case <-time.After(100 * time.Millisecond):
		}
	}
	e.waitTicks(ctx, 2)
	if d := e.decision(ctx, id); d.Action != controller.ActionSkip || !strings.Contains(d.Reason, "paused until") || !strings.Contains(d.Reason, "claude's usage limit") {
		t.Errorf("legion state while paused: %s (%s); want a skip saying until when", d.Action, d.Reason)
	}
	// A second issue of the same kind waits too.
	held := e.addIssue(ctx, "Wait for the limit")
	e.scriptAll(held)
	e.waitTicks(ctx, 2)
	if d := e.decision(ctx, held); d.Action != controller.ActionSkip || !strings.Contains(d.Reason, "paused until") {
		t.Errorf("a new planner while claude is paused: %s (%s); want it held", d.Action, d.Reason)
	}
	if _, ok := e.session(ctx, held, controller.ModePlan); ok {
		t.Errorf("%s's planner started while claude is paused", held)
	}
	if st, err := e.mgr.State(ctx, unit); err != nil || st.NRestarts != 0 || st.ActiveState != "active" {
		t.Errorf("%s while paused: %+v, %v; want active, no restart (the worker waits as it is)", unit, st, err)
	}

	// The pause ends; the same conversation goes on by itself.
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	assertCompleted(t, s)
	reqs := e.api.MessageRequests(sid)
	if len(reqs) < 2 {
		t.Fatalf("%d requests of the planner; want the limited one and the resumed ones", len(reqs))
	}
	if !strings.HasSuffix(strings.TrimSpace(reqs[1].LastUserText()), controller.ResumePrompt) {
		t.Errorf("the request after the pause has the user text %q; want it to end with Legion's resume prompt", reqs[1].LastUserText())
	}
	if wait := reqs[1].Time.Sub(limitedAt); wait < 55*time.Second || wait > 2*time.Minute {
		t.Errorf("the planner went on %s after the limit; want after the first backoff, a minute", wait)
	}
	if is := e.issue(ctx, id); len(legionComments(is)) != 0 || slices.Contains(is.Labels, controller.LabelInputNeeded) {
		t.Errorf("Legion escalated (comments %q, labels %v); want the limit waited out without a person", legionComments(is), is.Labels)
	}
	// The held issue is dispatched once the kind runs again.
	for {
		if _, ok := e.session(ctx, held, controller.ModePlan); ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s's planner never started after the pause", held)
		case <-time.After(200 * time.Millisecond):
		}
	}
	e.stopController()
	e.assertSessionScripted(sid)
}
