package scripted

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/internal/waitfor"
)

// TestTurnsAtThePrompt: a turn ends with Stop and the agent waits at its
// prompt; a typed line is the next prompt (conditions apply to it); /exit
// ends it with SessionEnd prompt_input_exit; a resume starts with
// SessionStart resume.
func TestTurnsAtThePrompt(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	settings := w.settings(t, "", nil)
	script := "say reply to $PROMPT\nif-prompt second say second seen\nonce say only once"
	p := w.start(t, script, "--settings", settings, "--session-id", id.String(), "first")

	stop := w.waitEvent(t, EventStop, 1)[0]
	if stop["last_assistant_message"] != "only once" || stop["stop_hook_active"] != false {
		t.Errorf("first Stop = %v; want last_assistant_message %q", stop, "only once")
	}
	p.waitOutput(t, "\n> ", 1)
	if !p.running() {
		t.Fatal("the agent exited at the end of its turn; want it at its prompt")
	}
	p.send(t, "sec\x7fcond\r")
	if stop := w.waitEvent(t, EventStop, 2)[1]; stop["last_assistant_message"] != "second seen" {
		t.Errorf("second Stop last_assistant_message = %v; want %q", stop["last_assistant_message"], "second seen")
	}
	p.waitOutput(t, "\n> ", 2)
	p.send(t, exitCommand+"\r")
	if code := p.exitCode(t); code != 0 {
		t.Errorf("exit code after /exit = %d; want 0", code)
	}

	evs := w.events(t)
	want := []string{EventSessionStart, EventUserPromptSubmit, EventStop, EventUserPromptSubmit, EventStop, EventSessionEnd}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Errorf("hook events mismatch (-want +got):\n%s", diff)
	}
	path := w.sessionFile(id)
	for _, e := range evs {
		if e["session_id"] != id.String() || e["transcript_path"] != path || e["cwd"] != w.cwd {
			t.Errorf("payload %v: want session_id, transcript_path and cwd of the session", e)
		}
	}
	if src := evs[0]["source"]; src != "startup" {
		t.Errorf("SessionStart source = %v; want startup", src)
	}
	if prompts := []any{evs[1]["prompt"], evs[3]["prompt"]}; !cmp.Equal(prompts, []any{"first", "second"}) {
		t.Errorf("UserPromptSubmit prompts = %v; want first, second", prompts)
	}
	if r := evs[5]["reason"]; r != "prompt_input_exit" {
		t.Errorf("SessionEnd reason = %v; want prompt_input_exit", r)
	}
	if got := userTexts(t, path); !cmp.Equal(got, []string{"first", "second"}) {
		t.Errorf("prompts in the session file = %q; want first, second", got)
	}
	turns := 0
	for _, l := range readSession(t, path) {
		if l["subtype"] == "turn_duration" {
			turns++
		}
	}
	if turns != 2 {
		t.Errorf("session file has %d turn_duration lines; want 2", turns)
	}

	// Resumed without a terminal: the turn runs, then the end of the input
	// ends the agent (exit 0, SessionEnd other).
	out, code := w.run(t, script, "--settings", settings, "--resume", id.String(), "third")
	if code != 0 || strings.Contains(out, "only once") {
		t.Errorf("resume = %d, output:\n%s\nwant 0 and no second once-step", code, out)
	}
	evs = w.events(t)[len(want):]
	if names := eventNames(evs); !cmp.Equal(names, []string{EventSessionStart, EventUserPromptSubmit, EventStop, EventSessionEnd}) ||
		evs[0]["source"] != "resume" || evs[3]["reason"] != "other" {
		t.Errorf("resumed run's events = %v; want SessionStart resume … SessionEnd other", evs)
	}
}

// TestNoPromptWaits: with no prompt the agent waits at its prompt and
// writes no session file until one is typed, as Claude Code.
func TestNoPromptWaits(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	p := w.start(t, "say hi $PROMPT", "--settings", w.settings(t, "", nil), "--session-id", id.String())
	w.waitEvent(t, EventSessionStart, 1)
	p.waitOutput(t, "> ", 1)
	if _, err := os.Stat(w.sessionFile(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("session file before a prompt: %v; want none", err)
	}
	p.send(t, "hello\r")
	if stop := w.waitEvent(t, EventStop, 1)[0]; stop["last_assistant_message"] != "hi hello" {
		t.Errorf("Stop = %v; want last_assistant_message %q", stop, "hi hello")
	}
}

// TestSignals: SIGINT ends the agent with 0 at once, even mid-turn;
// SIGTERM with 143 and SIGHUP with 129, as Claude Code; each fires
// SessionEnd with reason other.
func TestSignals(t *testing.T) {
	tests := []struct {
		sig    syscall.Signal
		script string
		wait   string
		want   int
	}{
		{syscall.SIGINT, "say hi\nhang", "step 2: hang", 0},
		{syscall.SIGINT, "say hi", "turn ended", 0},
		{syscall.SIGTERM, "say hi", "turn ended", 143},
		{syscall.SIGTERM, "hang", "step 1: hang", 143},
		{syscall.SIGHUP, "say hi", "turn ended", 129},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v %s", tt.sig, tt.wait), func(t *testing.T) {
			w := newWorld(t)
			p := w.start(t, tt.script, "--settings", w.settings(t, "", nil), "go")
			p.waitOutput(t, tt.wait, 1)
			p.signal(t, tt.sig)
			if code := p.exitCode(t); code != tt.want {
				t.Errorf("exit code after %v = %d; want %d", tt.sig, code, tt.want)
			}
			if ends := named(w.events(t), EventSessionEnd); len(ends) != 1 || ends[0]["reason"] != "other" {
				t.Errorf("SessionEnd payloads = %v; want one with reason other", ends)
			}
		})
	}
}

// TestBashPermissions: a bash step runs when a rule, --allowedTools or the
// mode allows it; is denied by dontAsk; otherwise PermissionRequest's
// decision or the dialog decides, as in Claude Code.
func TestBashPermissions(t *testing.T) {
	const script = "permission-notify 50ms\nif-prompt go bash touch made\nif-denied say was denied\nif-allowed say was allowed"
	tests := []struct {
		name   string
		args   []string
		perms  map[string]any
		decide string
		keys   string // typed once the dialog shows; "" for no dialog
		// What happened: the command ran, the tool_result's content (a
		// prefix), its toolDenialKind, permissionDecision source, and
		// whether the turn ended with Stop.
		ran        bool
		content    string
		denialKind string
		source     string
		stop       bool
	}{
		{name: "allow rule", perms: map[string]any{"allow": []string{"Bash(touch:*)"}}, ran: true, content: "(Bash completed with no output)", source: "config", stop: true},
		{name: "exact rule", perms: map[string]any{"allow": []string{"Bash(touch made)"}}, ran: true, content: "(Bash completed", source: "config", stop: true},
		{name: "allowedTools", args: []string{"--allowedTools", "Bash(touch:*)", "--"}, ran: true, content: "(Bash completed", source: "config", stop: true},
		{name: "bypass", args: []string{"--permission-mode", "bypassPermissions"}, ran: true, content: "(Bash completed", source: "config", stop: true},
		{name: "dontAsk", args: []string{"--permission-mode", "dontAsk"}, content: "Permission to use Bash with command touch made has been denied.", denialKind: "permission-rule", source: "config", stop: true},
		{name: "deny rule", perms: map[string]any{"allow": []string{"Bash"}, "deny": []string{"Bash(touch:*)"}}, content: "Permission to use Bash", denialKind: "permission-rule", source: "config", stop: true},
		{name: "hook allows", decide: decideAllow, ran: true, content: "(Bash completed", source: "hook", stop: true},
		{name: "hook denies", decide: decideDeny, content: "no: reason", denialKind: "permission-rule", source: "hook", stop: true},
		{name: "dialog yes", decide: decideNone, keys: "1", ran: true, content: "(Bash completed", source: "user_temporary", stop: true},
		{name: "dialog enter", decide: decideNone, keys: "\r", ran: true, content: "(Bash completed", source: "user_temporary", stop: true},
		{name: "dialog no", decide: decideNone, keys: "4", content: rejectedContent, denialKind: "user-rejected"},
		{name: "dialog esc", keys: "\x1b", content: rejectedContent, denialKind: "user-rejected"},
		{name: "dialog while the hook holds", decide: "hold", keys: "1", ran: true, content: "(Bash completed", source: "user_temporary", stop: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			id := uuid.New()
			decide := tt.decide
			if decide == "hold" {
				decide = w.holdHook()
			}
			args := append([]string{"--settings", w.settings(t, decide, tt.perms), "--session-id", id.String()}, tt.args...)
			p := w.start(t, script, append(args, "go")...)
			if tt.keys != "" {
				p.waitOutput(t, permissionFooter, 1)
				w.waitEvent(t, EventPermissionRequest, 1)
				w.waitEvent(t, EventNotification, 1) // permission_prompt, after 50ms
				p.send(t, tt.keys)
			}
			if tt.stop {
				w.waitEvent(t, EventStop, 1)
			} else {
				p.waitOutput(t, "declined: Bash", 1)
				p.waitOutput(t, "\n> ", 1)
			}
			evs := w.events(t)
			if _, err := os.Stat(filepath.Join(w.cwd, "made")); (err == nil) != tt.ran {
				t.Errorf("the command ran: %v; want %v", err == nil, tt.ran)
			}
			results := toolResults(t, w.sessionFile(id))
			if len(results) != 1 {
				t.Fatalf("%d tool results; want 1", len(results))
			}
			r, b := results[0], resultBlock(results[0])
			if content := fmt.Sprint(b["content"]); !strings.HasPrefix(content, tt.content) {
				t.Errorf("tool_result content = %q; want it to start with %q", content, tt.content)
			}
			if got := b["is_error"] == true; got != !tt.ran {
				t.Errorf("tool_result is_error = %v; want %v", got, !tt.ran)
			}
			if r["toolDenialKind"] != nil && r["toolDenialKind"] != tt.denialKind || r["toolDenialKind"] == nil && tt.denialKind != "" {
				t.Errorf("toolDenialKind = %v; want %q", r["toolDenialKind"], tt.denialKind)
			}
			if pd, _ := r["permissionDecision"].(map[string]any); tt.source != "" && (pd == nil || pd["source"] != tt.source) {
				t.Errorf("permissionDecision = %v; want source %q", r["permissionDecision"], tt.source)
			}
			asked := tt.decide != "" || tt.keys != ""
			if n := len(named(evs, EventPermissionRequest)); n != map[bool]int{true: 1, false: 0}[asked] {
				t.Errorf("%d PermissionRequest hooks; want asked = %v", n, asked)
			} else if asked {
				pr := named(evs, EventPermissionRequest)[0]
				if in, _ := pr["tool_input"].(map[string]any); pr["tool_name"] != "Bash" || in["command"] != "touch made" || pr["tool_use_id"] != nil {
					t.Errorf("PermissionRequest = %v; want Bash touch made, no tool_use_id", pr)
				}
			}
			if n := len(named(evs, EventPostToolUse)); n != map[bool]int{true: 1, false: 0}[tt.ran] {
				t.Errorf("%d PostToolUse hooks; want one if the command ran (%v)", n, tt.ran)
			}
			if !tt.stop {
				if texts := userTexts(t, w.sessionFile(id)); !slices.Contains(texts, interruptedText) {
					t.Errorf("user lines %q lack %q", texts, interruptedText)
				}
				// No Stop after a declined dialog; the next line is a prompt.
				p.send(t, "do it differently\r")
				w.waitEvent(t, EventStop, 1)
				ups := named(w.events(t), EventUserPromptSubmit)
				if len(named(evs, EventStop)) != 0 || len(ups) != 2 || ups[1]["prompt"] != "do it differently" {
					t.Errorf("events after the declined call = %v; want no Stop before the next prompt", eventNames(w.events(t)))
				}
			} else if last := named(evs, EventStop)[0]["last_assistant_message"]; last != map[bool]string{true: "was allowed", false: "was denied"}[tt.ran] {
				t.Errorf("Stop last_assistant_message = %v; want the if-denied/if-allowed step's text", last)
			}
		})
	}
}

// TestBashDontAskAgain: the dialog's second option allows the command's
// kind for the rest of the session.
func TestBashDontAskAgain(t *testing.T) {
	w := newWorld(t)
	p := w.start(t, "bash touch a\nbash touch b\nbash false", "--settings", w.settings(t, "", nil), "go")
	p.waitOutput(t, permissionFooter, 1)
	w.waitEvent(t, EventPermissionRequest, 1)
	p.send(t, "2")
	p.waitOutput(t, permissionFooter, 2) // false: another kind of command
	w.waitEvent(t, EventPermissionRequest, 2)
	p.send(t, "1")
	w.waitEvent(t, EventStop, 1)
	for _, f := range []string{"a", "b"} {
		if _, err := os.Stat(filepath.Join(w.cwd, f)); err != nil {
			t.Errorf("touch %s did not run: %v", f, err)
		}
	}
	evs := w.events(t)
	if n := len(named(evs, EventPermissionRequest)); n != 2 {
		t.Errorf("%d PermissionRequest hooks; want 2 (touch a, false)", n)
	}
	if f := named(evs, EventPostToolUseFailure); len(f) != 1 || !strings.HasPrefix(fmt.Sprint(f[0]["error"]), "Exit code 1") {
		t.Errorf("PostToolUseFailure = %v; want one for false with its exit code", f)
	}
}

// TestAskUserQuestion: the question dialog reads keys as Claude Code's
// does, including its trap: typed text + Enter records option 1.
func TestAskUserQuestion(t *testing.T) {
	const question = "Which database?"
	tests := []struct {
		name    string
		keys    []string // each sent after the last showed its effect
		answer  string   // "" for declined
		content string
	}{
		{"digit", []string{"2"}, "SQLite", `Your questions have been answered: "Which database?"="SQLite". You can now continue with these answers in mind.`},
		{"arrow and enter", []string{"\x1b[B", "\r"}, "SQLite", `Your questions have been answered: "Which database?"="SQLite"`},
		{"type something", []string{"3", "my own answer, with 1 digit\r"}, "my own answer, with 1 digit",
			`The user answered: "Which database?"="my own answer, with 1 digit". Read the answers carefully — they may request clarification, changes, or that you not proceed — and follow what they actually say.`},
		{"text and enter records option 1", []string{"SQLite\r"}, "Postgres", `Your questions have been answered: "Which database?"="Postgres"`},
		{"digit and text in one write record option 1", []string{"3one write answer\r"}, "Postgres", `Your questions have been answered: "Which database?"="Postgres"`},
		{"esc", []string{"\x1b"}, "", rejectedContent},
		{"chat about this", []string{"4"}, "", rejectedContent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			id := uuid.New()
			path := w.sessionFile(id)
			p := w.start(t, "permission-notify 50ms\nif-prompt pick ask "+question+" | Postgres | SQLite\nsay got $ANSWER",
				"--settings", w.settings(t, decideNone, nil), "--session-id", id.String(), "pick")
			p.waitOutput(t, askFooter, 1)
			q, waiting, err := claudecode.PendingQuestion(path)
			if err != nil || !waiting || q.Text() != question || len(q.Questions[0].Options) != 2 {
				t.Fatalf("PendingQuestion while asking = %+v, %v, %v; want waiting on %q with 2 options", q, waiting, err, question)
			}
			for _, want := range []string{"1. Postgres", "2. SQLite", "3. " + askTypeSomething, "4. " + askChat} {
				if !strings.Contains(p.out.String(), want) {
					t.Errorf("dialog lacks %q", want)
				}
			}
			pr := w.waitEvent(t, EventPermissionRequest, 1)[0]
			if pr["tool_name"] != claudecode.AskUserQuestion || pr["permission_suggestions"] != nil {
				t.Errorf("PermissionRequest = %v; want AskUserQuestion without permission_suggestions", pr)
			}
			w.waitEvent(t, EventNotification, 1)
			for i, k := range tt.keys {
				p.send(t, k)
				if i < len(tt.keys)-1 {
					p.waitOutput(t, askFooter, 2) // redrawn
				}
			}
			if tt.answer == "" {
				p.waitOutput(t, "declined: AskUserQuestion", 1)
				p.send(t, "free text after esc\r")
			}
			stop := w.waitEvent(t, EventStop, 1)[0]
			if _, waiting, err := claudecode.PendingQuestion(path); err != nil || waiting {
				t.Errorf("PendingQuestion after the dialog = %v, %v; want not waiting", waiting, err)
			}
			r := toolResults(t, path)[0]
			if content := fmt.Sprint(resultBlock(r)["content"]); !strings.HasPrefix(content, tt.content) {
				t.Errorf("tool_result content = %q; want it to start with %q", content, tt.content)
			}
			if tt.answer == "" {
				if r["toolUseResult"] != rejectedResult || r["toolDenialKind"] != "user-rejected" {
					t.Errorf("declined tool result = %v", r)
				}
				texts := userTexts(t, path)
				if want := []string{"pick", interruptedText, "free text after esc"}; !cmp.Equal(texts, want) {
					t.Errorf("user lines = %q; want %q", texts, want)
				}
				ups := named(w.events(t), EventUserPromptSubmit)
				if len(ups) != 2 || ups[1]["prompt"] != "free text after esc" {
					t.Errorf("UserPromptSubmit payloads = %v; want the text after Esc as a prompt", ups)
				}
				return
			}
			answers := r["toolUseResult"].(map[string]any)["answers"]
			if !cmp.Equal(answers, map[string]any{question: tt.answer}) {
				t.Errorf("toolUseResult.answers = %v; want %q", answers, tt.answer)
			}
			post := named(w.events(t), EventPostToolUse)
			if len(post) != 1 || !cmp.Equal(post[0]["tool_input"].(map[string]any)["answers"], answers) ||
				!cmp.Equal(post[0]["tool_response"].(map[string]any)["answers"], answers) {
				t.Errorf("PostToolUse = %v; want the answers in tool_input and tool_response", post)
			}
			if stop["last_assistant_message"] != "got "+tt.answer {
				t.Errorf("Stop last_assistant_message = %v; want %q", stop["last_assistant_message"], "got "+tt.answer)
			}
		})
	}
}

// TestAskKeysBeforeTheDialog: keys typed while the question's
// PermissionRequest hook runs go to the prompt, as in Claude Code; Enter
// submits them as a queued prompt while the question stays open.
func TestAskKeysBeforeTheDialog(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	p := w.start(t, "if-prompt go ask Size? | S | L\nsay got $ANSWER for $PROMPT", "--settings", w.settings(t, w.holdHook(), nil), "--session-id", id.String(), "go")
	w.waitEvent(t, EventPermissionRequest, 1)
	p.send(t, "3size typed\r")
	if up := w.waitEvent(t, EventUserPromptSubmit, 2)[1]; up["prompt"] != "3size typed" {
		t.Errorf("UserPromptSubmit = %v; want the typed keys as a prompt", up)
	}
	if err := os.WriteFile(w.gate(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p.waitOutput(t, askFooter, 1)
	p.send(t, "1")
	stops := w.waitEvent(t, EventStop, 2)
	if got := []any{stops[0]["last_assistant_message"], stops[1]["last_assistant_message"]}; !cmp.Equal(got, []any{"got S for go", "got S for 3size typed"}) {
		t.Errorf("Stop messages = %v; want the question answered with S, then the queued prompt's turn", got)
	}
	if n := len(named(w.events(t), EventUserPromptSubmit)); n != 2 {
		t.Errorf("%d UserPromptSubmit hooks; want 2 (the queued prompt is not announced twice)", n)
	}
}

// TestAskAnsweredByHook: a held PermissionRequest hook answers the
// questions with allow and updatedInput.answers while the dialog is open;
// the dialog closes and the answers are recorded as typed text.
func TestAskAnsweredByHook(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	p := w.start(t, "ask Size? | S | L ;; Day? | Mon | Tue\nsay got $ANSWER", "--settings", w.settings(t, w.holdHook(), nil), "--session-id", id.String(), "go")
	p.waitOutput(t, askFooterMany, 1)
	decision := `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":{"questions":[{"question":"Size?"},{"question":"Day?"}],"answers":{"Size?":"tiny, really","Day?":"Mon"}}}}}`
	tmp := w.gate() + ".tmp"
	if err := os.WriteFile(tmp, []byte(decision), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, w.gate()); err != nil {
		t.Fatal(err)
	}
	if stop := w.waitEvent(t, EventStop, 1)[0]; stop["last_assistant_message"] != "got Mon" {
		t.Errorf("Stop = %v; want the last answer in $ANSWER", stop)
	}
	r := toolResults(t, w.sessionFile(id))[0]
	if c := fmt.Sprint(resultBlock(r)["content"]); !strings.HasPrefix(c, `The user answered: "Size?"="tiny, really", "Day?"="Mon". Read the answers carefully`) {
		t.Errorf("tool_result content = %q", c)
	}
	if pd := r["permissionDecision"].(map[string]any); pd["source"] != "hook" || pd["decision"] != "accept" {
		t.Errorf("permissionDecision = %v; want accepted by the hook", pd)
	}
}

// TestAskHookEdgeCases: as Claude Code (FACTS F3k), an allow without
// updatedInput leaves the dialog to the keys, and updatedInput without
// questions is denied by its schema check (the turn goes on).
func TestAskHookEdgeCases(t *testing.T) {
	for _, tt := range []struct {
		name, decision, content string
		keys                    string
	}{
		{"allow alone", `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`, `Your questions have been answered: "Size?"="L"`, "2"},
		{"answers without questions", `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":{"answers":{"Size?":"L"}}}}}`, "PermissionRequest hook for AskUserQuestion returned updatedInput that failed schema validation", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			id := uuid.New()
			decide := fmt.Sprintf("cat >/dev/null; echo '%s'", tt.decision)
			p := w.start(t, "if-prompt go ask Size? | S | L\nsay after", "--settings", w.settings(t, decide, nil), "--session-id", id.String(), "go")
			if tt.keys != "" {
				p.waitOutput(t, askFooter, 1)
				w.waitEvent(t, EventPermissionRequest, 1)
				p.send(t, tt.keys)
			}
			w.waitEvent(t, EventStop, 1)
			r := toolResults(t, w.sessionFile(id))[0]
			if c := fmt.Sprint(resultBlock(r)["content"]); !strings.HasPrefix(c, tt.content) {
				t.Errorf("tool_result content = %q; want it to start with %q", c, tt.content)
			}
		})
	}
}

// TestAskSeveralQuestions: a form of two questions, one answered by digit,
// one by text, then submitted.
func TestAskSeveralQuestions(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	p := w.start(t, "ask Size? | S | L ;; Day? | Mon | Tue", "--settings", w.settings(t, "", nil), "--session-id", id.String(), "go")
	p.waitOutput(t, askFooterMany, 1)
	p.send(t, "2")
	p.waitOutput(t, "answered: L", 1) // keys in one write would be a paste
	p.send(t, "3")
	p.waitOutput(t, askFooterMany, 3)
	p.send(t, "Thursday\r")
	p.waitOutput(t, "Ready to submit your answers?", 1)
	p.send(t, "1")
	w.waitEvent(t, EventStop, 1)
	r := toolResults(t, w.sessionFile(id))[0]
	if want := map[string]any{"Size?": "L", "Day?": "Thursday"}; !cmp.Equal(r["toolUseResult"].(map[string]any)["answers"], want) {
		t.Errorf("answers = %v; want %v", r["toolUseResult"], want)
	}
	if c := fmt.Sprint(resultBlock(r)["content"]); !strings.HasPrefix(c, `The user answered: "Size?"="L", "Day?"="Thursday".`) {
		t.Errorf("tool_result content = %q", c)
	}
}

// TestSubagentInBackground: the Agent call returns at once, the turn ends
// with the subagent in background_tasks, SubagentStop fires at its end,
// and its completion notice starts a turn that ends with none.
func TestSubagentInBackground(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	w.start(t, "tick 20ms\nsubagent 300ms\nsay launched", "--settings", w.settings(t, "", nil), "--session-id", id.String(), "go")
	stops := w.waitEvent(t, EventStop, 2)
	evs := w.events(t)
	want := []string{
		EventSessionStart, EventUserPromptSubmit, EventPreToolUse, EventSubagentStart, EventPostToolUse, EventStop,
		EventSubagentStop, EventUserPromptSubmit, EventStop,
	}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Errorf("hook events mismatch (-want +got):\n%s", diff)
	}
	tasks := stops[0]["background_tasks"].([]any)
	if len(tasks) != 1 || stops[0]["last_assistant_message"] != "launched" {
		t.Fatalf("first Stop = %v; want one background task", stops[0])
	}
	task := tasks[0].(map[string]any)
	if len(stops[1]["background_tasks"].([]any)) != 0 || stops[1]["last_assistant_message"] != "Subagent done." {
		t.Errorf("second Stop = %v; want no background task", stops[1])
	}
	start, stop := named(evs, EventSubagentStart)[0], named(evs, EventSubagentStop)[0]
	if start["agent_id"] != task["id"] || stop["agent_id"] != task["id"] || task["status"] != "running" || task["type"] != "subagent" {
		t.Errorf("SubagentStart %v, SubagentStop %v, task %v: want the same agent", start, stop, task)
	}
	transcript := fmt.Sprint(stop["agent_transcript_path"])
	if filepath.Dir(transcript) != claudecode.SubagentDir(w.sessionFile(id)) || len(readSession(t, transcript)) < 2 {
		t.Errorf("agent_transcript_path %s: want a subagent file with lines", transcript)
	}
	if up := named(evs, EventUserPromptSubmit)[1]["prompt"]; !strings.HasPrefix(fmt.Sprint(up), "<task-notification>") {
		t.Errorf("second prompt = %v; want the task notification", up)
	}
	if pre := named(evs, EventPreToolUse)[0]; pre["tool_name"] != "Agent" {
		t.Errorf("PreToolUse = %v; want the Agent tool", pre)
	}
}

// TestAPIError: an apierror step ends the turn with StopFailure shaped as
// Claude Code's, no Stop, and the agent waits at its prompt.
func TestAPIError(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	p := w.start(t, "say trying\napierror rate_limit", "--settings", w.settings(t, "", nil), "--session-id", id.String(), "go")
	f := w.waitEvent(t, EventStopFailure, 1)[0]
	want := "API Error: Request rejected (429) · This request would exceed the rate limit for your organization of 50 requests per minute."
	if f["error"] != "rate_limit" || f["last_assistant_message"] != want || f["permission_mode"] != nil || f["prompt_id"] == nil {
		t.Errorf("StopFailure = %v", f)
	}
	p.waitOutput(t, "\n> ", 1)
	if n := len(named(w.events(t), EventStop)); n != 0 || !p.running() {
		t.Errorf("after the API error: %d Stop hooks, running %v; want none and at the prompt", n, p.running())
	}
	lines := readSession(t, w.sessionFile(id))
	last := lines[len(lines)-1]
	if last["isApiErrorMessage"] != true || last["error"] != "rate_limit" || last["apiErrorStatus"] != 429.0 ||
		last["message"].(map[string]any)["model"] != "<synthetic>" {
		t.Errorf("last session line = %v; want the synthetic API error message", last)
	}
}

// TestIdleNotification: Notification idle_prompt fires after a turn's end
// while the agent waits.
func TestIdleNotification(t *testing.T) {
	w := newWorld(t)
	w.start(t, "idle-notify 100ms\nsay hi", "--settings", w.settings(t, "", nil), "go")
	n := w.waitEvent(t, EventNotification, 1)[0]
	if n["notification_type"] != "idle_prompt" || n["message"] != "Claude is waiting for your input" {
		t.Errorf("Notification = %v; want idle_prompt", n)
	}
}

// TestHookTimeout: a hook that outlives its timeout is killed and the
// agent goes on.
func TestHookTimeout(t *testing.T) {
	w := newWorld(t)
	settings := filepath.Join(w.dir, "settings.json")
	data := `{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command","command":"sleep 60","timeout":0.2}]}]}}`
	if err := os.WriteFile(settings, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	p := w.start(t, "say after", "--settings", settings, "go")
	p.waitOutput(t, "turn ended", 1)
	if !strings.Contains(p.out.String(), "hook UserPromptSubmit") {
		t.Errorf("output lacks the failed hook:\n%s", p.out.String())
	}
}

func TestWorkKeepsSessionFresh(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	path := w.sessionFile(id)
	p := w.start(t, "tick 20ms\nwork 10m", "--settings", w.settings(t, "", nil), "--session-id", id.String(), "go")
	p.waitOutput(t, "step 2: work 10m", 1)
	if pre := w.waitEvent(t, EventPreToolUse, 1)[0]; pre["tool_name"] != "Bash" {
		t.Errorf("PreToolUse = %v; want Bash", pre)
	}
	first, err := claudecode.Liveness(path)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, waitTimeout, "liveness to advance during work", func() bool {
		l, err := claudecode.Liveness(path)
		return err == nil && l.After(first)
	})
}

func TestSubagentKeepsSessionFresh(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	path := w.sessionFile(id)
	p := w.start(t, "tick 20ms\nsubagent 10m", "--session-id", id.String(), "go")
	p.waitOutput(t, "turn ended", 1)
	var subFiles []string
	waitfor.True(t, waitTimeout, "a subagent file with lines", func() bool {
		subFiles, _ = filepath.Glob(filepath.Join(claudecode.SubagentDir(path), "agent-*.jsonl"))
		return len(subFiles) == 1 && len(readSession(t, subFiles[0])) > 1
	})
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	mainMtime := st.ModTime()
	waitfor.True(t, waitTimeout, "liveness past the session file's mtime", func() bool {
		l, err := claudecode.Liveness(path)
		return err == nil && l.After(mainMtime)
	})
	if st, err := os.Stat(path); err != nil || !st.ModTime().Equal(mainMtime) {
		t.Errorf("session file changed while the subagent ran at the prompt (%v, %v); want it quiet", st.ModTime(), err)
	}
	for _, l := range readSession(t, subFiles[0]) {
		if l["isSidechain"] != true || l["sessionId"] != id.String() {
			t.Errorf("subagent line %v: want isSidechain true and sessionId %s", l, id)
		}
	}
	if _, err := os.Stat(strings.TrimSuffix(subFiles[0], ".jsonl") + ".meta.json"); err != nil {
		t.Errorf("no subagent meta file: %v", err)
	}
}

func TestResumeAppends(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	path := w.sessionFile(id)
	script := "say first $RESUMED\nif-new exit 3\nsay second\nonce say only-once"

	if out, code := w.run(t, script, "--session-id", id.String(), "start"); code != 3 {
		t.Fatalf("new run exit code = %d; want 3; output:\n%s", code, out)
	}
	for i := range 2 {
		if out, code := w.run(t, script, "--resume", id.String(), "continue"); code != 0 {
			t.Fatalf("resume %d exit code = %d; want 0; output:\n%s", i+1, code, out)
		}
	}

	lines := readSession(t, path)
	texts := map[string]int{}
	var prev any
	for i, l := range lines {
		if l["sessionId"] != id.String() {
			t.Errorf("line %d sessionId = %v; want %s", i+1, l["sessionId"], id)
		}
		if l["parentUuid"] != prev {
			t.Errorf("line %d parentUuid = %v; want %v (the previous line's uuid)", i+1, l["parentUuid"], prev)
		}
		prev = l["uuid"]
		if msg, ok := l["message"].(map[string]any); ok && l["type"] == "assistant" {
			for _, b := range msg["content"].([]any) {
				if text, ok := b.(map[string]any)["text"].(string); ok {
					texts[text]++
				}
			}
		}
	}
	want := map[string]int{"first ": 1, "first 1": 2, "second": 2, "only-once": 1}
	for text, n := range want {
		if texts[text] != n {
			t.Errorf("assistant text %q appears %d times; want %d (all: %v)", text, texts[text], n, texts)
		}
	}

	out, code := w.run(t, script, "--session-id", id.String())
	if want := fmt.Sprintf("Error: Session ID %s is already in use.\n", id); code != 1 || out != want {
		t.Errorf("new run on an existing session = %d, %q; want 1 and %q", code, out, want)
	}
	other := uuid.New()
	out, code = w.run(t, script, "--resume", other.String())
	if want := fmt.Sprintf("No conversation found with session ID: %s\n", other); code != 1 || out != want {
		t.Errorf("resume of a missing session = %d, %q; want 1 and %q", code, out, want)
	}
	if _, err := os.Stat(w.sessionFile(other)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("resume of a missing session created %s (%v)", w.sessionFile(other), err)
	}
}

func TestEndings(t *testing.T) {
	t.Run("crash code", func(t *testing.T) {
		w := newWorld(t)
		if out, code := w.run(t, "say bye\ncrash 7", "go"); code != 7 {
			t.Errorf("exit code = %d; want 7; output:\n%s", code, out)
		}
	})
	t.Run("crash signal", func(t *testing.T) {
		w := newWorld(t)
		cmd := w.command("crash KILL", "go")
		err := cmd.Run()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("crash KILL: %v (status %v); want killed by SIGKILL", err, ws)
		}
	})
	t.Run("exit step ends the agent at once", func(t *testing.T) {
		w := newWorld(t)
		p := w.start(t, "say bye\nexit 0\nsay unreachable", "--settings", w.settings(t, "", nil), "go")
		if code := p.exitCode(t); code != 0 || strings.Contains(p.out.String(), "unreachable") {
			t.Errorf("exit 0 = %d, output:\n%s\nwant 0 before the next step", code, p.out.String())
		}
		if names := eventNames(w.events(t)); !cmp.Equal(names, []string{EventSessionStart, EventUserPromptSubmit, EventSessionEnd}) {
			t.Errorf("events = %v; want no Stop and a SessionEnd", names)
		}
	})
	t.Run("default script", func(t *testing.T) {
		w := newWorld(t)
		id := uuid.New()
		out, code := w.run(t, "", "--session-id", id.String(), "hello there")
		if code != 0 {
			t.Fatalf("exit code = %d; want 0; output:\n%s", code, out)
		}
		data, err := os.ReadFile(w.sessionFile(id))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(`"content":"hello there"`)) || !bytes.Contains(data, []byte("Got it: hello there")) {
			t.Errorf("session file lacks the prompt and the reply:\n%s", data)
		}
	})
	t.Run("bad script", func(t *testing.T) {
		w := newWorld(t)
		id := uuid.New()
		out, code := w.run(t, "say hi\ndance", "--session-id", id.String(), "go")
		if code != 1 || !strings.Contains(out, `script line 2 "dance"`) {
			t.Errorf("bad script = %d, %q; want 1 and the line named", code, out)
		}
		if _, err := os.Stat(w.sessionFile(id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a bad script wrote its session file (%v)", err)
		}
	})
	t.Run("bad settings", func(t *testing.T) {
		w := newWorld(t)
		settings := filepath.Join(w.dir, "settings.json")
		if err := os.WriteFile(settings, []byte(`{"permissions":{"allow":["Bash(git"]}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := w.run(t, "say hi", "--settings", settings, "go")
		if code != 1 || !strings.Contains(out, settings) || !strings.Contains(out, "permissions.allow[0]") {
			t.Errorf("bad settings = %d, %q; want 1, the file and the key named", code, out)
		}
	})
}

func TestRunCommand(t *testing.T) {
	w := newWorld(t)
	w.env = []string{"LEGION_MODE=implement"}
	id := uuid.New()
	script := "if-env LEGION_MODE=implement run touch 'made by $LEGION_MODE'\nif-env LEGION_MODE=plan run touch wrong\nrun false\nsay unreachable"
	out, code := w.run(t, script, "--permission-mode", "dontAsk", "--session-id", id.String(), "go")
	if code != 1 || !strings.Contains(out, "run false") {
		t.Errorf("run false = %d, %q; want exit 1 naming the command", code, out)
	}
	if _, err := os.Stat(filepath.Join(w.cwd, "made by implement")); err != nil {
		t.Errorf("run touch did not create its file in the cwd (run needs no permission): %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.cwd, "wrong")); err == nil {
		t.Errorf("a step whose if-env does not hold ran")
	}
	if strings.Contains(out, "unreachable") {
		t.Errorf("the script went on after a failed run:\n%s", out)
	}
	var tools []string
	for _, l := range readSession(t, w.sessionFile(id)) {
		if msg, ok := l["message"].(map[string]any); ok && l["type"] == "assistant" {
			for _, b := range msg["content"].([]any) {
				if in, ok := b.(map[string]any)["input"].(map[string]any); ok {
					tools = append(tools, fmt.Sprint(in["command"]))
				}
			}
		}
	}
	if want := []string{"touch made by implement", "false"}; strings.Join(tools, "|") != strings.Join(want, "|") {
		t.Errorf("Bash tool calls = %q; want %q", tools, want)
	}
}

// TestWorkerKeyRecipes: the keys Legion's worker types when no hook can
// answer, with the screen it waits for between them: a question's free
// text (the digit of "Type something.", then "❯ 3. Type something.", the
// text, then "❯ 3. TEXT", Enter) and a prompt whose text holds a line feed
// (a line feed in a paste is text; Enter submits).
func TestWorkerKeyRecipes(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	p := w.start(t, "if-prompt pick ask Which? | A | B\nsay got $ANSWER", "--settings", w.settings(t, "", nil), "--session-id", id.String(), "pick")
	p.waitOutput(t, askFooter, 1)
	p.send(t, "3")
	p.waitOutput(t, "❯ 3. "+askTypeSomething, 1)
	p.send(t, "my words, 2 of them")
	p.waitOutput(t, "❯ 3. my words, 2 of them", 1)
	p.send(t, "\r")
	if stop := w.waitEvent(t, EventStop, 1)[0]; stop["last_assistant_message"] != "got my words, 2 of them" {
		t.Errorf("Stop = %v; want the typed answer", stop)
	}
	if !strings.Contains(p.out.String(), clearScreen) {
		t.Error("the dialog was not cleared from the screen when it closed")
	}
	p.send(t, "line one\nline two")
	p.waitOutput(t, "line two", 1)
	p.send(t, "\r")
	if up := w.waitEvent(t, EventUserPromptSubmit, 2)[1]; up["prompt"] != "line one\nline two" {
		t.Errorf("second prompt = %q; want the two lines", up["prompt"])
	}
}
