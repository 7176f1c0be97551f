package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/uuid"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/claude"
)

// helperEnv makes the test binary run the agent's Main instead of tests,
// so the tests drive it as a real process.
const helperEnv = "LEGION_SCRIPTED_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(runAgentProcess())
	}
	os.Exit(m.Run())
}

// runAgentProcess is the agent process: what `legion scripted-agent` does.
func runAgentProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Main(ctx, os.Args[1:], os.Stdin, os.Stdout)
	var exit *ExitError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, ErrHelp):
		return 0
	case errors.As(err, &exit):
		return exit.Code
	}
	fmt.Fprintln(os.Stderr, "scripted-agent:", err)
	return 1
}

// world is a home and a working directory for agent processes.
type world struct {
	home, cwd string
	env       []string // extra environment
}

func newWorld(t *testing.T) *world {
	t.Helper()
	cwd, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &world{home: t.TempDir(), cwd: cwd}
}

func (w *world) sessionFile(id uuid.UUID) string { return claude.SessionFile(w.home, w.cwd, id) }

// command is the agent as a process with the given script and arguments.
func (w *world) command(script string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "LEGION_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+w.home, EnvScript+"="+script, helperEnv+"=1")
	cmd.Env = append(cmd.Env, w.env...)
	cmd.Dir = w.cwd
	return cmd
}

// run runs the agent to its end and returns its output and exit code.
func (w *world) run(t *testing.T, script string, args ...string) (string, int) {
	t.Helper()
	cmd := w.command(script, args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run scripted agent: %v", err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// syncBuffer is an output buffer safe to poll while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start starts the agent with its output in a syncBuffer; done is closed
// once it has ended (then cmd.ProcessState is set). The test's cleanup kills
// it (by PID) if it is still running.
func (w *world) start(t *testing.T, script string, args ...string) (cmd *exec.Cmd, out *syncBuffer, done <-chan struct{}) {
	t.Helper()
	cmd = w.command(script, args...)
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { // ends when the process does
		cmd.Wait()
		close(ended)
	}()
	t.Cleanup(func() {
		select {
		case <-ended:
		default:
			cmd.Process.Kill()
			<-ended
		}
	})
	return cmd, out, ended
}

// waitTimeout is the generous deadline of what a test waits for.
const waitTimeout = 30 * time.Second

// readSession parses a session file, failing on any malformed line.
func readSession(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for i, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s line %d: %v: %s", path, i+1, err, l)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestAskWaitsForAnswerOnPTY(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	script := "say thinking\nask Favourite colour? | red | blue\nsay got $ANSWER\nexit 0"
	cmd := w.command(script, "--session-id", id.String(), "pick a colour")
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	out := &syncBuffer{}
	copied := make(chan struct{})
	go func() { // ends at EIO once the agent exits and the PTY closes
		io.Copy(out, ptmx)
		close(copied)
	}()

	waitfor.True(t, waitTimeout, "the question prompt", func() bool { return strings.Contains(out.String(), "answer> ") })
	path := w.sessionFile(id)
	q, waiting, err := claude.PendingQuestion(path)
	if err != nil || !waiting || q.Text() != "Favourite colour?" {
		t.Fatalf("PendingQuestion while asking = %+v, %v, %v; want waiting on %q", q, waiting, err, "Favourite colour?")
	}
	if got := len(q.Questions[0].Options); got != 2 {
		t.Errorf("question has %d options; want 2", got)
	}

	if _, err := ptmx.Write([]byte("blue\r")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent after the answer: %v; output:\n%s", err, out.String())
	}
	<-copied
	if _, waiting, err := claude.PendingQuestion(path); err != nil || waiting {
		t.Errorf("PendingQuestion after the answer = %v, %v; want not waiting", waiting, err)
	}
	if !strings.Contains(out.String(), "answered: blue") {
		t.Errorf("terminal output lacks the answer:\n%s", out.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"text":"got blue"`)) {
		t.Errorf("session file lacks %q:\n%s", "got blue", data)
	}
}

func TestWorkKeepsSessionFresh(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	path := w.sessionFile(id)
	_, out, _ := w.start(t, "tick 20ms\nwork 10m", "--session-id", id.String())
	waitfor.True(t, waitTimeout, "the work step", func() bool { return strings.Contains(out.String(), "step 2: work 10m") })
	first, err := claude.Liveness(path)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, waitTimeout, "liveness to advance during work", func() bool {
		l, err := claude.Liveness(path)
		return err == nil && l.After(first)
	})
}

func TestSubagentKeepsSessionFresh(t *testing.T) {
	w := newWorld(t)
	id := uuid.New()
	path := w.sessionFile(id)
	_, out, _ := w.start(t, "tick 20ms\nsubagent 10m", "--session-id", id.String())
	var subFiles []string
	waitfor.True(t, waitTimeout, "a subagent file with lines", func() bool {
		subFiles, _ = filepath.Glob(filepath.Join(claude.SubagentDir(path), "agent-*.jsonl"))
		if len(subFiles) != 1 {
			return false
		}
		st, err := os.Stat(subFiles[0])
		return err == nil && st.Size() > 0
	})
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	mainMtime := st.ModTime()
	waitfor.True(t, waitTimeout, "liveness past the session file's mtime", func() bool {
		l, err := claude.Liveness(path)
		return err == nil && l.After(mainMtime)
	})
	if st, err := os.Stat(path); err != nil || !st.ModTime().Equal(mainMtime) {
		t.Errorf("session file changed during the subagent step (%v, %v); want it quiet", st.ModTime(), err)
	}
	if !strings.Contains(out.String(), "step 2: subagent 10m") {
		t.Errorf("output lacks the subagent step:\n%s", out.String())
	}
	for _, l := range readSession(t, subFiles[0]) {
		if l["isSidechain"] != true || l["sessionId"] != id.String() {
			t.Errorf("subagent line %v: want isSidechain true and sessionId %s", l, id)
		}
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
	if code != 1 || !strings.Contains(out, "already in use") {
		t.Errorf("new run on an existing session = %d, %q; want 1 and \"already in use\"", code, out)
	}
	other := uuid.New()
	out, code = w.run(t, script, "--resume", other.String())
	if code != 1 || !strings.Contains(out, "no conversation found") {
		t.Errorf("resume of a missing session = %d, %q; want 1 and \"no conversation found\"", code, out)
	}
	if _, err := os.Stat(w.sessionFile(other)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("resume of a missing session created %s (%v)", w.sessionFile(other), err)
	}
}

func TestEndings(t *testing.T) {
	t.Run("crash code", func(t *testing.T) {
		w := newWorld(t)
		if out, code := w.run(t, "say bye\ncrash 7"); code != 7 {
			t.Errorf("exit code = %d; want 7; output:\n%s", code, out)
		}
	})
	t.Run("crash signal", func(t *testing.T) {
		w := newWorld(t)
		cmd := w.command("crash KILL")
		err := cmd.Run()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("crash KILL: %v (status %v); want killed by SIGKILL", err, ws)
		}
	})
	t.Run("hang until terminated", func(t *testing.T) {
		w := newWorld(t)
		cmd, out, done := w.start(t, "say still here\nhang")
		waitfor.True(t, waitTimeout, "the hang step", func() bool { return strings.Contains(out.String(), "step 2: hang") })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("timed out waiting for the agent to end after SIGTERM")
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit code after SIGTERM = %d; want 0", code)
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
		out, code := w.run(t, "say hi\ndance", "--session-id", id.String())
		if code != 1 || !strings.Contains(out, `script line 2 "dance"`) {
			t.Errorf("bad script = %d, %q; want 1 and the line named", code, out)
		}
		if _, err := os.Stat(w.sessionFile(id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a bad script wrote its session file (%v)", err)
		}
	})
}

func TestRunCommand(t *testing.T) {
	w := newWorld(t)
	w.env = []string{"LEGION_MODE=implement"}
	id := uuid.New()
	script := "if-env LEGION_MODE=implement run touch 'made by $LEGION_MODE'\nif-env LEGION_MODE=plan run touch wrong\nrun false\nsay unreachable"
	out, code := w.run(t, script, "--session-id", id.String())
	if code != 1 || !strings.Contains(out, "run false") {
		t.Errorf("run false = %d, %q; want exit 1 naming the command", code, out)
	}
	if _, err := os.Stat(filepath.Join(w.cwd, "made by implement")); err != nil {
		t.Errorf("run touch did not create its file in the cwd: %v", err)
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
