package ptyworker

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/ptyworker/proto"
)

// notes records what the worker tells systemd.
type notes struct {
	mu     sync.Mutex
	states []string
}

func (n *notes) notify(state string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.states = append(n.states, state)
	return nil
}

func (n *notes) any(prefix string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.ContainsFunc(n.states, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// TestPrepare: the spec's prepare commands run in order before the
// agent, in "/", with the agent's environment but not its hook socket;
// the second makes the agent's working directory, which did not exist,
// and the agent sees what the first wrote.
func TestPrepare(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work") // made by the second command
	spec := testSpec(t, "/bin/sh", "-c", `cat prepared > seen; pwd >> seen`)
	spec.Cwd = work
	spec.Env = []string{"FROM_SPEC=spec-value"}
	t.Setenv(proto.EnvHookSocket, "/from/the/environment.sock")
	spec.Prepare = [][]string{
		{"/bin/sh", "-c", `echo "$PWD $LEGION_ISSUE $FROM_SPEC hook=$` + proto.EnvHookSocket + `" > "$0"`, filepath.Join(dir, "prepared")},
		{"/bin/sh", "-c", `mkdir "$0" && mv "$1" "$0"/`, work, filepath.Join(dir, "prepared")},
	}
	var n notes
	if err := Run(ctxT(t), spec, Options{Logger: testLogger(t), Notify: n.notify}); err != nil {
		t.Fatalf("Run = %v; want nil (the agent exited 0)", err)
	}
	b, err := os.ReadFile(filepath.Join(work, "seen"))
	if err != nil {
		t.Fatalf("the agent wrote nothing: %v", err)
	}
	if want := "/ ENG-1 spec-value hook=\n" + work + "\n"; string(b) != want {
		t.Errorf("the agent saw %q; want %q", b, want)
	}
	if !n.any("EXTEND_TIMEOUT_USEC=360000000\nSTATUS=preparing (2 of 2): sh") {
		t.Errorf("notified %q; want an EXTEND_TIMEOUT_USEC= of the prepare timeout and a minute per command", n.states)
	}
	tr, err := os.ReadFile(spec.TranscriptPath())
	if err != nil || !strings.Contains(string(tr), "run 1 prepare 1 of 2: sh") {
		t.Errorf("transcript = %q, %v; want its prepare markers", tr, err)
	}
}

// TestPrepareFails: a prepare command that fails keeps the agent from
// starting; the run fails (not ErrAgentNotStartable: a restart may do
// better) with the command's exit and the tail of its stderr in the
// registry's last exit. The next start runs it again and, once it
// succeeds, starts the agent.
func TestPrepareFails(t *testing.T) {
	dir := t.TempDir()
	ok, started := filepath.Join(dir, "ok"), filepath.Join(dir, "started")
	spec := testSpec(t, "/bin/sh", "-c", `touch "$0"`, started)
	spec.Prepare = [][]string{
		{"/bin/true"},
		{"/bin/sh", "-c", `test -e "$0" && exit; echo 'clone: cloning...' >&2; printf 'fatal: repository\nnot found\n' >&2; exit 3`, ok, "ensure"},
	}
	var n notes
	err := Run(ctxT(t), spec, Options{Logger: testLogger(t), Notify: n.notify})
	var pe *PrepareError
	if !errors.As(err, &pe) || errors.Is(err, ErrAgentNotStartable) {
		t.Fatalf("Run = %v; want a *PrepareError, not ErrAgentNotStartable", err)
	}
	const want = "prepare: sh: exit 3: clone: cloning... | fatal: repository | not found"
	if pe.Index != 1 || pe.Error() != want {
		t.Errorf("PrepareError = %d %q; want index 1, %q", pe.Index, pe.Error(), want)
	}
	if _, err := os.Stat(started); err == nil {
		t.Errorf("the agent was started after its prepare failed")
	}
	r, err := proto.ReadRegistry(spec.RegistryPath())
	if err != nil || r.State != proto.StateExited || r.LastExit == nil || r.LastExit.Reason != proto.StartFailedPrefix+want {
		t.Fatalf("registry = %+v, %v; want state exited, last exit %q", r, err, proto.StartFailedPrefix+want)
	}
	if !n.any("STATUS=" + proto.StartFailedPrefix + want) {
		t.Errorf("notified %q; want the cause in STATUS=", n.states)
	}
	if n.any("READY=1") {
		t.Errorf("notified %q; want no READY=1 before the agent starts", n.states)
	}

	// The restart: the command succeeds now.
	if err := os.WriteFile(ok, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctxT(t), spec, Options{Logger: testLogger(t)}); err != nil {
		t.Fatalf("Run again = %v; want nil", err)
	}
	if _, err := os.Stat(started); err != nil {
		t.Errorf("the agent did not start once its prepare succeeded: %v", err)
	}
	if r, err := proto.ReadRegistry(spec.RegistryPath()); err != nil || r.Run != 2 {
		t.Errorf("registry = %+v, %v; want run 2", r, err)
	}
}

// TestPrepareErrors: how a prepare command that cannot run, or runs too
// long, is reported.
func TestPrepareErrors(t *testing.T) {
	t.Setenv("PATH", "/nonexistent/bin:/usr/bin:/bin")
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"not in PATH", []string{"legion-test-no-such", "worktree", "ensure", "--x"},
			"prepare: legion-test-no-such worktree ensure: exec legion-test-no-such: executable file not found in $PATH (PATH=/nonexistent/bin:/usr/bin:/bin)"},
		{"no such file", []string{"/nonexistent/prog", "https://example.com/secret@repo"}, "prepare: prog: exec /nonexistent/prog: no such file or directory"},
		// Its group is killed: the background sleep does not hold stderr.
		{"timeout", []string{"/bin/sh", "-c", "echo waiting >&2; sleep 60 & sleep 60"}, "prepare: sh: timed out after 200ms: waiting"},
		{"signal", []string{"/bin/sh", "-c", "kill -9 $$"}, "prepare: sh: killed by SIGKILL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t, "/bin/true")
			spec.Prepare = [][]string{tc.argv}
			err := Run(ctxT(t), spec, Options{Logger: testLogger(t), PrepareTimeout: 200 * time.Millisecond})
			var pe *PrepareError
			if !errors.As(err, &pe) || pe.Error() != tc.want {
				t.Errorf("Run with prepare %q = %v; want %q", tc.argv, err, tc.want)
			}
		})
	}
}

func TestPrepareName(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/bin/legion", "worktree", "ensure", "team", "ENG-1"}, "legion worktree ensure"},
		{[]string{"legion", "worktree", "clone", "https://x@example.com/r.git", "/legion/repo"}, "legion worktree clone"},
		{[]string{"git", "-C", "/w", "fetch"}, "git"},
		{[]string{"sh"}, "sh"},
		{[]string{"tool", "Secret"}, "tool"},
	}
	for _, tc := range tests {
		if got := prepareName(tc.argv); got != tc.want {
			t.Errorf("prepareName(%q) = %q; want %q", tc.argv, got, tc.want)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	var b tailBuffer
	b.Write([]byte(strings.Repeat("x", 2*prepareTail)))
	b.Write([]byte("\nlast\x1b[31m line\r\n\xff"))
	got := b.line()
	if !strings.HasSuffix(got, " | last [31m line") || len(got) > prepareTail+10 {
		t.Errorf("tail = %q (%d bytes); want at most %d bytes ending in the last line", got, len(got), prepareTail)
	}
}

// TestStaleGitLockMovedAside: a run starts in a worktree where a git
// killed mid-commit (a reboot during the agent's `git commit`) left
// index.lock: the worker moves it aside before the agent starts, whose
// git then works. Without it the agent's git failed at every run until
// the start limit (the booted tier's reboot chaos run).
func TestStaleGitLockMovedAside(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	spec := testSpec(t, "sh", "-c", `git add -A && echo ADDED; read end`)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "t"}, {"config", "user.email", "t@example.com"}} {
		if out, err := exec.Command("git", append([]string{"-C", spec.Cwd}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	lock := filepath.Join(spec.Cwd, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "ADDED")
	if m, _ := filepath.Glob(lock + ".stale-*"); len(m) != 1 {
		t.Errorf("%s.stale-*: %q; want the killed git's lock kept aside", lock, m)
	}
	c.SendInput([]byte("\n"))
	if err := tw.wait(); err != nil {
		t.Errorf("Run() = %v", err)
	}
}

// TestEnvFiles: the agent and its prepare commands get the variables of
// Spec.EnvFiles from their files (a Secret's keys on a cluster), a
// trailing newline cut, over the spec's Env of the same name; the value
// is in no transcript or log line. A file that is not there keeps the
// agent from starting for good (ErrAgentNotStartable), naming the
// variable and the file.
func TestEnvFiles(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	if err := os.WriteFile(keyFile, []byte("sk-from-the-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	seen := filepath.Join(dir, "seen")
	spec := testSpec(t, "/bin/sh", "-c", `echo "agent $API_KEY" >> "$0"`, seen)
	spec.Env = []string{"API_KEY=from-the-spec"}
	spec.EnvFiles = map[string]string{"API_KEY": keyFile}
	spec.Prepare = [][]string{{"/bin/sh", "-c", `echo "prepare $API_KEY" >> "$0"`, seen}}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuilder
	if err := Run(ctxT(t), spec, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}); err != nil {
		t.Fatalf("Run = %v; want nil (the agent exited 0)", err)
	}
	if b, err := os.ReadFile(seen); err != nil || string(b) != "prepare sk-from-the-secret\nagent sk-from-the-secret\n" {
		t.Errorf("the prepare command and the agent saw %q (%v); want the file's value, its newline cut", b, err)
	}
	tr, _ := os.ReadFile(spec.TranscriptPath())
	if strings.Contains(string(tr)+logs.String(), "sk-from-the-secret") || !strings.Contains(logs.String(), "agent started") {
		t.Errorf("the value is in the transcript or the log (or nothing was logged):\n%s\n%s", tr, logs.String())
	}

	missing := filepath.Join(dir, "not-there")
	spec = testSpec(t, "/bin/true")
	spec.EnvFiles = map[string]string{"API_KEY": missing}
	err := Run(ctxT(t), spec, Options{Logger: testLogger(t)})
	if !errors.Is(err, ErrAgentNotStartable) || !strings.Contains(err.Error(), "API_KEY from "+missing) {
		t.Errorf("Run with a missing file = %v; want ErrAgentNotStartable naming API_KEY and %s", err, missing)
	}

	for _, bad := range []map[string]string{{"1KEY": "/a"}, {"KEY": "relative"}, {"": "/a"}} {
		spec.EnvFiles = bad
		if err := spec.Validate(); err == nil || !strings.Contains(err.Error(), "env_files") {
			t.Errorf("Validate with env_files %v = %v; want an error naming env_files", bad, err)
		}
	}
}

// lockedBuilder is a strings.Builder for a logger's lines, safe for the
// worker's goroutines.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
