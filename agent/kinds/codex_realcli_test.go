package kinds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/agent/codex/codextest"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/internal/waitfor"
)

// codexRun is the real CLI in a PTY.
type codexRun struct {
	cmd  *exec.Cmd
	ptmx *os.File
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

func startCodex(t testing.TB, argv []string, dir string, env []string) *codexRun {
	t.Helper()
	return startCodexWith(t, argv, dir, env, nil)
}

// startCodexWith is startCodex with extra descriptors from 3 on (a
// sandbox's ruleset for its trampoline).
func startCodexWith(t testing.TB, argv []string, dir string, env []string, extra ...*os.File) *codexRun {
	t.Helper()
	r := &codexRun{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	r.cmd.Dir, r.cmd.Env = dir, env
	for _, f := range extra {
		if f != nil {
			r.cmd.ExtraFiles = append(r.cmd.ExtraFiles, f)
		}
	}
	var err error
	if r.ptmx, err = pty.StartWithSize(r.cmd, &pty.Winsize{Rows: 40, Cols: 140}); err != nil {
		t.Fatal(err)
	}
	go func() { // ends when the CLI exits and the PTY reports EOF or EIO
		defer close(r.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.ptmx.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-r.done:
			case <-time.After(30 * time.Second):
				r.cmd.Process.Kill()
				<-r.done
			}
		}
		r.cmd.Wait()
		r.ptmx.Close()
	})
	return r
}

func (r *codexRun) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ansi.ReplaceAllString(r.out.String(), "")
}

// end types Ctrl-C at the idle prompt, Codex's clean end (codex FACTS
// X2), and returns the exit code. While a background terminal of an
// earlier command is open, one Ctrl-C is not enough (codex FACTS X19):
// it types Ctrl-C again while Codex is still there, up to three times.
func (r *codexRun) end(t *testing.T) int {
	t.Helper()
	for i := 0; ; i++ {
		if _, err := r.ptmx.Write([]byte{3}); err != nil {
			t.Fatal(err)
		}
		err := waitfor.Until(10*time.Second, "codex to end after Ctrl-C", func() error {
			select {
			case <-r.done:
				return nil
			default:
				return errors.New(lastLines(r.text(), 6))
			}
		})
		if err == nil {
			break
		}
		if i == 2 {
			t.Fatalf("codex did not end after 3 Ctrl-C: %v", err)
		}
		t.Logf("codex still runs after Ctrl-C %d; screen: %s", i+1, lastLines(r.text(), 6))
	}
	r.cmd.Wait()
	return r.cmd.ProcessState.ExitCode()
}

// hookEvents are the payloads the stand-in legion received, in order.
func hookEvents(t testing.TB, log string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var evs []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		_, payload, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(payload), &ev); err == nil {
			evs = append(evs, ev)
		}
	}
	return evs
}

func countEvents(evs []map[string]any, name string) int {
	n := 0
	for _, ev := range evs {
		if ev["hook_event_name"] == name {
			n++
		}
	}
	return n
}

// TestRealCodexNewAndResume: the real Codex CLI, started as Prepare says in
// a new worktree of a repository it never saw, with the user's config.toml
// naming a custom provider (the fake), starts with no dialog (folder trust,
// hook review), sends the prompt at once and runs Legion's hooks; the hook
// answers its approval (allow) and the command runs; Ctrl-C ends it with 0;
// the session file then exists, and the resume argv continues the same
// conversation: same Codex session id, the first prompt sent again as
// history.
func TestRealCodexNewAndResume(t *testing.T) {
	bin := codextest.Binary(t)
	root, repo, wt, home := agenttest.GitWorktree(t)
	srv := openaitest.NewServer(t)
	srv.Script(
		openaitest.Turn{Exec: "touch " + filepath.Join(root, "approved"), Escalate: true},
		openaitest.Turn{Text: "First turn done."},
		openaitest.Turn{Text: "Second turn done."},
	)
	if err := srv.WriteUserConfig(home); err != nil {
		t.Fatal(err)
	}

	// The stand-in legion logs "<arg> <payload>" and allows every
	// PermissionRequest, as the worker does when a person approves.
	hookLog := filepath.Join(root, "hooks.log")
	legion := filepath.Join(root, "my bin", "legion")
	if err := os.MkdirAll(filepath.Dir(legion), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
in=$(cat)
printf '%%s %%s\n' "$1" "$in" >> %s
case $in in *'"hook_event_name":"PermissionRequest"'*)
	echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}' ;;
esac
`, shellquote.Quote(hookLog))
	if err := os.WriteFile(legion, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	argvNew, argvResume, _ := config.KindArgv(config.AgentCodex)
	a := config.Agent{Kind: config.AgentCodex, New: argvNew, Resume: argvResume, Permissions: config.PermissionsAllowlist}
	k, err := For(a)
	if err != nil {
		t.Fatal(err)
	}
	s := agent.Session{
		ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: "implement", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion,
	}
	s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: "first prompt"}
	plan := func(prompt string) agent.Launch {
		s.Vars.Prompt = prompt
		l := agenttest.Prepared(t, k, s)
		if l.Agent != string(config.AgentClaude) {
			t.Errorf("Launch.Agent = %q; want the worker's claude half", l.Agent)
		}
		return l
	}
	env := func(l agent.Launch) []string {
		return append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color",
			openaitest.KeyEnv + "=" + openaitest.Key}, l.Env...)
	}
	withBin := func(argv []string) []string { return append([]string{bin}, argv[1:]...) }

	l := plan("first prompt")
	if _, err := os.Stat(l.SessionFile); err == nil {
		t.Fatalf("session file %s exists before the first start", l.SessionFile)
	}
	run := startCodex(t, withBin(l.ArgvNew), wt, env(l))
	waitfor.Check(t, 2*time.Minute, "the first turn's Stop hook", func() error {
		if evs := hookEvents(t, hookLog); countEvents(evs, "Stop") < 1 {
			return fmt.Errorf("hooks so far: %d; screen:\n%s", len(evs), lastLines(run.text(), 15))
		}
		return nil
	})
	for _, dialog := range []string{"Trust this folder", "Hooks need review", "Would you like to run the following command"} {
		if strings.Contains(run.text(), dialog) {
			t.Errorf("codex showed a dialog (%q):\n%s", dialog, lastLines(run.text(), 30))
		}
	}
	if _, err := os.Stat(filepath.Join(root, "approved")); err != nil {
		t.Errorf("the command the hook approved did not run: %v", err)
	}
	if code := run.end(t); code != 0 {
		t.Errorf("codex exit code after Ctrl-C = %d; want 0", code)
	}
	evs := hookEvents(t, hookLog)
	var first string
	for _, name := range []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop", "SessionEnd"} {
		if countEvents(evs, name) == 0 {
			t.Errorf("no %s hook; hooks: %v", name, evs)
		}
	}
	for _, ev := range evs {
		if ev["hook_event_name"] == "SessionStart" {
			first, _ = ev["session_id"].(string)
			if ev["source"] != "startup" {
				t.Errorf("first SessionStart source = %v; want startup", ev["source"])
			}
		}
	}
	if _, err := os.Stat(l.SessionFile); err != nil {
		t.Fatalf("session file after the first turn: %v", err)
	}

	// A restart: the worker picks the resume argv, since the session file
	// exists.
	l = plan("second prompt")
	before := len(evs)
	run = startCodex(t, withBin(l.ArgvResume), wt, env(l))
	waitfor.Check(t, 2*time.Minute, "the resumed turn's Stop hook", func() error {
		if evs := hookEvents(t, hookLog)[before:]; countEvents(evs, "Stop") < 1 {
			return fmt.Errorf("hooks so far: %d; screen:\n%s", len(evs), lastLines(run.text(), 15))
		}
		return nil
	})
	if code := run.end(t); code != 0 {
		t.Errorf("codex exit code after Ctrl-C = %d; want 0", code)
	}
	for _, ev := range hookEvents(t, hookLog)[before:] {
		if ev["hook_event_name"] != "SessionStart" {
			continue
		}
		if ev["source"] != "resume" || ev["session_id"] != first {
			t.Errorf("resumed SessionStart: source %v, session %v; want resume of %s", ev["source"], ev["session_id"], first)
		}
	}
	var last []byte
	for _, r := range srv.Requests() {
		if !r.Title {
			last = r.Body
		}
	}
	if !bytes.Contains(last, []byte("second prompt")) || !bytes.Contains(last, []byte("first prompt")) {
		t.Errorf("the resumed turn's request does not carry both prompts:\n%.2000s", last)
	}
}
