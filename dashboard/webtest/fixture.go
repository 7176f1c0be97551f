package webtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/contrib/demo"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/dashboard"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// TeamName is the fixture's team.
const TeamName = "demo"

// TeamID gives the team's units their short id.
var TeamID = uuid.MustParse("7eb00000-4c3b-4e2f-9a7f-1a2b3c4d5e6f")

// Options vary the fixture.
type Options struct {
	// Script is the scripted agent's script; "" is the demo's
	// (contrib/demo.Script): every phase in a second or so.
	Script string
	// Issues are added to the team's tracker (Todo) before anything
	// starts; nil adds none.
	Issues []string
	// WIPLimit is the team's wip_limit; 0 is 2.
	WIPLimit int
	// TrackerRefresh is the server's (dashboard.Options); 0 is its default.
	TrackerRefresh time.Duration
	// TeamTOML is more of the team's table (e.g. budget.day_tokens = 1000).
	TeamTOML string
}

// Fixture is a private systemd user manager with Legion's units installed
// for the real binary (the helper socket-activated as in production), a
// team "demo" of the scripted agent with a local tracker, and the
// dashboard's server in this process on a loopback port.
type Fixture struct {
	SD         *sdtest.Manager
	Bin        string
	Manager    *units.Manager
	ConfigPath string
	Team       *team.Team
	Store      *local.Store
	Issues     []string // the IDs of Options.Issues, in order
	WebPort    int      // legion-web.socket's TCP port (web.port; idle_exit 3s)
	Server     *dashboard.Server
	URL        string // http://127.0.0.1:PORT, the server
	Token      string
	LogFile    string // the helper's, the controller's and the workers' output

	t testing.TB
}

// Start sets up the fixture; the team's controller is not started yet
// (StartController), so a test can open a page first. Everything stops at
// the test's cleanup.
func Start(t testing.TB, o Options) *Fixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		sdtest.Require(t, "git (apt-get install git)", false)
	}
	sd := sdtest.Start(t)
	bin := sdtest.LegionBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), WaitFor)
	defer cancel()
	m, err := units.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to the private manager: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	f := &Fixture{SD: sd, Bin: bin, Manager: m, LogFile: filepath.Join(sd.Dir, "legion.log"), t: t}

	ws := filepath.Join(sd.Home, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("# demo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"config", "user.name", "legion-test"},
		{"config", "user.email", "legion-test@example.com"}, {"add", "README.md"}, {"commit", "-q", "-m", "first"},
	} {
		f.run(ctx, "git", append([]string{"-C", ws}, args...)...)
	}
	script := o.Script
	if script == "" {
		script = demo.Script(bin)
	}
	scriptFile := filepath.Join(sd.Home, "agent.script")
	if err := os.WriteFile(scriptFile, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	f.WebPort = freePort(t)
	wip := o.WIPLimit
	if wip == 0 {
		wip = 2
	}
	agent := fmt.Sprintf(`"/usr/bin/env", "LEGION_SCRIPT_FILE=%s", "%s", "scripted-agent"`, scriptFile, bin)
	cfg := fmt.Sprintf(`[helper]
idle_exit = "0s"
log_level = "debug"

[worker]
startup_grace = "1s"

[web]
port = %d
idle_exit = "3s"

[teams.%s]
id = "%s"
workspace = "%s"
issue_prefix = "DEMO"
wip_limit = %d
stale_after = "1h"
restart_cooldown = "1s"
start_limit_burst = 20
start_limit_interval = "10m"
agent.new = [%s, "--session-id", "{session_id}", "{prompt}"]
agent.resume = [%s, "--resume", "{session_id}", "{prompt}"]
%s
`, f.WebPort, TeamName, TeamID, ws, wip, agent, agent, o.TeamTOML)
	f.ConfigPath = filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion", "legion.toml")
	if err := os.MkdirAll(filepath.Dir(f.ConfigPath), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	// Output to a file (a private manager has no journal); the controller
	// ticks every second.
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	ctl, err := unitname.ControllerUnit(TeamName)
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("StandardOutput=append:%s\nStandardError=append:%s\n", f.LogFile, f.LogFile)
	writeFile(t, filepath.Join(unitDir, unitname.HelperUnit+".d", "90-test.conf"), "[Service]\n"+out)
	writeFile(t, filepath.Join(unitDir, unitname.WebUnit+".d", "90-test.conf"), "[Service]\n"+out)
	writeFile(t, filepath.Join(unitDir, ctl+".d", "90-test.conf"),
		fmt.Sprintf("[Service]\nExecStart=\nExecStart=%s controller --interval 1s %%i\n%s", bin, out))
	f.Legion(ctx, "install")

	c, err := config.Load(f.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := c.Team(TeamName)
	state, err := config.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	if f.Team, err = team.Open(ct, c.Path, state); err != nil {
		t.Fatal(err)
	}
	f.Team.Legion = bin // what agents' hooks run, as the CLI sets it
	if f.Store, err = f.Team.Local(); err != nil {
		t.Fatal(err)
	}
	for _, title := range o.Issues {
		is, err := f.Store.Add(ctx, title)
		if err != nil {
			t.Fatalf("add issue %q: %v", title, err)
		}
		f.Issues = append(f.Issues, is.ID)
	}
	if f.Token, err = dashboard.LoadToken(filepath.Join(state, dashboard.TokenFile)); err != nil {
		t.Fatal(err)
	}
	f.startServer(o)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(f.LogFile)
			t.Logf("legion log (%s):\n%s", f.LogFile, tail(string(b), 100))
		}
	})
	return f
}

// startServer runs the dashboard's server in this process until cleanup.
func (f *Fixture) startServer(o Options) {
	t := f.t
	logFile := filepath.Join(f.SD.Dir, "web.log")
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dashboard.New(dashboard.Options{
		Token: f.Token, ConfigPath: f.ConfigPath, TrackerRefresh: o.TrackerRefresh,
		Logger: slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, []net.Listener{l}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("web server: %v", err)
		}
		lf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("web server log (%s):\n%s", logFile, tail(string(b), 60))
		}
	})
	f.Server, f.URL = s, "http://"+l.Addr().String()
}

// LoginURL is the URL that logs a browser in to the fixture's server.
func (f *Fixture) LoginURL() string {
	return f.URL + "/login#t=" + f.Token
}

// StartController starts the team's controller, legion@demo.
func (f *Fixture) StartController() {
	f.t.Helper()
	ctl, _ := unitname.ControllerUnit(TeamName)
	if out, err := f.SD.Systemctl(f.t, "start", ctl); err != nil {
		f.t.Fatalf("start %s: %v\n%s", ctl, err, out)
	}
}

// Legion runs the CLI in the sandbox's environment and returns its
// output, failing the test when it fails.
func (f *Fixture) Legion(ctx context.Context, args ...string) string {
	f.t.Helper()
	return f.run(ctx, f.Bin, args...)
}

func (f *Fixture) run(ctx context.Context, prog string, args ...string) string {
	f.t.Helper()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = os.Environ()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || ctx.Err() != nil {
			f.t.Fatalf("%s %s: %v\nstderr: %s\nstdout: %s", prog, strings.Join(args, " "), err, e.String(), o.String())
		}
		f.t.Fatalf("%s %s: %v", prog, strings.Join(args, " "), err)
	}
	return o.String()
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// freePort is a loopback TCP port nothing listened on a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
