package kinds

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/agent/gemini/geminitest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/internal/waitfor"
)

// TestRealGeminiNewAndResume: the real Gemini CLI, started as Prepare says
// in a new worktree, with the user's settings naming the fake's model,
// starts with no dialog (trust, auth), sends the prompt at once with
// Legion's session id and runs Legion's hooks; git, allowed by the
// allowlist's policy file, runs unasked, and so does a file write in the
// worktree; SIGINT (the worker's clean end)
// ends it with 0; the session file then exists at the path Plan named, and
// the resume argv continues the same conversation (same session id, the
// first prompt sent again as history). The key is in no argv and no file.
func TestRealGeminiNewAndResume(t *testing.T) {
	bin := geminitest.Binary(t)
	root, repo, wt, home := agenttest.GitWorktree(t)
	srv := geminitest.NewServer(t)
	srv.Script(
		geminitest.Turn{Shell: "git tag allowed-by-policy"},
		geminitest.Turn{Call: &geminitest.Call{Name: "write_file", Args: map[string]any{"file_path": filepath.Join(wt, "written.txt"), "content": "hello\n"}}},
		geminitest.Turn{Text: "First turn done."},
		geminitest.Turn{Text: "Second turn done."},
	)
	if err := geminitest.WriteUserSettings(home); err != nil {
		t.Fatal(err)
	}
	hookLog := filepath.Join(root, "hooks.log")
	legion := filepath.Join(root, "my bin", "legion")
	if err := os.MkdirAll(filepath.Dir(legion), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nin=$(cat)\nprintf '%%s %%s\\n' \"$1\" \"$in\" >> %s\n", shellquote.Quote(hookLog))
	if err := os.WriteFile(legion, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	argvNew, argvResume, _ := config.KindArgv(config.AgentGemini)
	k, err := For(config.Agent{Kind: config.AgentGemini, New: argvNew, Resume: argvResume, Permissions: config.PermissionsAllowlist})
	if err != nil {
		t.Fatal(err)
	}
	s := agent.Session{
		ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: "implement", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion,
	}
	plan := func(prompt string) agent.Launch {
		s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: prompt}
		return agenttest.Prepared(t, k, s)
	}
	env := func(l agent.Launch) []string {
		return append(append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}, srv.Env()...), l.Env...)
	}
	withBin := func(argv []string) []string { return append([]string{bin}, argv[1:]...) }
	end := func(run *codexRun) int {
		t.Helper()
		if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err := waitfor.Until(30*time.Second, "gemini to end after SIGINT", func() error {
			select {
			case <-run.done:
				return nil
			default:
				return errors.New(lastLines(run.text(), 6))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		run.cmd.Wait()
		return run.cmd.ProcessState.ExitCode()
	}

	l := plan("first prompt")
	if slices.ContainsFunc(l.ArgvNew, func(a string) bool { return strings.Contains(a, geminitest.Key) }) {
		t.Errorf("the key is in the argv %q", l.ArgvNew)
	}
	if _, err := os.Stat(l.SessionFile); err == nil {
		t.Fatalf("session file %s exists before the first start", l.SessionFile)
	}
	run := startCodex(t, withBin(l.ArgvNew), wt, env(l))
	waitfor.Check(t, 2*time.Minute, "the first turn's AfterAgent hook", func() error {
		if evs := hookEvents(t, hookLog); countEvents(evs, "AfterAgent") < 1 {
			return fmt.Errorf("hooks so far: %d; screen:\n%s", len(evs), lastLines(run.text(), 15))
		}
		return nil
	})
	for _, dialog := range []string{"Do you trust", "How would you like to authenticate", "Allow execution"} {
		if strings.Contains(run.text(), dialog) {
			t.Errorf("gemini showed a dialog (%q):\n%s", dialog, lastLines(run.text(), 30))
		}
	}
	if out, err := exec.Command("git", "-C", repo, "tag", "--list", "allowed-by-policy").Output(); err != nil || strings.TrimSpace(string(out)) == "" {
		t.Errorf("the git command the policy allows did not run: %q, %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(wt, "written.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("the file write the policy allows did not happen: %q, %v", b, err)
	}
	if code := end(run); code != 0 {
		t.Errorf("gemini exit code after SIGINT = %d; want 0", code)
	}
	evs := hookEvents(t, hookLog)
	for _, name := range []string{"SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "SessionEnd"} {
		if countEvents(evs, name) == 0 {
			t.Errorf("no %s hook; hooks: %v", name, evs)
		}
	}
	for _, ev := range evs {
		if ev["session_id"] != s.ID.String() {
			t.Errorf("%v hook: session_id %v; want Legion's %s", ev["hook_event_name"], ev["session_id"], s.ID)
		}
	}
	if _, err := os.Stat(l.SessionFile); err != nil {
		t.Fatalf("session file after the first turn: %v", err)
	}

	l = plan("second prompt")
	before := len(evs)
	run = startCodex(t, withBin(l.ArgvResume), wt, env(l))
	waitfor.Check(t, 2*time.Minute, "the resumed turn's AfterAgent hook", func() error {
		if evs := hookEvents(t, hookLog)[before:]; countEvents(evs, "AfterAgent") < 1 {
			return fmt.Errorf("hooks so far: %d; screen:\n%s", len(evs), lastLines(run.text(), 15))
		}
		return nil
	})
	if code := end(run); code != 0 {
		t.Errorf("gemini exit code after SIGINT = %d; want 0", code)
	}
	for _, ev := range hookEvents(t, hookLog)[before:] {
		if ev["hook_event_name"] == "SessionStart" && (ev["source"] != "resume" || ev["session_id"] != s.ID.String()) {
			t.Errorf("resumed SessionStart: source %v, session %v; want resume of %s", ev["source"], ev["session_id"], s.ID)
		}
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1].Body
	if !bytes.Contains(last, []byte("second prompt")) || !bytes.Contains(last, []byte("first prompt")) {
		t.Errorf("the resumed turn's request does not carry both prompts:\n%.2000s", last)
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(geminitest.Key)) {
				t.Errorf("%s holds the API key", p)
			}
		}
		return nil
	})
	// Each model message's tokens are in the chat file, the fake's
	// usageMetadata field by field (gemini FACTS G31): the dashboard's
	// usage reads them there.
	chats, _ := filepath.Glob(filepath.Join(filepath.Dir(l.SessionFile), "chats", "session-*-"+s.ID.String()[:8]+".jsonl"))
	var chat []byte
	for _, f := range chats {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		chat = append(chat, b...)
	}
	if want := `"tokens":{"input":100,"output":10,"cached":40,"thoughts":5,"tool":3,"total":118}`; bytes.Count(chat, []byte(want)) < 4 {
		t.Errorf("the chat files %v hold %d model messages with the tokens %s; want one per model call (4 or more)", chats, bytes.Count(chat, []byte(want)), want)
	}
	if _, err := os.Stat(filepath.Join(home, ".gemini", "tmp")); err == nil {
		t.Errorf("the CLI wrote into the user's own ~/.gemini")
	}
}
