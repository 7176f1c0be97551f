package doctor

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/hostprobe"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// sdtestTimeout bounds talking to a test manager; generous for slow CI.
const sdtestTimeout = 60 * time.Second

// These tests change the environment (PATH, XDG_RUNTIME_DIR, the bus
// address) with t.Setenv, so none runs in parallel.

// sandbox is a controlled environment for Run: its own runtime dir with no
// manager and no bus, a config path, a unit dir and a lingering dir, all
// empty.
type sandbox struct {
	dir  string
	opts Options
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	// Short: socket paths must stay below 108 bytes.
	dir, err := os.MkdirTemp("", "doc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	runtime := filepath.Join(dir, "run")
	for _, d := range []string{runtime, filepath.Join(dir, "linger"), filepath.Join(dir, "ws")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(runtime, "no-bus"))
	return &sandbox{dir: dir, opts: Options{
		ConfigPath: filepath.Join(dir, "legion.toml"),
		UnitDir:    filepath.Join(dir, "units"),
		Bin:        "/usr/bin/legion",
		TeamUnits:  teamUnits,
		RuntimeDir: runtime,
		User:       "alice",
		LingerDir:  filepath.Join(dir, "linger"),
		SystemBus:  "unix:path=" + filepath.Join(runtime, "no-system-bus"),
	}}
}

// useManager points the environment and the options, which newSandbox
// pointed at an empty runtime dir, back to the manager m.
func (s *sandbox) useManager(t *testing.T, m *sdtest.Manager) {
	t.Helper()
	t.Setenv("XDG_RUNTIME_DIR", m.RuntimeDir)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", m.BusAddress)
	s.opts.RuntimeDir = m.RuntimeDir
	s.opts.UnitDir = filepath.Join(m.Home, ".config", "systemd", "user")
}

// teamUnits maps teams as `legion install` does (cmd/legion/install.go).
func teamUnits(teams []config.Team) []units.TeamUnits {
	var out []units.TeamUnits
	for _, t := range teams {
		out = append(out, units.TeamUnits{
			Name: t.Name, ShortID: t.ShortID(), RestartCooldown: t.RestartCooldown,
			StartLimitInterval: t.StartLimitInterval, StartLimitBurst: uint32(t.StartLimitBurst),
			MemoryMax: t.MemoryMax, CPUQuotaPercent: uint(t.CPUQuotaPercent), TasksMax: t.TasksMax,
			AgentMemoryMax: t.Agent.MemoryMax, AgentCPUWeight: uint64(t.Agent.CPUWeight),
			HardeningRelax: t.Hardening.Relax, HardeningAdd: t.Hardening.Add,
		})
	}
	return out
}

// writeConfig writes legion.toml with one team "demo" (workspace in the
// sandbox) followed by extra lines of its table.
func (s *sandbox) writeConfig(t *testing.T, extra string) {
	t.Helper()
	text := fmt.Sprintf("[teams.demo]\nid = \"6f1c2e0a-3b5d-4c8e-9a7f-2d4b6c8e0a1f\"\nworkspace = %q\n%s",
		filepath.Join(s.dir, "ws"), extra)
	if err := os.WriteFile(s.opts.ConfigPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// pathWith makes a directory holding links to the named programs and sets
// PATH to it alone.
func pathWith(t *testing.T, progs ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range progs {
		target, err := exec.LookPath(p)
		if err != nil {
			sdtest.Require(t, p+" installed", false)
		}
		if err := os.Symlink(target, filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	return dir
}

// find returns the check called name.
func find(t *testing.T, checks []Check, name string) Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, checks)
	return Check{}
}

// expect compares a check's status and that its detail and fix contain
// the given texts.
func expect(t *testing.T, c Check, status Status, detail, fix string) {
	t.Helper()
	if c.Status != status {
		t.Errorf("check %q: status = %s; want %s (detail: %s)", c.Name, c.Status, status, c.Detail)
	}
	if !strings.Contains(c.Detail, detail) {
		t.Errorf("check %q: detail = %q; want it to contain %q", c.Name, c.Detail, detail)
	}
	if !strings.Contains(c.Fix, fix) {
		t.Errorf("check %q: fix = %q; want it to contain %q", c.Name, c.Fix, fix)
	}
	if status != OK && c.Fix == "" {
		t.Errorf("check %q: status %s without a fix", c.Name, c.Status)
	}
}

func TestTools(t *testing.T) {
	tests := []struct {
		name      string
		path      []string
		tmux, git Status
	}{
		{"both", []string{"git", "tmux"}, OK, OK},
		{"no tmux", []string{"git"}, Fail, OK},
		{"neither", nil, Fail, Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSandbox(t)
			pathWith(t, tt.path...)
			checks := Run(t.Context(), s.opts)
			fix := func(st Status, prog string) string {
				if st == OK {
					return ""
				}
				return "apt install " + prog
			}
			expect(t, find(t, checks, CheckTmux), tt.tmux, "tmux", fix(tt.tmux, "tmux"))
			expect(t, find(t, checks, CheckGit), tt.git, "git", fix(tt.git, "git"))
		})
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name     string
		config   string // "" means no file
		status   Status
		detail   string
		fix      string
		agentRun bool // an agent check appears
	}{
		{"missing", "", Warn, "does not exist", "legion team add", false},
		{"good", "wip_limit = 2\n", OK, "1 team (demo)", "", true},
		{"bad key", "stale_afterr = \"1m\"\n", Fail, `teams.demo.stale_afterr: unknown key "stale_afterr"`, "legion.toml(5)", false},
		{"bad value", "stale_after = \"soon\"\n", Fail, "teams.demo.stale_after", "correct", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSandbox(t)
			if tt.config != "" {
				s.writeConfig(t, tt.config)
			}
			checks := Run(t.Context(), s.opts)
			c := find(t, checks, CheckConfig)
			expect(t, c, tt.status, tt.detail, tt.fix)
			if tt.status == Fail && !strings.Contains(c.Detail, s.opts.ConfigPath) {
				t.Errorf("config check detail %q does not name the file %s", c.Detail, s.opts.ConfigPath)
			}
			agent := false
			for _, c := range checks {
				agent = agent || c.Name == agentCheckName("demo")
			}
			if agent != tt.agentRun {
				t.Errorf("agent check present = %v; want %v", agent, tt.agentRun)
			}
			if tt.status == Fail {
				expect(t, find(t, checks, CheckUnits), Warn, "config does not load", "config")
			}
		})
	}
}

func TestAgent(t *testing.T) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("true not in PATH: %v", err)
	}
	// The manager's PATH is systemd's default, which has true.
	m := sdtest.Start(t)
	tests := []struct {
		name   string
		agent  string
		status Status
		detail string
		fix    string
	}{
		{"in PATH", `agent.new = ["true", "{prompt}"]` + "\n" + `agent.resume = ["true", "{session_id}"]`, OK, "true (in the user manager's PATH", ""},
		{"absolute", fmt.Sprintf("agent.new = [%q]\nagent.resume = [%q]", truePath, truePath), OK, truePath, ""},
		{"default claude missing", "", Fail, "claude not found in the user manager's PATH", "teams.demo.agent.new"},
		{"missing absolute", `agent.new = ["/nonexistent/agent"]` + "\n" + `agent.resume = ["/nonexistent/agent"]`, Fail,
			"/nonexistent/agent is not an executable file", "install the agent"},
		{"placeholder", `agent.new = ["{workspace}/bin/agent"]` + "\n" + `agent.resume = ["true"]`, Warn, "placeholder", "agent.resume"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSandbox(t)
			s.useManager(t, m)
			pathWith(t, "true")
			s.writeConfig(t, tt.agent+"\n")
			expect(t, find(t, Run(t.Context(), s.opts), agentCheckName("demo")), tt.status, tt.detail, tt.fix)
		})
	}
}

// TestLingerWithoutLogind: with no logind, lingering is unknown whatever
// the lingering directory holds: no system bus at all (the bare sandbox),
// or a bus with no org.freedesktop.login1 on it.
func TestLingerWithoutLogind(t *testing.T) {
	s := newSandbox(t)
	if err := os.WriteFile(filepath.Join(s.opts.LingerDir, "alice"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, find(t, Run(t.Context(), s.opts), CheckLinger), Warn, "no logind: lingering unknown (no system bus at", "loginctl enable-linger alice")
	m := sdtest.Start(t)
	s.opts.SystemBus = m.BusAddress // a real dbus-daemon, without logind
	expect(t, Linger(t.Context(), s.opts), Warn, "no logind: lingering unknown (org.freedesktop.login1 is not on the system bus)", "loginctl enable-linger alice")
}

// TestLingerFile: with logind, lingering is what its lingering directory
// says (the booted tier checks it against a real logind).
func TestLingerFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alice"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, dir, user string
		status          Status
		detail, fix     string
	}{
		{"enabled", dir, "alice", OK, "enabled for alice", ""},
		{"not enabled", dir, "bob", Warn, "not enabled for bob: Legion's units (every agent) stop when the last session of bob ends", "loginctl enable-linger bob"},
		{"no user name", dir, "", Warn, "cannot tell: the current user has no name", "loginctl show-user"},
		{"unreadable directory", filepath.Join(dir, "alice"), "x", Warn, "cannot tell", "loginctl show-user x -p Linger"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, lingerFile(tt.dir, tt.user), tt.status, tt.detail, tt.fix)
		})
	}
}

// TestLimits: the limits check says whether a real user manager enforces
// legion.toml's memory and CPU limits, as a unit with them found in its
// own cgroup, naming the keys a team sets when they are not.
func TestLimits(t *testing.T) {
	s := newSandbox(t)
	m := sdtest.Start(t)
	s.useManager(t, m)
	s.opts.Bin = sdtest.LegionBinary(t)
	s.writeConfig(t, "agent.memory_max = \"1G\"\n")
	rep := hostprobe.Probe(t.Context(), hostprobe.Options{Bin: s.opts.Bin})
	if rep.Err != nil {
		t.Fatal(rep.Err)
	}
	got := find(t, Run(t.Context(), s.opts), CheckLimits)
	var memory, cpu hostprobe.Result
	for _, r := range rep.Results {
		switch r.Check {
		case hostprobe.CheckMemory:
			memory = r
		case hostprobe.CheckCPU:
			cpu = r
		}
	}
	switch {
	case memory.OK && cpu.OK:
		expect(t, got, OK, "enforced", "")
	case !cpu.OK:
		expect(t, got, Warn, "not enforced here, though legion.toml sets teams.demo.agent.memory_max", "cgroup v2")
		if !strings.Contains(got.Detail, "CPU limits (CPUQuota, CPUWeight): "+cpu.Why) {
			t.Errorf("detail %q does not give the CPU probe's reason %q", got.Detail, cpu.Why)
		}
	default:
		expect(t, got, Warn, "memory limits (MemoryMax, MemorySwapMax): "+memory.Why, "cgroup v2")
	}
}

func TestNoManager(t *testing.T) {
	s := newSandbox(t)
	s.writeConfig(t, `agent.new = ["true"]`+"\n"+`agent.resume = ["true"]`+"\n")
	pathWith(t, "true")
	checks := Run(t.Context(), s.opts)
	expect(t, find(t, checks, CheckManager), Fail, "no systemd user manager reachable", "loginctl enable-linger")
	// Without the manager's environment, the shell's PATH is a guess.
	expect(t, find(t, checks, agentCheckName("demo")), Warn, "the user manager's environment, which workers get, cannot be read", CheckManager)
	// The message is units.ErrNoManager's, with what was tried.
	_, err := units.Connect(t.Context())
	if err == nil {
		t.Fatal("units.Connect found a manager in an empty runtime dir")
	}
	expect(t, find(t, checks, CheckManager), Fail, err.Error(), "")
	expect(t, find(t, checks, CheckBus), Warn, "no session bus", "dbus-user-session")
	if Failed(checks) == 0 {
		t.Errorf("Failed(%+v) = 0; want > 0", checks)
	}
}

// writeUnits writes into the unit dir the files `legion install` writes
// for the config on a host that applies every directive, and returns them.
func (s *sandbox) writeUnits(t *testing.T) []units.File {
	t.Helper()
	cfg := mustLoad(t, s.opts.ConfigPath)
	files, err := units.Generate(units.GenerateOptions{Bin: s.opts.Bin, Defaults: units.RestartPolicy(config.DefaultTeam().Supervision()), Teams: teamUnits(cfg.Teams), Web: &units.WebUnits{Listen: cfg.Web.Listen()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p := filepath.Join(s.opts.UnitDir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func TestUnitFiles(t *testing.T) {
	s := newSandbox(t)
	s.writeConfig(t, "")
	check := func() Check { return find(t, Run(t.Context(), s.opts), CheckUnits) }
	expect(t, check(), Fail, "missing: legion-6f1c2e0a-.service.d/50-legion.conf, legion-6f1c2e0a.slice, legion-web.service, legion-web.socket, legion.service, legion.socket", "legion install")

	files := s.writeUnits(t)
	expect(t, check(), OK, fmt.Sprintf("%d files current", len(files)), "")

	// A unit for another binary is out of date.
	other := s.opts
	other.Bin = "/opt/legion/bin/legion"
	expect(t, find(t, Run(t.Context(), other), CheckUnits), Fail, "out of date: legion-web.service, legion.service, legion@.service", "legion install")

	// A team removed from the config leaves its files behind.
	if err := os.WriteFile(s.opts.ConfigPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, check(), Fail, "left from teams no longer configured: legion-6f1c2e0a-.service.d/50-legion.conf, legion-6f1c2e0a.slice", "legion install")
}

func TestWebAddress(t *testing.T) {
	s := newSandbox(t)
	s.writeConfig(t, "")
	check := func() Check { return find(t, Run(t.Context(), s.opts), CheckWeb) }
	expect(t, check(), OK, "127.0.0.1:7787", "")
	s.writeConfig(t, "[web]\naddress = \"0.0.0.0\"\n")
	expect(t, check(), Warn, "other machines can reach", "web.address")
}

func mustLoad(t *testing.T, path string) *config.Config {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestSocket(t *testing.T) {
	s := newSandbox(t)
	check := func() Check { return find(t, Run(t.Context(), s.opts), CheckSocket) }
	expect(t, check(), Fail, "no such file or directory", "systemctl --user enable --now legion.socket")

	path := filepath.Join(s.opts.RuntimeDir, "legion", "legion.sock")
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, check(), Fail, "is not a socket", "remove "+path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	// Connections wait in the backlog; no one needs to accept them.
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	expect(t, check(), Warn, "mode is 0666", "SocketMode=0600")
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, check(), OK, "accepts connections", "")

	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	expect(t, check(), Fail, "refuses connections: connect: connection refused", "systemctl --user restart legion.socket")
}

// TestWithManager runs the checks against a real private user manager,
// with Legion's units installed into it by units.Install.
func TestWithManager(t *testing.T) {
	m := sdtest.Start(t)
	s := newSandbox(t)
	s.useManager(t, m)
	// The helper never runs for real here: a connection to the socket
	// starts legion.service, which runs `true helper` and fails quietly.
	bin, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	s.opts.Bin = bin

	checks := Run(t.Context(), s.opts)
	expect(t, find(t, checks, CheckManager), OK, "reachable", "")
	expect(t, find(t, checks, CheckBus), OK, "connected to "+m.BusAddress, "")
	expect(t, find(t, checks, CheckUnits), Fail, "missing", "legion install")
	expect(t, find(t, checks, CheckSocket), Fail, "no such file", "legion.socket")

	ctx, cancel := context.WithTimeout(t.Context(), sdtestTimeout)
	defer cancel()
	mgr, err := units.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	// The dashboard's socket on a port of its own: the default may be
	// taken on a machine that runs tests side by side.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(web)
	if err := os.WriteFile(s.opts.ConfigPath, []byte("[web]\nport = "+port+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := units.Install(ctx, units.InstallOptions{UnitDir: s.opts.UnitDir, Bin: bin, Defaults: units.RestartPolicy(config.DefaultTeam().Supervision()), Web: &units.WebUnits{Listen: web}, Manager: mgr}); err != nil {
		t.Fatal(err)
	}
	checks = Run(t.Context(), s.opts)
	expect(t, find(t, checks, CheckUnits), OK, "5 files current", "")
	expect(t, find(t, checks, CheckSocket), OK, "accepts connections", "")
}

func TestWorker(t *testing.T) {
	s := newSandbox(t)
	worker := sdtest.WorkerBinary(t)
	s.opts.FindWorker = func() (string, error) { return worker, nil }
	expect(t, find(t, Run(t.Context(), s.opts), CheckWorker), OK, worker+" (legion-pty-worker ", "")
	s.opts.Version = "dev" // what sdtest's build says
	expect(t, find(t, Run(t.Context(), s.opts), CheckWorker), OK, worker+" (legion-pty-worker dev)", "")
	s.opts.Version = "v9.9.9"
	expect(t, find(t, Run(t.Context(), s.opts), CheckWorker), Warn, "(legion-pty-worker dev); legion is v9.9.9", "same build")
	s.opts.Version = ""

	missing := fmt.Errorf("%w in /nowhere: install it", proto.ErrNoBinary)
	s.opts.FindWorker = func() (string, error) { return "", missing }
	expect(t, find(t, Run(t.Context(), s.opts), CheckWorker), Fail, "legion-pty-worker not found in /nowhere", "make install")

	broken := filepath.Join(s.dir, "legion-pty-worker")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.opts.FindWorker = func() (string, error) { return broken, nil }
	expect(t, find(t, Run(t.Context(), s.opts), CheckWorker), Fail, "--version: exit status 3", "make install")
}

// TestWorkerBesideInstalledLegion: the worker looked for is the one beside
// the legion that the installed legion.service runs (it starts the
// workers), not beside the legion running doctor; without the unit file,
// beside Bin.
func TestWorkerBesideInstalledLegion(t *testing.T) {
	s := newSandbox(t)
	installed := filepath.Join(s.dir, "opt legion", "bin") // a space: ExecStart quotes it
	elsewhere := filepath.Join(s.dir, "elsewhere")
	for _, d := range []string{installed, elsewhere, s.opts.UnitDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	worker := filepath.Join(installed, proto.BinaryName)
	if err := os.WriteFile(worker, []byte("#!/bin/sh\necho legion-pty-worker dev\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := units.Generate(units.GenerateOptions{Bin: filepath.Join(installed, "legion"), Defaults: units.RestartPolicy(config.DefaultTeam().Supervision())})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path == unitname.HelperUnit {
			if err := os.WriteFile(filepath.Join(s.opts.UnitDir, f.Path), f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.opts.Bin = filepath.Join(elsewhere, "legion")
	expect(t, find(t, Run(t.Context(), s.opts), CheckWorker), OK, worker+" (legion-pty-worker dev)", "")

	if err := os.Remove(filepath.Join(s.opts.UnitDir, unitname.HelperUnit)); err != nil {
		t.Fatal(err)
	}
	expect(t, find(t, Run(t.Context(), s.opts), CheckWorker), Fail, "legion-pty-worker not found in "+elsewhere, "make install")
}

// TestSandboxing: the unit sandboxing check reports the host probe. Where
// the manager may create user namespaces it applies every directive; where
// it may not (sdtest's seccomp filter), PrivateUsers is left out with the
// unit's 217/USER and the fix, and units installed before, with
// PrivateUsers=, are out of date.
func TestSandboxing(t *testing.T) {
	for _, deny := range []bool{false, true} {
		t.Run(fmt.Sprintf("deny=%v", deny), func(t *testing.T) {
			s := newSandbox(t)
			m := sdtest.StartWith(t, sdtest.Options{DenyUserNamespaces: deny})
			s.useManager(t, m)
			s.opts.Bin = sdtest.LegionBinary(t)
			s.writeConfig(t, "")
			if !deny {
				expect(t, find(t, Run(t.Context(), s.opts), CheckSandboxing), OK, "applies every directive of Legion's units (user namespaces, mount and device namespaces", "")
				return
			}
			// The units as a host with user namespaces gets them.
			s.writeUnits(t)
			checks := Run(t.Context(), s.opts)
			expect(t, find(t, checks, CheckSandboxing), Warn, "leaves out what this user manager cannot apply: PrivateUsers (user namespaces: a unit with it failed to start with 217/USER", "apparmor_restrict_unprivileged_userns")
			expect(t, find(t, checks, CheckUnits), Fail, "legion-web.service, legion.service, legion@.service (compared with", "legion install")
		})
	}
}
