package claudetest_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/claude/anthropictest"
	"github.com/legion-dev/legion/ptyworker/claude/claudetest"
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
