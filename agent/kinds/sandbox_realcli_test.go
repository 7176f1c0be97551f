package kinds

import (
	"bytes"
	"encoding/json"
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
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/confine"
)

// TestMain makes the test binary the sandbox's trampoline, as the
// worker's program is (confine.Command).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == confine.ExecFlag {
		code, err := confine.Exec(os.Args[1:])
		fmt.Fprintln(os.Stderr, err)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestRealClaudeSandboxed: the real CLI under the policy "sandbox",
// confined as its worker confines it (agent.SandboxFor, the trampoline),
// starts in bypassPermissions mode with no dialog, runs the hooks, keeps
// its ~/.claude.json, and runs the model's commands with no prompt: one
// that commits in the worktree succeeds, one that writes ~/.bashrc is
// refused by the kernel.
func TestRealClaudeSandboxed(t *testing.T) {
	bin := realClaude(t)
	if st := confine.Probe(); !st.Holds {
		t.Skipf("sandbox does not hold: %s", st.Why)
	}
	// The sandbox lets the agent write /tmp: its home must not be there.
	realHome, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(realHome, ".cache", "legion-test")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(scratch) }) // once empty: the last test to end removes it
	t.Setenv("TMPDIR", scratch)
	root, repo, wt, home := agenttest.GitWorktree(t)
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("# rc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	legion := filepath.Join(root, "bin", "legion")
	if err := os.MkdirAll(filepath.Dir(legion), 0o755); err != nil {
		t.Fatal(err)
	}
	// The hooks' stand-in logs to the worktree: in the sandbox, as the
	// real `legion hook` would reach its worker.
	hookLog := filepath.Join(wt, ".hooks.log")
	script := fmt.Sprintf("#!/bin/sh\n{ printf '%%s ' \"$1\"; cat; echo; } >> %s\n", shellquote.Quote(hookLog))
	if err := os.WriteFile(legion, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := anthropictest.NewServer(t)
	srv.Key = "sk-legion-sandbox-test"
	hasTools := func(r *anthropictest.Request) bool { return len(r.ToolNames()) > 0 }
	srv.Script(anthropictest.AnySession,
		anthropictest.Turn{Match: hasTools, Blocks: []anthropictest.Block{anthropictest.Bash("echo made > made.txt && git add made.txt && git -c user.name=a -c user.email=a@b commit -qm sandboxed && echo committed", "commit")}},
		anthropictest.Turn{Match: hasTools, Blocks: []anthropictest.Block{anthropictest.Bash("echo x >> ~/.bashrc; echo exit=$?", "touch rc")}},
		anthropictest.Turn{Match: hasTools, Blocks: []anthropictest.Block{anthropictest.Text("Done.")}},
	)
	srv.Script(anthropictest.AnySession, anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("ok")}, Repeat: anthropictest.Forever})

	a := config.Agent{
		Kind: config.AgentClaude, New: []string{bin, "--session-id", "{session_id}", "{prompt}"}, Resume: []string{bin, "--resume", "{session_id}"},
		Permissions: config.PermissionsSandbox,
	}
	k, _ := For(a)
	s := agent.Session{
		ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: "implement", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(home, ".local", "state", "legion", "agents", "w"), Legion: legion,
		Env:       []string{"ANTHROPIC_AUTH_TOKEN=" + srv.Key},
		LookupEnv: func(string) (string, bool) { return "", false },
	}
	s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: "Commit a file."}
	l := agenttest.Prepared(t, k, s)
	if l.Sandbox == nil {
		t.Fatalf("Prepare under the policy sandbox drew no sandbox (note: %s)", l.PolicyNote)
	}
	if !strings.Contains(strings.Join(l.ArgvNew, " "), "--permission-mode bypassPermissions") {
		t.Fatalf("argv %q: want bypassPermissions", l.ArgvNew)
	}
	fd, flags, err := confine.Ruleset(l.Sandbox)
	if err != nil {
		t.Fatal(err)
	}
	ruleset := os.NewFile(uintptr(fd), "ruleset")
	defer ruleset.Close()
	self, _ := os.Executable()
	argv := confine.Command(self, flags, l.ArgvNew)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = wt
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color",
		"ANTHROPIC_BASE_URL=" + srv.URL}, append(s.Env, l.Env...)...)
	cmd.ExtraFiles = []*os.File{ruleset}
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
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cmd.Wait()
		ptmx.Close()
	})
	text := func() string {
		mu.Lock()
		defer mu.Unlock()
		return ansi.ReplaceAllString(screen.String(), "")
	}
	waitfor.Check(t, 2*time.Minute, "the model's third turn (after both commands)", func() error {
		n := 0
		for _, r := range srv.Requests() {
			if hasTools(r) {
				n++
			}
		}
		if n < 3 {
			return fmt.Errorf("%d turn requests so far; screen:\n%s", n, lastLines(text(), 20))
		}
		return nil
	})
	out, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%s", "legion/X-1").Output()
	if err != nil || strings.TrimSpace(string(out)) != "sandboxed" {
		t.Errorf("git log legion/X-1 = %q, %v; want the agent's commit\nscreen:\n%s", out, err, lastLines(text(), 30))
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".bashrc")); string(b) != "# rc\n" {
		t.Errorf("~/.bashrc = %q; want it untouched", b)
	}
	var second *anthropictest.Request
	for _, r := range srv.Requests() {
		if hasTools(r) && strings.Contains(string(r.Body), "exit=") {
			second = r
			break
		}
	}
	if second == nil || !strings.Contains(strings.ToLower(string(second.Body)), "permission denied") {
		t.Errorf("the ~/.bashrc command's result: want Permission denied in the request that carries it")
	}
	if b, _ := os.ReadFile(hookLog); !bytes.Contains(b, []byte(`"hook_event_name":"SessionStart"`)) {
		t.Errorf("hooks run: %.300q...; want SessionStart", b)
	}
	var cj map[string]any
	if b, err := os.ReadFile(filepath.Join(home, ".claude.json")); err != nil || json.Unmarshal(b, &cj) != nil {
		t.Errorf("~/.claude.json after the run: %v; want valid JSON", err)
	}
	for _, d := range []string{"trust this folder", "No, exit", "Select login method"} {
		if strings.Contains(strings.Join(strings.Fields(text()), ""), strings.Join(strings.Fields(d), "")) {
			t.Errorf("the CLI showed a dialog (%q)", d)
		}
	}
}
