package activation

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/sdtest"
)

// tmuxServer is a tmux server of the test's own (-L socket, no config
// file), killed when the test ends.
type tmuxServer struct {
	t      *testing.T
	socket string
}

func newTmuxServer(t *testing.T) *tmuxServer {
	t.Helper()
	_, err := exec.LookPath("tmux")
	sdtest.Require(t, "tmux (Debian package tmux)", err == nil)
	s := &tmuxServer{t: t, socket: fmt.Sprintf("legion-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	return s
}

// run runs a tmux command on the server with the test's environment (the
// sandbox's, so `legion attach` in a pane finds the helper).
func (s *tmuxServer) run(args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-L", s.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (s *tmuxServer) must(args ...string) string {
	s.t.Helper()
	out, err := s.run(args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// capture is the text of target's pane, a line per row, trailing blanks
// trimmed; a no-break space (the CLI draws one after its "❯") reads as a
// space.
func (s *tmuxServer) capture(target string) string {
	out, err := s.run("capture-pane", "-p", "-t", target)
	if err != nil {
		return err.Error()
	}
	return strings.ReplaceAll(out, "\u00a0", " ")
}

// exitStatus is how the process of target's pane ended, once the pane is
// dead (the window has remain-on-exit): its exit status, or "signal N";
// "" while it runs.
//
// A dead pane whose status is not known yet gets the server a SIGCHLD.
// tmux built with libutempter (Debian's 3.3a) can miss the SIGCHLD of a
// pane's process: when the pane's output ends, tmux removes its utmp
// record through utempter's helper, whose own SIGCHLD handler takes the
// signal if the process exits meanwhile, and the process stays a zombie
// until another child of the server exits (seen here about once in 20
// runs under load; tmux/tmux#311, #4559).
func (s *tmuxServer) exitStatus(target string) (string, error) {
	out, err := s.run("display-message", "-p", "-t", target, "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}:#{pid}")
	if err != nil {
		return "", err
	}
	f := strings.Split(strings.TrimSpace(out), ":")
	if len(f) != 4 {
		return "", fmt.Errorf("tmux display-message printed %q", out)
	}
	switch dead, status, signal, server := f[0], f[1], f[2], f[3]; {
	case dead != "1":
		return "", nil
	case status != "":
		return status, nil
	case signal != "":
		return "signal " + signal, nil
	default:
		pid, err := strconv.Atoi(server)
		if err != nil {
			return "", fmt.Errorf("tmux server pid %q: %w", server, err)
		}
		return "", syscall.Kill(pid, syscall.SIGCHLD)
	}
}

// workerInfo asks the session's worker for its info on a read-only
// connection of its own (no attach: it changes nothing).
func workerInfo(ctx context.Context, t *testing.T, c *api.Client, name string) *proto.Info {
	t.Helper()
	conn, _, err := c.Attach(ctx, api.AttachArgs{Name: name, ReadOnly: true})
	if err != nil {
		t.Fatalf("connect to the worker of %s: %v", name, err)
	}
	wc := proto.NewClient(conn)
	defer wc.Close()
	info, err := wc.Info(ctx)
	if err != nil {
		t.Fatalf("info of %s: %v", name, err)
	}
	return info
}

// promptBox finds the CLI's prompt box in the lines of a screen: the row
// of its top border (a row of "─" right above the "❯" input line) and its
// width; -1 and 0 when there is none.
func promptBox(lines []string) (top, width int) {
	for i := 1; i < len(lines); i++ {
		if border := lines[i-1]; strings.HasPrefix(lines[i], "❯") && border != "" && strings.Trim(border, "─") == "" {
			return i - 1, utf8.RuneCountInString(border)
		}
	}
	return -1, 0
}

// boxWidth is the width of the CLI's prompt box on screen (0: none).
func boxWidth(screen string) int {
	_, w := promptBox(strings.Split(screen, "\n"))
	return w
}

// steady is screen without what the CLI redraws by itself while it idles:
// its animated logo (block elements) and the hints around the prompt box
// (the effort line above it, the mode line below it, which change and
// fade after a turn). Rows keep their place.
func steady(screen string) string {
	lines := strings.Split(screen, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(strings.Map(func(r rune) rune {
			if r >= 0x2580 && r <= 0x259f || r == '~' {
				return ' ' // the logo's block elements
			}
			return r
		}, l), " ")
	}
	if top, _ := promptBox(lines); top >= 0 {
		if top > 0 {
			lines[top-1] = "<hint>"
		}
		// The border, the input line, the bottom border: then hints.
		for i := top + 3; i < len(lines); i++ {
			lines[i] = "<hint>"
		}
	}
	return strings.Join(lines, "\n")
}

// TestRealClaudeAttachInTmux runs the real Claude Code CLI as a session of
// kind claude under the real manager (a legion-pty-worker unit, its hooks
// through `legion hook`), its first turn answered by the fake API, and
// joins it with `legion attach` from panes of a tmux server of its own:
// the TUI is on screen and drawn at the window's width, a resize of the
// tmux window resizes the worker's PTY and the CLI redraws at the new
// width, the detach key leaves the session running, and an attach from a
// new window shows the same screen, with no new request to the API and
// no restart.
func TestRealClaudeAttachInTmux(t *testing.T) {
	claudetest.Binary(t) // skips early without the CLI
	tm := newTmuxServer(t)
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	project := filepath.Join(t.TempDir(), "project")
	if out, err := exec.Command("git", "init", "-q", project).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	// The agent runs with the unit's HOME, the sandbox's: ~/.claude.json
	// there has onboarding done and the project trusted.
	env := claudetest.New(t, claudetest.Options{Home: e.sd.Home, Trusted: []string{project}})
	settings := filepath.Join(t.TempDir(), "settings.json")
	if err := claudetest.WriteSettings(settings, claudetest.Settings{Hook: "'" + e.bin + "' hook"}); err != nil {
		t.Fatal(err)
	}
	session := uuid.New().String()
	const answer = "The lanterns are lit: forty-two of them, all green."
	env.API.Script(session, anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(answer)}})

	const name = "claude-tui"
	a := testLaunch(name, env.Binary, "--settings", settings, "--session-id", session, "light the lanterns")
	a.Cwd, a.Agent = project, proto.AgentClaude
	a.Env = []string{"ANTHROPIC_BASE_URL=" + env.API.URL, "ANTHROPIC_AUTH_TOKEN=" + claudetest.Token, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	c := e.client(ctx)
	if _, err := c.Spawn(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitfor.Check(t, claudetest.Wait, "the agent idle after its first turn", func() error {
		s, err := c.Status(ctx, name)
		if err != nil {
			return err
		}
		if s.Agent == nil || s.Agent.State != api.AgentIdle || s.Agent.LastMessage != answer {
			return fmt.Errorf("session %s, agent %+v", s.State, s.Agent)
		}
		return nil
	})
	requests := len(env.API.MessageRequests(session))

	// tui says what target's pane lacks of the TUI at rest after the
	// turn: the prompt, the answer, the prompt box cols wide, and no
	// "esc to interrupt" (shown while a turn runs).
	tui := func(target string, cols int) (string, error) {
		sc := tm.capture(target)
		if !strings.Contains(sc, "❯ light the lanterns") || !strings.Contains(sc, "● "+answer) ||
			boxWidth(sc) != cols || strings.Contains(sc, "esc to interrupt") {
			return sc, fmt.Errorf("screen (box %d wide):\n%s", boxWidth(sc), sc)
		}
		return sc, nil
	}
	screen := func(target string, cols int) string {
		t.Helper()
		var sc string
		waitfor.Check(t, claudetest.Wait, fmt.Sprintf("the TUI in %s, its prompt box %d wide", target, cols), func() (err error) {
			sc, err = tui(target, cols)
			return err
		})
		return sc
	}
	attach := "'" + e.bin + "' attach " + name
	// The window stays when attach exits, so its last words can be read.
	tm.must("new-session", "-d", "-s", "v", "-n", "first", "-x", "100", "-y", "30", attach,
		";", "set-option", "-w", "-t", "v:first", "remain-on-exit", "on")
	screen("v:first", 100)
	if info := workerInfo(ctx, t, c, name); info.Cols != 100 || info.Rows != 30 {
		t.Errorf("worker's PTY %dx%d with attach in a 100x30 window; want 100x30", info.Cols, info.Rows)
	}

	tm.must("resize-window", "-t", "v:first", "-x", "120", "-y", "40")
	waitfor.Check(t, claudetest.Wait, "the worker's PTY 120x40 after the resize", func() error {
		if info := workerInfo(ctx, t, c, name); info.Cols != 120 || info.Rows != 40 {
			return fmt.Errorf("PTY %dx%d", info.Cols, info.Rows)
		}
		return nil
	})
	before := screen("v:first", 120)

	tm.must("send-keys", "-t", "v:first", `C-\`)
	waitfor.Check(t, claudetest.Wait, "attach to exit 0 on the detach key", func() error {
		if st, err := tm.exitStatus("v:first"); err != nil || st != "0" {
			return fmt.Errorf("exit status %q, %v; screen:\n%s", st, err, tm.capture("v:first"))
		}
		return nil
	})
	if sc := tm.capture("v:first"); !strings.Contains(sc, "[detached from "+name+"]") || strings.Contains(sc, answer) {
		t.Errorf("first window after the detach key:\n%s\nwant the detach message and the agent's screen gone", sc)
	}
	if s, err := c.Status(ctx, name); err != nil || s.State != api.StateRunning {
		t.Errorf("after the detach: session %+v, %v; want it running", s, err)
	}

	// Attach again from a new window of the same size: the same screen.
	tm.must("set-option", "-t", "v", "default-size", "120x40")
	tm.must("new-window", "-d", "-t", "v", "-n", "second", attach)
	want := steady(before)
	waitfor.Check(t, claudetest.Wait, "the second window to show the screen the first showed", func() error {
		after, err := tui("v:second", 120)
		if err != nil {
			return err
		}
		if got := steady(after); got != want {
			return fmt.Errorf("screen:\n%s\nwant (logo and hints aside) what the first window showed:\n%s", after, before)
		}
		return nil
	})

	// The agent was not disturbed: no request since its turn, one run.
	if got := env.API.MessageRequests(session); len(got) != requests {
		t.Errorf("the API got %d requests; want %d, those before the attaches", len(got), requests)
	}
	for _, r := range env.API.MessageRequests("") {
		if r.Unscripted {
			t.Errorf("unscripted request: last user text %q", r.LastUserText())
		}
	}
	s, err := c.Status(ctx, name)
	if err != nil || s.State != api.StateRunning || s.Restarts != 0 || s.Agent == nil || s.Agent.State != api.AgentIdle {
		t.Errorf("session after the attaches: %+v (agent %+v), %v; want running, idle, no restart", s, s.Agent, err)
	}
	if info := workerInfo(ctx, t, c, name); info.Run != 1 || info.Cols != 120 || info.Rows != 40 {
		t.Errorf("worker: run %d, PTY %dx%d; want run 1, 120x40", info.Run, info.Cols, info.Rows)
	}
	if st, err := e.mgr.State(ctx, mustUnit(t, name)); err != nil || st.NRestarts != 0 {
		t.Errorf("unit of %s: %+v, %v; want no restart", name, st, err)
	}

	tm.must("send-keys", "-t", "v:second", `C-\`)
	if _, err := c.End(ctx, name, "the attach test is over"); err != nil {
		t.Fatalf("end: %v", err)
	}
	waitfor.Check(t, claudetest.Wait, "the agent to end as completed", func() error {
		s, err := c.Status(ctx, name)
		if err != nil {
			return err
		}
		if s.State != api.StateExited || s.Exit == nil || s.Exit.Code == nil || *s.Exit.Code != 0 || s.Restarts != 0 {
			return fmt.Errorf("session %s, exit %+v, restarts %d", s.State, s.Exit, s.Restarts)
		}
		return nil
	})
}
