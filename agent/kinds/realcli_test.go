package kinds

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/internal/waitfor"
)

// realClaude is the real Claude Code CLI, or "" when it is not installed:
// $LEGION_CLAUDE_CODE, else where scripts/install-claude-code puts it.
// (agent/claude/claudetest.Binary is the project's finder once it is
// on main; this test skips instead of failing without the CLI.)
func realClaude(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("LEGION_CLAUDE_CODE")}
	if cache, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, claudecode.InstalledCLI(cache))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if out, err := exec.Command(c, "--version").Output(); err == nil && bytes.HasPrefix(out, []byte("2.1.")) {
			return c
		}
	}
	t.Skip("the Claude Code CLI is not installed (scripts/install-claude-code, or set LEGION_CLAUDE_CODE)")
	return ""
}

var ansi = regexp.MustCompile(`\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78MDEc])`)

// TestRealClaudeStartsWithoutDialog: the real CLI, started as Prepare says
// in a new worktree of a repository it never saw, with a custom API key in
// a home with no ~/.claude.json, reaches its prompt in manual mode with no
// dialog (onboarding, folder trust, API key, auto-mode notice), and runs
// the hooks of the settings file (a stand-in for legion whose path has a
// space in it).
func TestRealClaudeStartsWithoutDialog(t *testing.T) {
	bin := realClaude(t)
	root, repo, wt, home := agenttest.GitWorktree(t)
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	hookLog := filepath.Join(root, "hooks.log")
	legion := filepath.Join(root, "my bin", "legion")
	if err := os.MkdirAll(filepath.Dir(legion), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\n{ printf '%%s ' \"$1\"; cat; echo; } >> %s\n", shellquote.Quote(hookLog))
	if err := os.WriteFile(legion, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	a := config.Agent{
		Kind: config.AgentClaude, New: []string{bin, "--session-id", "{session_id}"}, Resume: []string{bin, "--resume", "{session_id}"},
		Permissions: config.PermissionsAllowlist,
	}
	k, _ := For(a)
	const key = "sk-ant-api03-legion-test-0123456789abcdefghijklmnop"
	s := agent.Session{
		ID: k.SessionID(agenttest.TeamID, "X-1", "plan"), Mode: "plan", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion,
		Env: []string{"ANTHROPIC_API_KEY=" + key},
	}
	s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt}
	l := agenttest.Prepared(t, k, s)

	cmd := exec.Command(l.ArgvNew[0], l.ArgvNew[1:]...)
	cmd.Dir = wt
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:9"}, append(s.Env, l.Env...)...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 140})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		screen bytes.Buffer
	)
	done := make(chan struct{})
	go func() { // ends when the CLI exits and the PTY reports EOF or EIO
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := ptmx.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT) // Claude Code exits 0 at once on SIGINT
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cmd.Wait()
		ptmx.Close()
	})
	// The TUI moves the cursor instead of writing some spaces: compare
	// without escape sequences and without blanks.
	text := func() string {
		mu.Lock()
		defer mu.Unlock()
		return ansi.ReplaceAllString(screen.String(), "")
	}
	has := func(s, sub string) bool {
		return strings.Contains(strings.Join(strings.Fields(s), ""), strings.Join(strings.Fields(sub), ""))
	}
	waitfor.Check(t, time.Minute, "the CLI at its prompt in manual mode", func() error {
		if s := text(); !has(s, "manual mode on") {
			return errors.New(lastLines(s, 15))
		}
		return nil
	})
	for _, dialog := range []string{"trust this folder", "Detected a custom API key", "No, exit", "Select login method", "Choose the text style", "Unable to connect"} {
		if has(text(), dialog) {
			t.Errorf("the CLI showed a dialog (%q):\n%s", dialog, lastLines(text(), 30))
		}
	}
	waitfor.Check(t, time.Minute, "the SessionStart hook in "+hookLog, func() error {
		b, _ := os.ReadFile(hookLog)
		if !bytes.Contains(b, []byte(`hook {`)) || !bytes.Contains(b, []byte(`"hook_event_name":"SessionStart"`)) {
			return fmt.Errorf("hooks run so far: %q", b)
		}
		return nil
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
