package service_test

// End-to-end tests with the real Claude Code CLI (claudetest.Binary: the
// pinned version scripts/install-claude-code installs; skipped without it,
// failed with CI=true) as the team's agent, against a fake Anthropic API
// (anthropictest) that scripts each session's turns, under a private
// systemd user manager, driven by the real controller legion@demo and
// helper. The CLI gets the API's address and token from the manager's
// environment, as a user's agents would get theirs, never from argv.

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
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

// inPhase matches the requests of issue's phase mode (phaseMatch).
func inPhase(issue string, mode controller.Mode) func(*anthropictest.Request) bool {
	m := phaseMatch(issue, mode)
	return func(r *anthropictest.Request) bool { return m(r.Body) }
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

// claudeKind is the kinds' suite's driver of the real Claude Code CLI
// (startClaude), whose turns are scripted per agent session.
type claudeKind struct {
	e     *env
	stall *anthropictest.Stall // the stall step's, once scripted
	// stalledReq is the request the stall step's turn answered.
	stalledReq atomic.Pointer[anthropictest.Request]
}

func startClaudeKind(t *testing.T, o teamOptions) (*env, kindDriver) {
	e := startClaude(t, o)
	return e, &claudeKind{e: e}
}

func (k *claudeKind) script(issue string, mode controller.Mode, before ...step) {
	m := inPhase(issue, mode)
	var turns []anthropictest.Turn
	for _, s := range before {
		switch {
		case s.stall:
			k.stall = anthropictest.NewStall(4) // message_start, content_block_start, ping, one delta
			turns = append(turns, anthropictest.Turn{
				Blocks: []anthropictest.Block{anthropictest.Text(s.text)},
				Stall:  k.stall,
				Match: func(r *anthropictest.Request) bool {
					ok := m(r)
					if ok {
						k.stalledReq.CompareAndSwap(nil, r)
					}
					return ok
				},
			})
			continue
		case s.shell != "":
			turns = append(turns, bash(toolID(issue, mode, s.id), s.shell))
		default:
			turns = append(turns, say(s.text))
		}
		turns[len(turns)-1].Match = m
	}
	for _, t := range k.e.phaseTurns(issue, mode) {
		t.Match = m
		turns = append(turns, t)
	}
	k.e.api.Script(sessionID(issue, mode), turns...)
}

func (k *claudeKind) requests(issue string, mode controller.Mode) []modelRequest {
	m := inPhase(issue, mode)
	var out []modelRequest
	for _, r := range k.e.api.MessageRequests(sessionID(issue, mode)) {
		if m(r) {
			out = append(out, modelRequest{time: r.Time, body: r.Body, stalled: r == k.stalledReq.Load()})
		}
	}
	return out
}

// checkRestarted checks that the stream held after its first events,
// waits until the stalled CLI let go of it, and checks that this came
// stale_after at least after the stall: the CLI fires no hook and writes
// no session file while its stream hangs and its spinner redraws. (The
// other kinds' last sign of life may come before their stalled request,
// so the request's time bounds nothing for them: opencode's restart
// came 28.7 s after its stalled request under stale_after 30s.)
func (k *claudeKind) checkRestarted(ctx context.Context, stalled time.Time, staleAfter time.Duration) {
	select {
	case <-k.stall.Stalled():
	default:
		k.e.t.Errorf("the planner restarted but its stream never held")
	}
	select {
	case <-k.stall.Gone():
	case <-ctx.Done():
		k.e.t.Fatalf("the stalled CLI never let go of its stream: %v", ctx.Err())
	}
	if dt := time.Since(stalled); dt < staleAfter {
		k.e.t.Errorf("restarted %s after the stall; want stale_after (%s) at least", dt, staleAfter)
	}
}

func (k *claudeKind) assertScripted(issue string, only controller.Mode) {
	k.e.t.Helper()
	if only == "" {
		k.e.assertScripted()
		return
	}
	k.e.assertSessionScripted(sessionID(issue, only))
}

// completed is assertCompleted: exit code 0.
func (k *claudeKind) completed(t testing.TB, s api.Session) {
	t.Helper()
	assertCompleted(t, s)
}

func (k *claudeKind) resumeArgs(sid string) string { return "--resume " + sid }

// question: the planner asks with AskUserQuestion, with options; the
// escalation shows them; the person answers in words of their own (not
// an option, with a digit in it); the agent gets exactly those words, as
// the session file's answers and the API's tool_result show.
func (k *claudeKind) question(issue string) kindQuestion {
	e := k.e
	q := anthropictest.Question{
		Question: "Which format should the plan's notes use?", Header: "Format",
		Options: []anthropictest.Option{{Label: "Markdown", Description: "headings and lists"}, {Label: "Plain text", Description: "no markup"}},
	}
	ask := toolID(issue, controller.ModePlan, "ask")
	e.script(issue, controller.ModePlan, append([]anthropictest.Turn{use(anthropictest.AskUserQuestion(q).WithID(ask))},
		e.phaseTurns(issue, controller.ModePlan)...)...)
	answer := "Neither: reStructuredText, in 2 files"
	return kindQuestion{
		escalated: []string{q.Question, "Markdown", "Plain text"},
		state:     api.AgentWaitingAnswer,
		answer:    answer,
		logged:    []string{"respond: answer", "by=ana"},
		check: func() {
			t := e.t
			sid := sessionID(issue, controller.ModePlan)
			want := fmt.Sprintf("%q=%q", q.Question, answer)
			if _, res, ok := e.toolResultRequest(sid, ask); !ok || res.IsError || !strings.Contains(res.Content, want) {
				t.Errorf("the question's tool_result at the API: %+v (found %v); want no error and %s", res, ok, want)
			}
			block, line, ok := e.claudeSession(issue, controller.ModePlan).ToolResult(ask)
			if !ok {
				t.Fatalf("no tool_result of the question in the planner's session file")
			}
			if diff := cmp.Diff(map[string]string{q.Question: answer}, line.Answers()); diff != "" {
				t.Errorf("answers in the session file (-want +got):\n%s", diff)
			}
			if block.IsError || !strings.Contains(block.ResultText(), want) {
				t.Errorf("tool_result in the session file %q (is_error %v); want it to hold %s", block.ResultText(), block.IsError, want)
			}
		},
	}
}

// checkDenied: the approved command's tool_result is no error; the
// denied one's is an error whose text is the reason, at the API and in
// the session file.
func (k *claudeKind) checkDenied(issue string, ok, no step) {
	e, t := k.e, k.e.t
	sid := sessionID(issue, controller.ModePlan)
	okID, noID := toolID(issue, controller.ModePlan, ok.id), toolID(issue, controller.ModePlan, no.id)
	if _, res, found := e.toolResultRequest(sid, okID); !found || res.IsError {
		t.Errorf("the approved command's tool_result: %+v (found %v); want no error", res, found)
	}
	if _, res, found := e.toolResultRequest(sid, noID); !found || !res.IsError || res.Content != "not now" {
		t.Errorf("the denied command's tool_result: %+v (found %v); want is_error with the reason \"not now\"", res, found)
	}
	block, _, found := e.claudeSession(issue, controller.ModePlan).ToolResult(noID)
	if !found || !block.IsError || block.ResultText() != "not now" {
		t.Errorf("the denial in the session file: %+v (found %v); want an error result \"not now\"", block, found)
	}
}

// checkTodoToDone (issue 18, a and g): each phase's tools ran with no
// permission prompt under the default allowlist policy; each worker
// ended within seconds of its last tracker command; no start-up dialog
// showed in any new session; the retro is in the implementer's session
// file.
func (k *claudeKind) checkTodoToDone(ctx context.Context, id string) {
	e, t := k.e, k.e.t
	for _, m := range allModes {
		s := e.waitCompleted(ctx, id, m)
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
	// (g) No dialog at the start of any session: each one's first request
	// came with its prompt, and no transcript shows a dialog's text.
	for _, m := range []controller.Mode{controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeFinish} {
		reqs := e.api.MessageRequests(sessionID(id, m))
		if len(reqs) == 0 || !strings.Contains(reqs[0].FirstUserText(), phasePrompt(id, m)) {
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
