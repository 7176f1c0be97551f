package claudetest_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/internal/waitfor"
)

// git runs git in dir with a fixed identity (the test HOME has none).
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestRealCLIConversation runs the real CLI in a PTY, in a new git
// worktree of a trusted repository, through a scripted conversation: a
// text turn, a Bash call that a settings rule allows, and a question the
// human answers in their own words. The session file must show exactly
// that answer.
func TestRealCLIConversation(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	worktree := filepath.Join(dir, "worktree")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q")
	git(t, repo, "commit", "-q", "--allow-empty", "-m", "init")
	git(t, repo, "worktree", "add", "-q", "-b", "work", worktree)

	env := claudetest.New(t, claudetest.Options{Trusted: []string{repo}})
	// A stand-in for `legion issue`, on PATH, that records its arguments.
	bin := filepath.Join(dir, "bin")
	calls := filepath.Join(dir, "legion-calls")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "legion"), []byte("#!/bin/sh\necho \"$*\" >> "+calls+"\necho labelled\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(dir, "settings.json")
	if err := claudetest.WriteSettings(settings, claudetest.Settings{Allow: []string{"Bash(legion issue:*)"}}); err != nil {
		t.Fatal(err)
	}

	session := uuid.New()
	question := anthropictest.Question{
		Question: "Which database should the service use?", Header: "Database",
		Options: []anthropictest.Option{{Label: "Postgres", Description: "relational"}, {Label: "SQLite", Description: "embedded"}},
	}
	answer := "Neither: keep the flat files, 2 of them"
	env.API.Script(session.String(),
		anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("Hello from the fake API.")}},
		anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Bash("legion issue label CC-1 worker-done", "Label the issue").WithID("toolu_label")}},
		anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.AskUserQuestion(question).WithID("toolu_ask")}},
		anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("Understood.")}},
	)

	term := env.Start(t, worktree, []string{"--settings", settings, "--permission-mode", "default", "--session-id", session.String(), "say hello"},
		"PATH="+bin+":"+os.Getenv("PATH"))
	term.WaitScreen(t, "Hello from the fake API.")

	// The rule lets the command run with no permission dialog: the next
	// request carries its output.
	term.Prompt(t, "label it")
	waitfor.Check(t, claudetest.Wait, "the label command's result to reach the API", func() error {
		for _, r := range env.API.MessageRequests(session.String()) {
			if res, ok := r.ToolResult("toolu_label"); ok {
				if res.IsError || res.Content != "labelled" {
					t.Fatalf("tool_result of the allowed command: %+v; want its output, no error", res)
				}
				return nil
			}
		}
		return fmt.Errorf("no tool_result yet; %s", term)
	})
	if b, err := os.ReadFile(calls); err != nil || string(b) != "issue label CC-1 worker-done\n" {
		t.Errorf("legion calls %q, %v; want the label command once", b, err)
	}

	// The question's dialog opens on the last scripted turn's question.
	term.AnswerFreeText(t, len(question.Options), answer)
	term.WaitScreen(t, "Understood.")

	file := env.SessionFile(worktree, session)
	var (
		result claudetest.Block
		line   claudetest.Line
	)
	waitfor.Check(t, claudetest.Wait, "the answer in the session file", func() error {
		s, err := claudetest.ReadSession(file)
		if err != nil {
			return err
		}
		var ok bool
		if result, line, ok = s.ToolResult("toolu_ask"); !ok {
			return fmt.Errorf("no tool_result for the question in %s", file)
		}
		return nil
	})
	if diff := cmp.Diff(map[string]string{question.Question: answer}, line.Answers()); diff != "" {
		t.Errorf("answers in the session file (-want +got):\n%s", diff)
	}
	if want := fmt.Sprintf("%q=%q", question.Question, answer); result.IsError || !strings.Contains(result.ResultText(), want) {
		t.Errorf("tool_result %q (is_error %v); want it to hold %s", result.ResultText(), result.IsError, want)
	}
	s, err := claudetest.ReadSession(file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"say hello", "label it"}, userPrompts(s)); diff != "" {
		t.Errorf("prompts in the session file (-want +got):\n%s", diff)
	}

	// A clean end: SIGINT, exit 0.
	term.Signal(t, syscall.SIGINT)
	if code := term.ExitCode(t); code != 0 {
		t.Errorf("exit code after SIGINT %d; want 0", code)
	}
	for _, r := range env.API.MessageRequests("") {
		if r.Unscripted {
			t.Errorf("unscripted request: last user text %q", r.LastUserText())
		}
	}
}

// userPrompts returns the prompts of s without the context the CLI adds
// to the first one (<system-reminder> blocks).
func userPrompts(s claudetest.Session) []string {
	var out []string
	for _, p := range s.Prompts() {
		if !strings.HasPrefix(p, "<") {
			out = append(out, p)
		}
	}
	return out
}

// TestRealCLIQuestionAnsweredByHook checks the way Legion can answer a
// question with no keys: the PermissionRequest hook answers it with
// allow and updatedInput.answers (a form of two questions here, one
// answered in free text). The session file must show exactly those
// answers, and no key is typed.
func TestRealCLIQuestionAnsweredByHook(t *testing.T) {
	dir := t.TempDir()
	env := claudetest.New(t, claudetest.Options{Trusted: []string{dir}})
	questions := []anthropictest.Question{
		{Question: "Which database?", Header: "Database", Options: []anthropictest.Option{{Label: "Postgres", Description: "relational"}, {Label: "SQLite", Description: "embedded"}}},
		{Question: "Which days?", Header: "Days", MultiSelect: true, Options: []anthropictest.Option{{Label: "Mon", Description: "m"}, {Label: "Tue", Description: "t"}}},
	}
	answers := map[string]string{"Which database?": "Neither: flat files, 2 of them", "Which days?": "Tue"}
	hooks := claudetest.NewHookLog(t)
	hooks.Answer(t, "AskUserQuestion", map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName": "PermissionRequest",
		"decision":      map[string]any{"behavior": "allow", "updatedInput": map[string]any{"questions": questions, "answers": answers}},
	}})
	settings := filepath.Join(dir, "settings.json")
	if err := claudetest.WriteSettings(settings, claudetest.Settings{Hook: hooks.Command}); err != nil {
		t.Fatal(err)
	}
	session := uuid.New()
	env.API.Script(session.String(),
		anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.AskUserQuestion(questions...).WithID("toolu_ask")}},
		anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("Understood.")}},
	)
	term := env.Start(t, dir, []string{"--settings", settings, "--permission-mode", "default", "--session-id", session.String(), "ask me"})
	term.WaitScreen(t, "Understood.")

	var line claudetest.Line
	file := env.SessionFile(dir, session)
	waitfor.Check(t, claudetest.Wait, "the answers in the session file", func() error {
		s, err := claudetest.ReadSession(file)
		if err != nil {
			return err
		}
		var ok bool
		if _, line, ok = s.ToolResult("toolu_ask"); !ok {
			return fmt.Errorf("no tool_result for the question in %s", file)
		}
		return nil
	})
	if diff := cmp.Diff(answers, line.Answers()); diff != "" {
		t.Errorf("answers in the session file (-want +got):\n%s", diff)
	}
	waitfor.Check(t, claudetest.Wait, "every hook event of the turn", func() error {
		for _, event := range []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop"} {
			if _, ok := hooks.Find(event); !ok {
				return fmt.Errorf("no %s hook event yet", event)
			}
		}
		return nil
	})
	term.Signal(t, syscall.SIGINT)
	if code := term.ExitCode(t); code != 0 {
		t.Errorf("exit code after SIGINT %d; want 0", code)
	}
}

// TestRealCLIRateLimited checks what Legion sees of a rate limit: the
// StopFailure hook with error "rate_limit" and the API's message, the CLI
// still running at its prompt (it retries ten times first, unless
// CLAUDE_CODE_MAX_RETRIES=0).
func TestRealCLIRateLimited(t *testing.T) {
	dir := t.TempDir()
	env := claudetest.New(t, claudetest.Options{Trusted: []string{dir}})
	hooks := claudetest.NewHookLog(t)
	settings := filepath.Join(dir, "settings.json")
	if err := claudetest.WriteSettings(settings, claudetest.Settings{Hook: hooks.Command}); err != nil {
		t.Fatal(err)
	}
	session := uuid.New()
	env.API.Script(session.String(), anthropictest.Turn{Failure: anthropictest.RateLimited(time.Minute, time.Now().Add(time.Minute)), Repeat: anthropictest.Forever})
	term := env.Start(t, dir, []string{"--settings", settings, "--session-id", session.String(), "hello"}, "CLAUDE_CODE_MAX_RETRIES=0")
	var failure claudetest.Event
	waitfor.True(t, claudetest.Wait, "the StopFailure hook", func() bool {
		var ok bool
		failure, ok = hooks.Find("StopFailure")
		return ok
	})
	want := map[string]any{
		"error":                  "rate_limit",
		"last_assistant_message": "API Error: Request rejected (429) · This request would exceed the rate limit for your organization of 50 requests per minute.",
	}
	if diff := cmp.Diff(want, map[string]any{"error": failure.Raw["error"], "last_assistant_message": failure.Raw["last_assistant_message"]}); diff != "" {
		t.Errorf("StopFailure payload (-want +got):\n%s", diff)
	}
	if failure.SessionID != session.String() {
		t.Errorf("StopFailure of session %q; want %s", failure.SessionID, session)
	}
	term.WaitScreen(t, "Resend your message to try again")
	if n := len(env.API.MessageRequests(session.String())); n != 1 {
		t.Errorf("%d requests; want 1 (no retries with CLAUDE_CODE_MAX_RETRIES=0)", n)
	}
	term.Signal(t, syscall.SIGINT)
	if code := term.ExitCode(t); code != 0 {
		t.Errorf("exit code after SIGINT %d; want 0", code)
	}
}
