package activation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// testEnv is a private systemd user manager with Legion's units installed
// (the real legion binary behind legion.socket) and a client for it.
type testEnv struct {
	t         testing.TB
	sd        *sdtest.Manager
	bin       string
	mgr       *units.Manager
	helperLog string
	stateDir  string
	runtime   string
}

// waitFor is the generous deadline of every condition the tests poll.
const waitFor = 60 * time.Second

// startEnv starts a manager and installs legion.socket and legion.service
// for the real binary. The test drop-in makes the helper restart at once
// after a crash and lifts the start limit (the defaults are for people, not
// for 60 restarts in a row) and sends its log to a file, there being no
// journal.
func startEnv(t testing.TB) *testEnv {
	t.Helper()
	sd := sdtest.Start(t)
	bin := sdtest.LegionBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	mgr, err := units.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to the private manager: %v", err)
	}
	t.Cleanup(func() { mgr.Close() })
	e := &testEnv{t: t, sd: sd, bin: bin, mgr: mgr, helperLog: filepath.Join(sd.Dir, "helper.log")}
	rt, st, err := defaultDirs()
	if err != nil {
		t.Fatal(err)
	}
	e.runtime, e.stateDir = rt, st
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	dropIn := filepath.Join(unitDir, unitname.HelperUnit+".d", "90-test.conf")
	if err := os.MkdirAll(filepath.Dir(dropIn), 0o700); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("[Unit]\nStartLimitIntervalSec=0\n\n[Service]\nRestartSec=50ms\nStandardOutput=append:%s\nStandardError=append:%s\nEnvironment=LEGION_TEST=1\n", e.helperLog, e.helperLog)
	if err := os.WriteFile(dropIn, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	// legion.socket refuses to trigger more than 20 times in 2s (systemd's
	// default for Accept=no); 60 fast restarts in a row come close.
	sockDropIn := filepath.Join(unitDir, unitname.SocketUnit+".d", "90-test.conf")
	if err := os.MkdirAll(filepath.Dir(sockDropIn), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sockDropIn, []byte("[Socket]\nTriggerLimitIntervalSec=0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "legion.toml"), []byte("[helper]\nlog_level = \"debug\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := units.Install(ctx, units.InstallOptions{UnitDir: unitDir, Bin: bin, Defaults: units.RestartPolicy(config.DefaultTeam().Supervision()), Manager: mgr}); err != nil {
		t.Fatalf("install Legion's units: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(e.helperLog)
			t.Logf("helper log (%s):\n%s", e.helperLog, tail(string(b), 80))
		}
	})
	return e
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// legion runs the CLI with the sandbox's environment.
func (e *testEnv) legion(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = os.Environ()
	var o, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &se
	err = cmd.Run()
	return o.String(), se.String(), err
}

// mustLegion runs the CLI and fails the test when it fails.
func (e *testEnv) mustLegion(ctx context.Context, args ...string) string {
	e.t.Helper()
	out, errOut, err := e.legion(ctx, args...)
	if err != nil {
		e.t.Fatalf("legion %s: %v\nstderr: %s\nstdout: %s", strings.Join(args, " "), err, errOut, out)
	}
	return out
}

// list runs `legion sessions list --json`.
func (e *testEnv) list(ctx context.Context) api.ListResult {
	e.t.Helper()
	var r api.ListResult
	out := e.mustLegion(ctx, "sessions", "list", "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("sessions list --json printed %q: %v", out, err)
	}
	return r
}

// spawn runs `legion spawn --json --name name -- argv...`.
func (e *testEnv) spawn(ctx context.Context, name string, argv ...string) api.SpawnResult {
	e.t.Helper()
	args := append([]string{"spawn", "--json", "--name", name, "--"}, argv...)
	var r api.SpawnResult
	out := e.mustLegion(ctx, args...)
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("spawn --json printed %q: %v", out, err)
	}
	return r
}

// helperPID is the helper's MainPID (0 when it does not run).
func (e *testEnv) helperPID(ctx context.Context) int {
	e.t.Helper()
	st, err := e.mgr.State(ctx, unitname.HelperUnit)
	if err != nil {
		e.t.Fatalf("state of %s: %v", unitname.HelperUnit, err)
	}
	return int(st.MainPID)
}

// stopHelper stops legion.service (legion.socket stays).
func (e *testEnv) stopHelper(ctx context.Context) {
	e.t.Helper()
	if err := e.mgr.Stop(ctx, unitname.HelperUnit); err != nil {
		e.t.Fatalf("stop %s: %v", unitname.HelperUnit, err)
	}
}

// killHelper sends SIGKILL to the helper's main process and waits until
// systemd has seen it die (MainPID changed or gone).
func (e *testEnv) killHelper(ctx context.Context) {
	e.t.Helper()
	pid := e.helperPID(ctx)
	if pid == 0 {
		e.t.Fatalf("kill -9 the helper: it does not run")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		e.t.Fatalf("kill -9 helper %d: %v", pid, err)
	}
	e.poll(ctx, "the helper's death noticed", func() (bool, string) {
		st, err := e.mgr.State(ctx, unitname.HelperUnit)
		if err != nil {
			return false, err.Error()
		}
		return int(st.MainPID) != pid, fmt.Sprintf("MainPID %d, %s/%s", st.MainPID, st.ActiveState, st.SubState)
	})
}

// poll waits for cond with the generous deadline; cond also says what it
// saw, for the failure message.
func (e *testEnv) poll(ctx context.Context, what string, cond func() (bool, string)) {
	e.t.Helper()
	poll(e.t, ctx, what, cond)
}

// poll is testEnv.poll for tests without a testEnv. It gives up at once
// when ctx ends.
func poll(t testing.TB, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	waitfor.Check(t, waitFor, what, func() error {
		ok, saw := cond()
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v; last saw: %s", what, ctx.Err(), saw)
		}
		return fmt.Errorf("last saw: %s", saw)
	})
}

// client dials the helper in-process.
func (e *testEnv) client(ctx context.Context) *api.Client {
	e.t.Helper()
	c, err := api.Dial(ctx)
	if err != nil {
		e.t.Fatalf("dial helper: %v", err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

func isExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}
