package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testName names the sandboxes of these tests.
const testName = "legion-sbt"

// TestMain lets the test binary double as a process that starts a sandbox
// (SANDBOX_TEST_HELPER set): the tests run it to see what happens when a
// sandbox's owner dies, or is not root.
func TestMain(m *testing.M) {
	switch mode := os.Getenv("SANDBOX_TEST_HELPER"); mode {
	case "":
		os.Exit(m.Run())
	case "owner":
		os.Exit(ownerHelper())
	case "start":
		_, err := Start(context.Background(), Options{Dir: os.Getenv("SANDBOX_TEST_DIR"), Name: testName})
		var missing *MissingError
		fmt.Printf("missing=%v err=%v\n", errors.As(err, &missing), err)
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown SANDBOX_TEST_HELPER %q\n", mode)
		os.Exit(2)
	}
}

// ownerReport is what ownerHelper prints once its sandbox runs.
type ownerReport struct {
	Dir     string
	PID     int // the manager's
	UnitPID int
	Cgroups []string
}

// ownerHelper starts a sandbox in $SANDBOX_TEST_DIR and a unit in it,
// prints an ownerReport line, and waits for stdin to end (then it stops the
// sandbox, in case the test died without killing it).
func ownerHelper() int {
	ctx := context.Background()
	s, err := Start(ctx, Options{Dir: os.Getenv("SANDBOX_TEST_DIR"), Name: testName})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Stop(ctx)
	pid, err := startSleeper(ctx, s, "owner-probe")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, err := json.Marshal(ownerReport{s.Dir, s.proc.Pid, pid, s.cgroups})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s\n", b)
	io.Copy(io.Discard, os.Stdin) // until the test kills us or goes away
	return 0
}

// startSleeper runs `sleep infinity` as unit NAME.service in s and returns
// its PID.
func startSleeper(ctx context.Context, s *Sandbox, name string) (int, error) {
	run := exec.CommandContext(ctx, "systemd-run", "--user", "--unit="+name, "--quiet", "sleep", "infinity")
	run.Env = s.Env
	if out, err := run.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("systemd-run: %w: %s", err, out)
	}
	out, err := s.Systemctl(ctx, "show", "--property=MainPID", "--value", name+".service")
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid == 0 {
		return 0, fmt.Errorf("MainPID of %s.service = %q; want a PID", name, out)
	}
	return pid, nil
}

// require skips the test when ok is false; with CI=true it fails instead.
// (units/sdtest.Require, which imports this package.)
func require(t testing.TB, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("prerequisite missing: %s (CI=true, so this fails instead of skipping)", what)
	}
	t.Skipf("prerequisite missing: %s (skipping; with CI=true this fails)", what)
}

// requirePrereqs skips (or with CI=true fails) a test that needs a real
// sandbox on a machine that cannot have one, and returns the layout.
func requirePrereqs(t testing.TB) prereqs {
	t.Helper()
	p, err := checkPrereqs(os.Geteuid())
	what := ""
	if err != nil {
		what = err.Error()
	}
	require(t, what, err == nil)
	_, err = exec.LookPath("systemd-run")
	require(t, "systemd-run in PATH", err == nil)
	return p
}

// shortDir makes a fresh parent directory for sandboxes, short enough for
// the socket paths, removed after the test.
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "sbt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// startSandbox starts a sandbox in dir and stops it when the test ends.
func startSandbox(t testing.TB, o Options) *Sandbox {
	t.Helper()
	s, err := Start(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop at cleanup: %v", err)
		}
	})
	return s
}

// waitTimeout is the generous deadline of what a test waits for.
const waitTimeout = 60 * time.Second

// running reports whether pid is a live process (a zombie is not).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...; comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// assertGone checks that the manager, the given other processes, the
// cgroups and the directory are all gone.
func assertGone(t testing.TB, managerPID int, dir string, cgroups []string, pids ...int) {
	t.Helper()
	for _, pid := range append([]int{managerPID}, pids...) {
		if running(pid) {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	for _, d := range append([]string{dir}, cgroups...) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after Stop, stat %s: %v; want not exist", d, err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
