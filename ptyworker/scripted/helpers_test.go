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
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/internal/waitfor"
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
	err := Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout)
	var exit *ExitError
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return 0
	case errors.As(err, &exit):
		if exit.Message != "" {
			fmt.Fprintln(os.Stderr, exit.Message)
		}
		return exit.Code
	}
	fmt.Fprintln(os.Stderr, "scripted-agent:", err)
	return 1
}

// waitTimeout is the generous deadline of what a test waits for.
const waitTimeout = 30 * time.Second

// world is a home, a working directory and a hook log for agent
// processes.
type world struct {
	home, cwd, dir string
	env            []string // extra environment
}

func newWorld(t *testing.T) *world {
	t.Helper()
	cwd, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &world{home: t.TempDir(), cwd: cwd, dir: t.TempDir()}
}

func (w *world) sessionFile(id uuid.UUID) string { return claudecode.SessionFile(w.home, w.cwd, id) }

// hookLog is where the settings' hooks append their payloads.
func (w *world) hookLog() string { return filepath.Join(w.dir, "hooks.jsonl") }

// gate is the file a held PermissionRequest hook waits for.
func (w *world) gate() string { return filepath.Join(w.dir, "gate") }

// allEvents are the events the test settings log.
var allEvents = []string{
	EventSessionStart, EventUserPromptSubmit, EventPreToolUse, EventPostToolUse, EventPostToolUseFailure,
	EventPermissionRequest, EventNotification, EventStop, EventStopFailure,
	EventSubagentStart, EventSubagentStop, EventSessionEnd,
}

// Commands of a PermissionRequest hook, beside the logging one.
const (
	decideAllow = `cat >/dev/null; echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}'`
	decideDeny  = `cat >/dev/null; echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"no: reason"}}}'`
	decideNone  = `cat >/dev/null`
)

// holdHook is a PermissionRequest hook that waits for the gate file, then
// prints it (an empty file: no decision), as Legion's worker holds the
// hook until a person decides.
func (w *world) holdHook() string {
	return fmt.Sprintf(`cat >/dev/null; while [ ! -e %[1]s ]; do sleep 0.02; done; cat %[1]s`, w.gate())
}

// settings writes a settings file whose hooks log every event to hookLog,
// with decide (if not "") as a second PermissionRequest hook and perms as
// its permissions, and returns its path.
func (w *world) settings(t *testing.T, decide string, perms map[string]any) string {
	t.Helper()
	logHook := fmt.Sprintf(`p=$(cat); printf '%%s\n' "$p" >> %s`, w.hookLog())
	hooks := map[string]any{}
	for _, e := range allEvents {
		entries := []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": logHook, "timeout": 30}}}}
		if e == EventPermissionRequest && decide != "" {
			entries = append(entries, map[string]any{"matcher": "*", "hooks": []any{map[string]any{"type": "command", "command": decide, "timeout": 86400}}})
		}
		hooks[e] = entries
	}
	s := map[string]any{"hooks": hooks}
	if perms != nil {
		s["permissions"] = perms
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(w.dir, "settings.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// events returns the hook payloads logged so far.
func (w *world) events(t *testing.T) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(w.hookLog())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// A hook may be writing its line as the log is read: only whole lines
	// (ending in a newline) count; the rest is read next time.
	whole := string(data[:bytes.LastIndexByte(data, '\n')+1])
	var evs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(whole), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("hook payload %q: %v", l, err)
		}
		evs = append(evs, m)
	}
	return evs
}

// named returns the payloads of event.
func named(evs []map[string]any, event string) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e["hook_event_name"] == event {
			out = append(out, e)
		}
	}
	return out
}

// eventNames lists the events' names in order.
func eventNames(evs []map[string]any) []string {
	var names []string
	for _, e := range evs {
		names = append(names, fmt.Sprint(e["hook_event_name"]))
	}
	return names
}

// waitEvent waits until n payloads of event were logged and returns them.
func (w *world) waitEvent(t *testing.T, event string, n int) []map[string]any {
	t.Helper()
	var got []map[string]any
	waitfor.True(t, waitTimeout, fmt.Sprintf("%d %s hook(s)", n, event), func() bool {
		got = named(w.events(t), event)
		return len(got) >= n
	})
	return got
}

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

// run runs the agent with no input (it ends at its prompt) and returns
// its output and exit code.
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

// ptyAgent is an agent process on a real PTY.
type ptyAgent struct {
	cmd  *exec.Cmd
	ptmx *os.File
	out  *syncBuffer
	done chan struct{} // closed once it has ended (then cmd.ProcessState is set)
}

// start starts the agent on a PTY. The test's cleanup kills it (by PID)
// if it is still running.
func (w *world) start(t *testing.T, script string, args ...string) *ptyAgent {
	t.Helper()
	p := &ptyAgent{cmd: w.command(script, args...), out: &syncBuffer{}, done: make(chan struct{})}
	ptmx, err := pty.Start(p.cmd)
	if err != nil {
		t.Fatal(err)
	}
	p.ptmx = ptmx
	copied := make(chan struct{})
	go func() { // ends at EIO once the agent exits and the PTY closes
		io.Copy(p.out, ptmx)
		close(copied)
	}()
	go func() { // ends when the process does
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		ptmx.Close()
		<-copied
		if t.Failed() {
			t.Logf("agent output:\n%s", p.out.String())
		}
	})
	return p
}

// waitOutput waits until the output holds s at least n times.
func (p *ptyAgent) waitOutput(t *testing.T, s string, n int) {
	t.Helper()
	waitfor.True(t, waitTimeout, fmt.Sprintf("%d× %q on the terminal", n, s), func() bool {
		return strings.Count(p.out.String(), s) >= n
	})
}

// send types keys.
func (p *ptyAgent) send(t *testing.T, keys string) {
	t.Helper()
	if _, err := p.ptmx.Write([]byte(keys)); err != nil {
		t.Fatal(err)
	}
}

// signal sends sig to the agent.
func (p *ptyAgent) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// exitCode waits for the agent's end and returns its exit code.
func (p *ptyAgent) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for the agent to end")
	}
	return p.cmd.ProcessState.ExitCode()
}

// running reports whether the agent still runs.
func (p *ptyAgent) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

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

// toolResults returns the session's tool_result user lines.
func toolResults(t *testing.T, path string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range readSession(t, path) {
		msg, _ := l["message"].(map[string]any)
		blocks, _ := msg["content"].([]any)
		if l["type"] == "user" && len(blocks) == 1 && blocks[0].(map[string]any)["type"] == "tool_result" {
			out = append(out, l)
		}
	}
	return out
}

// resultBlock is a tool_result line's block.
func resultBlock(l map[string]any) map[string]any {
	return l["message"].(map[string]any)["content"].([]any)[0].(map[string]any)
}

// userTexts returns the session's user lines that are text: prompts and
// interruptions.
func userTexts(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, l := range readSession(t, path) {
		if l["type"] != "user" || l["isSidechain"] == true {
			continue
		}
		switch c := l["message"].(map[string]any)["content"].(type) {
		case string:
			out = append(out, c)
		case []any:
			if b := c[0].(map[string]any); b["type"] == "text" {
				out = append(out, fmt.Sprint(b["text"]))
			}
		}
	}
	return out
}
