package scripted

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent/claude/claudecode"
)

// toolCall is one tool call of the current turn.
type toolCall struct {
	id, name string
	input    any
	start    time.Time
}

// startTool records a tool_use and fires PreToolUse.
func (a *agent) startTool(ctx context.Context, name string, input any) (*toolCall, error) {
	id, err := a.sess.toolUse(name, input)
	if err != nil {
		return nil, err
	}
	c := &toolCall{id: id, name: name, input: input, start: time.Now()}
	a.fire(ctx, EventPreToolUse, name, object{
		{"prompt_id", a.promptID}, {"permission_mode", a.policy.mode}, {"effort", effort},
		{"tool_name", name}, {"tool_input", input}, {"tool_use_id", id},
	})
	return c, nil
}

// endTool records the tool's result and fires PostToolUse with response
// (and postInput as its tool_input, nil for the call's own).
func (a *agent) endTool(ctx context.Context, c *toolCall, r toolResult, postInput, response any) error {
	if err := a.sess.toolResult(c.id, r); err != nil {
		return err
	}
	if postInput == nil {
		postInput = c.input
	}
	a.fire(ctx, EventPostToolUse, c.name, object{
		{"prompt_id", a.promptID}, {"permission_mode", a.policy.mode}, {"effort", effort},
		{"tool_name", c.name}, {"tool_input", postInput}, {"tool_response", response},
		{"tool_use_id", c.id}, {"duration_ms", time.Since(c.start).Milliseconds()},
	})
	return nil
}

// notifyLater fires the permission_prompt Notification after permNotify,
// as Claude Code does while a permission or question dialog is open (or
// its PermissionRequest hook still runs). The returned done stops the
// timer (waiting for a notification hook that is running); call it once
// the dialog is decided.
func (a *agent) notifyLater(ctx context.Context) (done func()) {
	decided := make(chan struct{})
	ended := make(chan struct{})
	delay, promptID := a.permNotify, a.promptID
	go func() { // ends at the decision, or after the notification
		defer close(ended)
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			a.fire(ctx, EventNotification, "permission_prompt", object{
				{"prompt_id", promptID}, {"message", "Claude needs your permission"}, {"notification_type", "permission_prompt"},
			})
		case <-decided:
		case <-ctx.Done():
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(decided) })
		<-ended
	}
}

// permissionRequest starts the PermissionRequest hooks of c; their
// decision (nil for none) arrives on the channel once they have ended,
// and then it is closed. Cancel ctx to kill them.
func (a *agent) permissionRequest(ctx context.Context, c *toolCall, suggestions any) <-chan *Decision {
	fields := object{
		{"prompt_id", a.promptID}, {"permission_mode", a.policy.mode}, {"effort", effort},
		{"tool_name", c.name}, {"tool_input", c.input},
	}
	if suggestions != nil {
		fields = append(fields, field{"permission_suggestions", suggestions})
	}
	ch := make(chan *Decision, 1)
	go func() { // ends with the hooks
		ch <- a.fire(ctx, EventPermissionRequest, c.name, fields)
		close(ch) // a receive after the decision was taken returns at once
	}()
	return ch
}

// Permission decisions as the session file records them.
var (
	acceptedByConfig = map[string]any{"decision": "accept", "source": "config"}
	acceptedByHook   = map[string]any{"decision": "accept", "source": "hook", "reasonType": "hook", "reasonCode": "hook:PermissionRequest"}
	acceptedOnce     = map[string]any{"decision": "accept", "source": "user_temporary", "grantScope": "once", "reasonCode": "unknown"}
	acceptedSession  = map[string]any{"decision": "accept", "source": "user_temporary", "grantScope": "session", "reasonCode": "unknown"}
	rejectedByHook   = map[string]any{"decision": "reject", "source": "hook", "reasonType": "hook", "reasonCode": "hook:PermissionRequest"}
	rejectedByConfig = map[string]any{"decision": "reject", "source": "config"}
	answeredByHook   = map[string]any{"decision": "accept", "source": "hook", "reasonType": "hook", "reasonCode": "unknown"}
)

// declined ends a tool call the person declined in its dialog (No, Esc):
// the rejected tool_result, then the interruption; the turn is over,
// without Stop (Claude Code fires no Stop for a turn the user
// interrupted).
func (a *agent) declined(c *toolCall) error {
	a.denied = true
	a.say("declined: %s", c.name)
	if err := a.sess.toolResult(c.id, rejected); err != nil {
		return err
	}
	if err := a.sess.interrupted(); err != nil {
		return err
	}
	return errTurnOver
}

// deniedBy ends a tool call a PermissionRequest hook or a rule denied:
// the agent is told message and its turn goes on.
func (a *agent) deniedBy(c *toolCall, message string, decision any) error {
	a.denied = true
	a.say("denied: %s", message)
	return a.sess.toolResult(c.id, toolResult{content: message, isError: true, useResult: "Error: " + message, denialKind: "permission-rule", permission: decision})
}

// bash is a Bash tool call checked against the permissions: allowed by a
// rule or the mode it runs; denied by a rule (or dontAsk) the agent is
// told; otherwise the permission dialog opens while PermissionRequest
// runs, and whichever decides first counts.
func (a *agent) bash(ctx context.Context, command string) error {
	input := map[string]string{"command": command, "description": "Run " + command}
	c, err := a.startTool(ctx, "Bash", input)
	if err != nil {
		return err
	}
	a.denied = false
	permission := acceptedByConfig
	switch a.policy.bash(command) {
	case verdictDeny:
		return a.deniedBy(c, fmt.Sprintf("Permission to use Bash with command %s has been denied.", command), rejectedByConfig)
	case verdictAsk:
		suggestions := []any{map[string]any{
			"type": "addRules", "rules": []any{map[string]string{"toolName": "Bash", "ruleContent": rulePrefix(command) + " *"}},
			"behavior": "allow", "destination": "localSettings",
		}}
		hookCtx, cancelHook := context.WithCancel(ctx)
		notified := a.notifyLater(ctx)
		hook := a.permissionRequest(hookCtx, c, suggestions)
		choice, d, err := a.permissionDialog(ctx, command, input["description"], hook)
		cancelHook()
		if choice != choiceHook {
			<-hook // killed: wait for its end
		}
		notified()
		if err != nil {
			return err
		}
		switch choice {
		case choiceHook:
			if d.Behavior == "deny" {
				if err := a.deniedBy(c, cmpOr(d.Message, "Permission to use Bash has been denied."), rejectedByHook); err != nil || !d.Interrupt {
					return err
				}
				if err := a.sess.interrupted(); err != nil {
					return err
				}
				return errTurnOver
			}
			a.say("allowed by the PermissionRequest hook")
			permission = acceptedByHook
		case choiceNo:
			return a.declined(c)
		case choiceAlways:
			a.say("allowed from now on: %s", a.policy.dontAskAgain(command))
			permission = acceptedSession
		default:
			permission = acceptedOnce
		}
	}
	return a.runBash(ctx, c, command, permission)
}

// runBash runs an allowed Bash command with sh -c, its output also on the
// terminal. A command that fails is a failed tool call (is_error, and
// PostToolUseFailure instead of PostToolUse); the turn goes on.
func (a *agent) runBash(ctx context.Context, c *toolCall, command string, permission any) error {
	var stdout, stderr strings.Builder
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = a.o.Cwd
	cmd.Env = a.o.Environ
	cmd.Stdout = io.MultiWriter(a.o.Stdout, &stdout)
	cmd.Stderr = io.MultiWriter(a.o.Stdout, &stderr)
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	out := strings.TrimRight(strings.Join(nonEmpty(stdout.String(), stderr.String()), "\n"), "\n")
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		return fmt.Errorf("bash %q: %w", command, runErr)
	}
	if runErr != nil {
		msg := fmt.Sprintf("Exit code %d", exit.ExitCode())
		if out != "" {
			msg += "\n" + out
		}
		if err := a.sess.toolResult(c.id, toolResult{content: msg, isError: true, useResult: "Error: " + msg, permission: permission}); err != nil {
			return err
		}
		a.fire(ctx, EventPostToolUseFailure, c.name, object{
			{"prompt_id", a.promptID}, {"permission_mode", a.policy.mode}, {"effort", effort},
			{"tool_name", c.name}, {"tool_input", c.input}, {"tool_use_id", c.id},
			{"error", msg}, {"is_interrupt", false},
		})
		return nil
	}
	content := out
	if content == "" {
		content = "(Bash completed with no output)"
	}
	response := bashResponse(stdout.String(), stderr.String())
	return a.endTool(ctx, c, toolResult{content: content, useResult: response, permission: permission}, nil, response)
}

// bashResponse is a Bash call's toolUseResult and PostToolUse
// tool_response.
func bashResponse(stdout, stderr string) map[string]any {
	return map[string]any{
		"stdout": strings.TrimRight(stdout, "\n"), "stderr": strings.TrimRight(stderr, "\n"),
		"interrupted": false, "isImage": false, "noOutputExpected": stdout == "" && stderr == "",
	}
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// runCmd runs a command in the working directory (argv, no shell, no
// permission check), its output on the terminal, recorded as a Bash tool
// call; a failure ends the agent with an error.
func (a *agent) runCmd(ctx context.Context, s step) error {
	argv := make([]string, len(s.words))
	for i, w := range s.words {
		argv[i] = a.expand(w)
	}
	input := map[string]string{"command": strings.Join(argv, " "), "description": "scripted run"}
	c, err := a.startTool(ctx, "Bash", input)
	if err != nil {
		return err
	}
	var out strings.Builder
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = a.o.Cwd
	cmd.Env = a.o.Environ
	cmd.Stdout = io.MultiWriter(a.o.Stdout, &out)
	cmd.Stderr = io.MultiWriter(a.o.Stdout, &out)
	runErr := cmd.Run()
	response := bashResponse(out.String(), "")
	if err := a.endTool(ctx, c, toolResult{content: out.String(), isError: runErr != nil, useResult: response, permission: acceptedByConfig}, nil, response); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("script line %d: run %s: %w", s.line, argv[0], runErr)
	}
	return nil
}

// work is a Bash tool call that appends a progress line every tick (the
// scripted agent's signs of life; Claude Code writes nothing while a tool
// runs).
func (a *agent) work(ctx context.Context, d time.Duration) error {
	c, err := a.startTool(ctx, "Bash", map[string]string{"command": "sleep " + d.String(), "description": "scripted work"})
	if err != nil {
		return err
	}
	start := time.Now()
	for n := 1; time.Since(start) < d; n++ {
		if err := sleep(ctx, min(a.tick, d-time.Since(start))); err != nil {
			return err
		}
		err := a.sess.progress(c.id, map[string]any{"type": "bash_progress", "output": fmt.Sprintf("working %d", n), "elapsedTimeSeconds": int(time.Since(start).Seconds())})
		if err != nil {
			return err
		}
	}
	response := bashResponse("work done", "")
	return a.endTool(ctx, c, toolResult{content: "work done", useResult: response, permission: acceptedByConfig}, nil, response)
}

// Texts of Claude Code's AskUserQuestion dialog.
const (
	askTypeSomething = "Type something."
	askChat          = "Chat about this"
	askFooter        = "Enter to select · ↑/↓ to navigate · Esc to cancel"
	askFooterMany    = "Enter to select · Tab/Arrow keys to navigate · Esc to cancel"
)

// ask is an AskUserQuestion tool call with Claude Code's dialog. The
// PermissionRequest hook runs first (keys typed meanwhile go to the
// prompt, and Enter submits them as a prompt queued for after the turn);
// a deny from it declines the call. Then the dialog, one question at a
// time (see terminal.menu): a digit picks an option at once, the digit of
// "Type something." then text then Enter answers with the text, Esc (or
// "Chat about this") declines the whole call and ends the turn. With
// several questions, a Submit step follows the last (1 or Enter submits,
// 2 or Esc declines). A PermissionRequest hook may answer meanwhile (allow
// with updatedInput: questions echoed back, answers by question text) or
// deny; an allow without updatedInput leaves the dialog to the keys.
func (a *agent) ask(ctx context.Context, s step) error {
	var questions []any
	var items []askItem
	for _, q := range s.questions {
		it := askItem{question: a.expand(q.text), header: q.header}
		labels := q.options
		if len(labels) == 0 {
			labels = []string{"Yes", "No"}
		}
		var options []any
		for _, l := range labels {
			l = a.expand(l)
			it.labels = append(it.labels, l)
			options = append(options, map[string]string{"label": l, "description": l})
		}
		items = append(items, it)
		questions = append(questions, map[string]any{"question": it.question, "header": it.header, "options": options, "multiSelect": false})
	}
	c, err := a.startTool(ctx, claudecode.AskUserQuestion, map[string]any{"questions": questions})
	if err != nil {
		return err
	}
	a.denied = false
	notified := a.notifyLater(ctx)
	defer notified()
	hookCtx, cancelHook := context.WithCancel(ctx)
	defer cancelHook()
	hook := make(chan *Decision, 1)
	go func(raw <-chan *Decision) { // ends with the hook (killed by cancelHook at the latest)
		d := <-raw
		if d != nil && d.Behavior == "allow" && d.UpdatedInput == nil {
			d = nil // an allow without updatedInput leaves the dialog waiting for keys
		}
		hook <- d
		close(hook)
	}(a.permissionRequest(hookCtx, c, nil))
	d, err := a.whileHookRuns(ctx, hook, time.After(dialogDelay))
	if err != nil {
		return err
	}
	answers := map[string]string{}
	typed := false
	for n := 0; d == nil && n < len(items); n++ {
		it := items[n]
		a.say("question: %s", it.question)
		footer := askFooter
		if len(items) > 1 {
			footer = askFooterMany
			a.term.printf("\n ←  %s  ✔ Submit  →\n", askTabs(items, n))
		}
		a.term.printf("\n ☐ %s\n\n %s\n\n", it.header, it.question)
		labels := append(append([]string(nil), it.labels...), askTypeSomething, askChat)
		r, err := a.term.menu(ctx, menu{labels: labels, footer: footer, textAt: len(it.labels)}, hook)
		switch {
		case err != nil:
			return err
		case r.decision != nil:
			d = r.decision
		case r.index >= 0 && r.index < len(it.labels):
			answers[it.question] = it.labels[r.index]
		case r.index == len(it.labels):
			answers[it.question], typed = r.text, true
		default: // Esc, or Chat about this
			notified()
			return a.declined(c)
		}
		if d == nil {
			a.answer = answers[it.question]
			a.say("answered: %s", a.answer)
		}
	}
	if d == nil && len(items) > 1 {
		a.term.printf("\n Review your answers\n\n Ready to submit your answers?\n")
		r, err := a.term.menu(ctx, menu{labels: []string{"Submit answers", "Cancel"}, footer: askFooterMany, textAt: -1}, hook)
		switch {
		case err != nil:
			return err
		case r.decision != nil:
			d = r.decision
		case r.index != 0:
			notified()
			return a.declined(c)
		}
	}
	cancelHook() // a held hook is killed once the dialog has decided
	notified()
	permission := acceptedOnce
	switch {
	case d != nil && d.Behavior == "deny":
		return a.deniedBy(c, cmpOr(d.Message, "The user declined to answer."), rejectedByHook)
	case d != nil && d.UpdatedInput.Questions == nil:
		// Claude Code validates the rewritten input: questions must be
		// echoed back.
		return a.deniedBy(c, "PermissionRequest hook for AskUserQuestion returned updatedInput that failed schema validation: AskUserQuestion failed due to the following issue:\nThe required parameter `questions` is missing\nThe tool input from the model was valid; the hook's rewrite of it was not.", rejectedByHook)
	case d != nil:
		answers, typed, permission = map[string]string{}, true, answeredByHook
		for q, ans := range d.UpdatedInput.Answers {
			answers[q] = ans
		}
		for _, it := range items {
			if ans, ok := answers[it.question]; ok {
				a.answer = ans
			}
		}
		a.say("answered by the PermissionRequest hook: %s", a.answer)
	}
	var pairs []string
	for _, it := range items {
		if ans, ok := answers[it.question]; ok { // a question the hook left out stays unanswered
			pairs = append(pairs, fmt.Sprintf(`"%s"="%s"`, it.question, ans))
		}
	}
	content := "Your questions have been answered: " + strings.Join(pairs, ", ") + ". You can now continue with these answers in mind."
	if typed {
		content = "The user answered: " + strings.Join(pairs, ", ") + ". Read the answers carefully — they may request clarification, changes, or that you not proceed — and follow what they actually say."
	}
	result := map[string]any{"questions": questions, "answers": answers, "annotations": map[string]any{}}
	return a.endTool(ctx, c, toolResult{content: content, useResult: result, permission: permission}, result, result)
}

// dialogDelay is how long a question's dialog takes to show after its
// PermissionRequest fired, if the hook has not returned by then: keys
// typed before still go to the prompt, as in Claude Code.
const dialogDelay = 300 * time.Millisecond

// askItem is one question of an ask step, expanded.
type askItem struct {
	question, header string
	labels           []string
}

// askTabs is the tab line of a form of several questions: ☒ for the
// answered ones, ☐ for the rest.
func askTabs(items []askItem, current int) string {
	var tabs []string
	for i, it := range items {
		box := "☐"
		if i < current {
			box = "☒"
		}
		tabs = append(tabs, box+" "+it.header)
	}
	return strings.Join(tabs, "  ")
}

// whileHookRuns waits for a PermissionRequest hook's decision, or until
// shown, while the prompt still has the keyboard, as in Claude Code before
// a question's dialog shows: keys are typed into the prompt, and Enter
// submits the line as a prompt (UserPromptSubmit at once) queued for
// after the turn. It returns nil when the hook ended without a decision
// or the dialog is shown first.
func (a *agent) whileHookRuns(ctx context.Context, hook <-chan *Decision, shown <-chan time.Time) (*Decision, error) {
	var buf []rune
	for {
		select {
		case d := <-hook:
			return d, nil
		case <-shown:
			return nil, nil
		case k, ok := <-a.term.input():
			if !ok {
				return nil, errTerminalClosed
			}
			var done bool
			if buf, done = a.term.edit(buf, k); !done || strings.TrimSpace(string(buf)) == "" {
				continue
			}
			prompt := strings.TrimSpace(string(buf))
			buf = nil
			a.say("queued prompt: %s", prompt)
			a.queued = append(a.queued, prompt)
			a.fire(ctx, EventUserPromptSubmit, "", object{{"prompt_id", uuid.NewString()}, {"permission_mode", a.policy.mode}, {"prompt", prompt}})
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func cmpOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// subagentTask is a subagent running in the background.
type subagentTask struct {
	id, description, agentType, toolUseID, promptID string
	transcriptPath                                  string
	lastText                                        string
}

// subagent is an Agent tool call, launched in the background as Claude
// Code does: SubagentStart, then the turn goes on while the subagent
// writes <session>/subagents/agent-<id>.jsonl every tick for d (the
// session file itself is quiet). At its end SubagentStop fires, and once
// the agent is at its prompt, a turn for the completion notice follows.
func (a *agent) subagent(ctx context.Context, d time.Duration) error {
	prompt := "scripted subagent for " + d.String()
	t := &subagentTask{
		id: "a" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16], description: "scripted subagent",
		agentType: "general-purpose", promptID: a.promptID,
	}
	input := map[string]string{"description": t.description, "prompt": prompt, "subagent_type": t.agentType}
	c, err := a.startTool(ctx, "Agent", input)
	if err != nil {
		return err
	}
	t.toolUseID = c.id
	meta := map[string]any{"agentType": t.agentType, "description": t.description, "toolUseId": c.id, "requestShape": "background"}
	sub, err := openSubagent(a.path, a.sess.sessionID, a.o.Cwd, t.id, meta)
	if err != nil {
		return err
	}
	t.transcriptPath = sub.path
	sub.promptID = a.promptID
	if err := sub.user(prompt); err != nil {
		sub.Close()
		return err
	}
	a.fire(ctx, EventSubagentStart, t.agentType, object{{"prompt_id", a.promptID}, {"agent_id", t.id}, {"agent_type", t.agentType}})
	a.bgMu.Lock()
	a.bgRun = append(a.bgRun, t)
	a.bgMu.Unlock()
	a.bgWG.Add(1)
	go a.runSubagent(ctx, t, sub, d, a.tick, a.policy.mode)
	response := map[string]any{
		"isAsync": true, "status": "async_launched", "agentId": t.id, "description": t.description,
		"resolvedModel": model, "prompt": prompt, "canReadOutputFile": false, "canContinueAgent": false,
	}
	launched := []any{textBlock{Type: "text", Text: "Async agent launched successfully.\nagentId: " + t.id}}
	return a.endTool(ctx, c, toolResult{content: launched, useResult: response, permission: acceptedByConfig}, nil, response)
}

// runSubagent is a subagent's goroutine: it ends after d, or when ctx
// ends (then without SubagentStop).
func (a *agent) runSubagent(ctx context.Context, t *subagentTask, sub *transcript, d, tick time.Duration, mode string) {
	defer a.bgWG.Done()
	defer sub.Close()
	start := time.Now()
	for n := 1; time.Since(start) < d; n++ {
		if sleep(ctx, min(tick, d-time.Since(start))) != nil {
			return
		}
		t.lastText = fmt.Sprintf("subagent step %d", n)
		if err := sub.assistant(textBlock{Type: "text", Text: t.lastText}); err != nil {
			a.say("subagent %s: %v", t.id, err)
			break
		}
	}
	t.lastText = "Subagent report: done."
	if err := sub.assistant(textBlock{Type: "text", Text: t.lastText}); err != nil {
		a.say("subagent %s: %v", t.id, err)
	}
	a.fire(ctx, EventSubagentStop, t.agentType, object{
		{"prompt_id", t.promptID}, {"permission_mode", mode}, {"agent_id", t.id}, {"agent_type", t.agentType},
		{"effort", effort}, {"stop_hook_active", false}, {"agent_transcript_path", t.transcriptPath},
		{"last_assistant_message", t.lastText}, {"background_tasks", a.backgroundTasks()}, {"session_crons", []any{}},
	})
	a.bgMu.Lock()
	for i, r := range a.bgRun {
		if r == t {
			a.bgRun = append(a.bgRun[:i], a.bgRun[i+1:]...)
			break
		}
	}
	a.bgDone = append(a.bgDone, t)
	a.bgMu.Unlock()
	select {
	case a.bgWake <- struct{}{}:
	default: // already signalled
	}
}

// backgroundTasks lists the running subagents as Stop's background_tasks.
func (a *agent) backgroundTasks() []any {
	a.bgMu.Lock()
	defer a.bgMu.Unlock()
	tasks := []any{}
	for _, t := range a.bgRun {
		tasks = append(tasks, map[string]string{"id": t.id, "type": "subagent", "status": "running", "description": t.description, "agent_type": t.agentType})
	}
	return tasks
}

// subagentsDone runs, for each finished subagent, the turn its completion
// notice starts (UserPromptSubmit with the notice, a short reply, Stop).
func (a *agent) subagentsDone(ctx context.Context) error {
	a.bgMu.Lock()
	done := a.bgDone
	a.bgDone = nil
	a.bgMu.Unlock()
	for _, t := range done {
		notice := fmt.Sprintf("<task-notification>\n<task-id>%s</task-id>\n<tool-use-id>%s</tool-use-id>\n<status>completed</status>\n<summary>Agent \"%s\" finished</summary>\n<result>%s</result>\n</task-notification>",
			t.id, t.toolUseID, t.description, t.lastText)
		a.term.printf("\n")
		a.say("subagent %s finished", t.id)
		a.begin(notice)
		if err := a.sess.user(notice); err != nil {
			return err
		}
		a.fire(ctx, EventUserPromptSubmit, "", object{{"prompt_id", a.promptID}, {"permission_mode", a.policy.mode}, {"prompt", notice}})
		a.lastText = "Subagent done."
		if err := a.sess.assistant(textBlock{Type: "text", Text: a.lastText}); err != nil {
			return err
		}
		if err := a.stop(ctx); err != nil {
			return err
		}
	}
	return nil
}

// apiErrorKinds are the error types of StopFailure.
var apiErrorKinds = []string{"rate_limit", "authentication_failed", "billing_error", "invalid_request", "server_error", "max_output_tokens", "unknown"}

// apiErrors are, by error type, the default text of an apierror step (as
// Claude Code 2.1.330 shows it) and the HTTP status and API error type
// its session line records.
var apiErrors = map[string]struct {
	text    string
	status  int
	apiType string
}{
	"rate_limit":            {"API Error: Request rejected (429) · This request would exceed the rate limit for your organization of 50 requests per minute.", 429, "rate_limit_error"},
	"authentication_failed": {"Not logged in · Please run /login", 401, "authentication_error"},
	"billing_error":         {"API Error: Credit balance is too low", 400, "invalid_request_error"},
	"invalid_request":       {"API Error: 400 Invalid request", 400, "invalid_request_error"},
	"server_error":          {"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.", 529, "overloaded_error"},
	"max_output_tokens":     {"API Error: Claude's response exceeded the output token maximum for this request.", 0, ""},
	"unknown":               {"API Error: Unknown error", 0, ""},
}

// apiError ends the turn as a failed API call does in Claude Code (after
// its retries): its synthetic error message (text, else the kind's
// default), then StopFailure instead of Stop; the agent then waits at its
// prompt.
func (a *agent) apiError(ctx context.Context, kind, text string) error {
	e := apiErrors[kind]
	text = cmpOr(text, e.text)
	if err := a.sess.apiError(kind, text, e.status, e.apiType); err != nil {
		return err
	}
	a.lastText = text
	a.say("turn failed: %s", text)
	a.fire(ctx, EventStopFailure, kind, object{
		{"prompt_id", a.promptID}, {"effort", effort}, {"error", kind}, {"last_assistant_message", text},
	})
	return errTurnOver
}
