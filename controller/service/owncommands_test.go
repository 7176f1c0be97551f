package service_test

// Legion's own commands under the allowlist policy, with each real CLI:
// the tracker commands Legion's instructions name run with no person
// asked, in every form a model writes them. A CLI's own allow rules read
// text, so a variable ($LEGION_TEAM) defeats them and the CLI asks; the
// worker then decides the command in the permission hook (ptyworker's
// owncommand.go). The scripted model writes the commands itself: these
// are permission tests, not instruction-following ones.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/agent/gemini/geminitest"
	"github.com/legion-dev/legion/controller"
)

// ownForms are the commands of the planner's turns in these tests, in
// the forms a model writes them: variables bare, quoted and braced,
// literal ids, legion by name and by its path; the last one is the
// phase's worker-done.
func (e *env) ownForms(issue string) []string {
	return []string{
		`legion issue comment $LEGION_TEAM $LEGION_ISSUE "Plan: with variables"`,
		`legion issue comment ` + teamName + ` ` + issue + ` "Plan: with literal ids"`,
		e.bin + ` issue show "$LEGION_TEAM" "${LEGION_ISSUE}"`,
		`legion issue label "$LEGION_TEAM" "$LEGION_ISSUE" ` + controller.LabelWorkerDone,
	}
}

// heredocForm is a comment whose text is a here-document, as models
// write text of several lines (Claude Code's own instructions say so for
// commit messages): a command substitution, which every CLI but Gemini
// asks for.
const heredocForm = "legion issue comment $LEGION_TEAM $LEGION_ISSUE \"$(cat <<'EOF'\nPlan: in a here-document.\n1) one; 2) two\nEOF\n)\""

// legionInPath puts the legion binary's directory first in the PATH of
// the manager's environment, and of a login shell's ~/.profile (Codex
// runs its commands in one, whose /etc/profile resets PATH), as a user's
// install does, so that an agent may run it by name.
func (e *env) legionInPath() {
	e.t.Helper()
	dir := filepath.Dir(e.bin)
	if out, err := e.sd.Systemctl(e.t, "set-environment", "PATH="+dir+":"+os.Getenv("PATH")); err != nil {
		e.t.Fatalf("systemctl --user set-environment PATH: %v\n%s", err, out)
	}
	profile := filepath.Join(e.sd.Home, ".profile")
	if err := os.WriteFile(profile, []byte("PATH="+dir+":\"$PATH\"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// assertHeredocComment checks that heredocForm's comment is on issue,
// its text the here-document's body.
func (e *env) assertHeredocComment(ctx context.Context, issue string) {
	e.t.Helper()
	want := "Plan: in a here-document.\n1) one; 2) two"
	var got []string
	for _, c := range e.issue(ctx, issue).Comments {
		if c.Text == want {
			return
		}
		got = append(got, c.Text)
	}
	e.t.Errorf("no comment of %s is %q: %q", issue, want, got)
}

// assertOwnUnasked checks what ownForms did in issue's plan phase: both
// comments are on the issue, the phase completed, and no agent ever
// waited for a permission nor was anything escalated.
func (e *env) assertOwnUnasked(ctx context.Context, issue string) {
	e.t.Helper()
	is := e.issue(ctx, issue)
	var texts []string
	for _, c := range is.Comments {
		texts = append(texts, c.Text)
	}
	for _, want := range []string{"Plan: with variables", "Plan: with literal ids"} {
		if !slices.Contains(texts, want) {
			e.t.Errorf("comments of %s = %q; want one %q", issue, texts, want)
		}
	}
	if cs := legionComments(is); len(cs) > 0 || slices.Contains(is.Labels, controller.LabelInputNeeded) {
		e.t.Errorf("%s was escalated: labels %v, Legion's comments %q; want nothing asked", issue, is.Labels, cs)
	}
	if e.logged("agent state", "state=waiting_permission") {
		e.t.Errorf("an agent waited for a permission (the log has state=waiting_permission); want none")
	}
}

// TestClaudeOwnCommandsUnasked: under the default allowlist policy, the
// real Claude Code runs every form of ownForms without a person: the
// literal ones by its allow rules, those with a variable (which defeat
// its rules: it asks, FACTS F6a) by the worker's allow in the
// PermissionRequest hook, which the session file records as the hook's.
func TestClaudeOwnCommandsUnasked(t *testing.T) {
	e := startClaude(t, teamOptions{wipLimit: 1})
	e.legionInPath()
	ctx := claudeCtx(t, 3*time.Minute)
	id := e.addIssue(ctx, "Report in every form")
	forms := append([]string{heredocForm}, e.ownForms(id)...)
	var turns []anthropictest.Turn
	var ids []string
	for i, f := range forms {
		tid := toolID(id, controller.ModePlan, "own"+string(rune('a'+i)))
		ids = append(ids, tid)
		turns = append(turns, bash(tid, f))
	}
	e.script(id, controller.ModePlan, append(turns, say("Reported."))...)
	e.startController()
	sid := sessionID(id, controller.ModePlan)
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	e.stopController()
	assertCompleted(t, s)
	for _, tid := range ids {
		e.assertToolOK(sid, tid)
	}
	e.assertOwnUnasked(ctx, id)
	e.assertHeredocComment(ctx, id)
	e.assertSessionScripted(sid)

	// The forms with a variable were asked for, and the hook allowed them.
	sess := e.claudeSession(id, controller.ModePlan)
	for i, f := range forms {
		if !strings.Contains(f, "$") {
			continue
		}
		_, line, ok := sess.ToolResult(ids[i])
		if src := line.PermissionSource(); !ok || src != "hook" {
			t.Errorf("the permission of %q in the session file (result found %v): decided by %q; want the hook\n%s", f, ok, src, line.Raw)
		}
	}
}

// TestCodexOwnCommandsUnasked: under allowlist the real Codex runs its
// commands in its sandbox unasked (codex FACTS X23) unless the model asks
// to run one outside it, which asks a person through the PermissionRequest
// hook (X15). Here the model asks that for every form of ownForms: the
// worker allows each at once, nothing waits and nothing is escalated.
func TestCodexOwnCommandsUnasked(t *testing.T) {
	e, srv := startCodex(t, teamOptions{wipLimit: 1, extra: "agent.permissions_by_mode = { plan = \"allowlist\" }\n"})
	e.legionInPath()
	ctx := claudeCtx(t, 3*time.Minute)
	id := e.addIssue(ctx, "Report in every form")
	match := e.codexPhase(id, controller.ModePlan)[0].Match
	var turns []openaitest.Turn
	for _, f := range append([]string{heredocForm}, e.ownForms(id)...) {
		turns = append(turns, openaitest.Turn{Exec: f, Escalate: true, Match: match})
	}
	e.runOwnForms(ctx, srv, id, append(turns, openaitest.Turn{Text: "Reported.", Match: match}), assertCompletedAnyCode)
}

// functionOutputs are the outputs of the function calls a Responses API
// request's input carries (what each command answered), for a failure's
// log.
func functionOutputs(body []byte) []string {
	var req struct {
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var out []string
	for _, in := range req.Input {
		if in.Type == "function_call_output" {
			out = append(out, clip(string(in.Output), 400))
		}
	}
	return out
}

// TestOpencodeOwnCommandsUnasked: under allowlist the real opencode runs
// every form of ownForms with its bash tool unasked, by its own bash
// patterns ("legion issue *", …), which match the forms with variables
// too (opencode FACTS O25); and `'legion' issue show …`, which no
// pattern matches, so opencode asks (permission.asked, relayed by
// Legion's plugin as a PermissionRequest): the worker allows it at once
// and the plugin answers through opencode's API. With the worker's
// decision off that one waits for a person (waiting_permission).
func TestOpencodeOwnCommandsUnasked(t *testing.T) {
	e, srv := startOpencode(t, teamOptions{wipLimit: 1, extra: "agent.permissions_by_mode = { plan = \"allowlist\" }\n"})
	e.legionInPath()
	ctx := claudeCtx(t, 5*time.Minute)
	id := e.addIssue(ctx, "Report in every form")
	match := e.codexPhase(id, controller.ModePlan)[0].Match
	var turns []openaitest.Turn
	for _, f := range append([]string{`'legion' issue show $LEGION_TEAM $LEGION_ISSUE`, heredocForm}, e.ownForms(id)...) {
		b := openaitest.Bash(f)
		b.Match = match
		turns = append(turns, b)
	}
	e.runOwnForms(ctx, srv, id, append(turns, openaitest.Turn{Text: "Reported.", Match: match}), assertCompleted)
}

// runOwnForms runs issue's plan phase on srv's scripted turns (the forms
// of Legion's own commands, then a final text) and checks that it
// completed (as completed says), that nothing was asked, the
// here-document's comment is there and every turn was taken.
func (e *env) runOwnForms(ctx context.Context, srv *openaitest.Server, id string, turns []openaitest.Turn, completed func(testing.TB, api.Session)) {
	t := e.t
	t.Helper()
	srv.Script(turns...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range srv.Requests() {
				t.Logf("request %s: tool outputs %q", r.Time.Format("15:04:05.000"), functionOutputs(r.Body))
			}
		}
	})
	e.startController()
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	e.stopController()
	completed(t, s)
	e.assertOwnUnasked(ctx, id)
	e.assertHeredocComment(ctx, id)
	if left := srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted turns were never asked for: %+v", len(left), left)
	}
}

// TestGeminiOwnCommandsUnasked: under allowlist the real Gemini CLI runs
// every form of ownForms with run_shell_command unasked: its policy
// engine's command prefixes ("legion issue", …) match the command's text
// up to a blank or a quote, variables and all (gemini FACTS G28), so no
// approval dialog opens (the worker could answer one only by keys).
func TestGeminiOwnCommandsUnasked(t *testing.T) {
	e, srv := startGemini(t, teamOptions{wipLimit: 1, extra: "agent.permissions_by_mode = { plan = \"allowlist\" }\n"})
	e.legionInPath()
	ctx := claudeCtx(t, geminiWait)
	id := e.addIssue(ctx, "Report in every form")
	match := e.codexPhase(id, controller.ModePlan)[0].Match
	var turns []geminitest.Turn
	for _, f := range append([]string{`'legion' issue show $LEGION_TEAM $LEGION_ISSUE`}, e.ownForms(id)...) {
		turns = append(turns, geminitest.Turn{Shell: f, Match: match})
	}
	srv.Script(append(turns, geminitest.Turn{Text: "Reported.", Match: match})...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range srv.Requests() {
				t.Logf("request %s: tool results %q", r.Time.Format("15:04:05.000"), geminiResponses(r.Body))
			}
		}
	})
	e.startController()
	s := e.waitCompleted(ctx, id, controller.ModePlan)
	e.stopController()
	assertCompleted(t, s)
	e.assertOwnUnasked(ctx, id)
	assertGeminiScripted(t, srv)
}

// geminiResponses are the function responses of a Gemini API request's
// last content (what the last tool call answered), for a failure's log.
func geminiResponses(body []byte) []string {
	var req struct {
		Contents []struct {
			Parts []struct {
				FunctionResponse json.RawMessage `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Contents) == 0 {
		return nil
	}
	var out []string
	for _, p := range req.Contents[len(req.Contents)-1].Parts {
		if len(p.FunctionResponse) > 0 {
			out = append(out, clip(string(p.FunctionResponse), 500))
		}
	}
	return out
}
