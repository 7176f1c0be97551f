package service_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/controller/linear"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// waitFor is the generous deadline of every condition the tests poll.
const waitFor = 60 * time.Second

// teamName is the team every test runs; teamID gives its units their
// short id.
const teamName = "demo"

var teamID = uuid.MustParse("6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f")

// env is a private systemd user manager with Legion's units installed for
// the real binary, a team "demo" whose agent is the scripted agent running
// script, and its controller legion@demo started.
type env struct {
	t          testing.TB
	sd         *sdtest.Manager
	bin        string
	mgr        *units.Manager
	ws         string // the team's workspace (a git repository on main)
	configPath string
	logFile    string // the helper's, the controller's and the workers' output
	team       *team.Team
	store      *local.Store
	// lookup reads one issue of the team's tracker, open or closed.
	lookup func(ctx context.Context, id string) (controller.TrackedIssue, error)
	api    *anthropictest.Server // the fake Anthropic API of a Claude team (startClaude); nil otherwise
	// stateRoot prefixes the state directory's path when the units see
	// another filesystem there than the test process does: the chaos
	// run's tmpfs, mounted in the manager's mount namespace, is
	// /proc/<manager>/root/... to the test. "" otherwise.
	stateRoot string
}

// stateDir is Legion's state directory ($XDG_STATE_HOME/legion) as the
// units see it.
func (e *env) stateDir() string {
	return e.stateRoot + filepath.Join(os.Getenv("XDG_STATE_HOME"), "legion")
}

// teamOptions are the parts of the team's config a test varies.
type teamOptions struct {
	wipLimit        int
	staleAfter      string
	startLimitBurst int // 0: 20
	// agent is the agent's program and first arguments, as TOML array
	// items; "": the scripted agent running the script.
	agent string
	// interval is the controller's --interval (1s when empty); a set one
	// also turns the controller's watchdog off, so nothing but the
	// helper's session events wakes it between ticks.
	interval string
	// claude is the real Claude Code CLI's path (startClaude sets it):
	// the team's agent, with the default argv and kind, instead of the
	// scripted agent.
	claude string
	// idleGrace is the team's idle_grace ("" leaves the default).
	idleGrace string
	// codex is the real Codex CLI's path (startCodex sets it): the team's
	// agent, kind codex with its default argvs and the bypass policy.
	codex string
	// gemini is the real Gemini CLI's path (startGemini sets it): the
	// team's agent, kind gemini with its default argvs (the program
	// replaced) and the bypass policy.
	gemini string
	// opencode is the real opencode CLI's path (startOpencode sets it):
	// the team's agent, kind opencode with its default argvs and the
	// bypass policy.
	opencode string
	// extra is more TOML for the team's table.
	extra string
	// argv, when set, is the team's agent.new and agent.resume lines as
	// they are, instead of the agent's with --session-id and --resume.
	argv string
}

// start sets up the env; the controller is not started yet (issues can be
// added first, so the first tick sees them all).
func start(t testing.TB, script string, o teamOptions) *env {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		sdtest.Require(t, "git (apt-get install git)", false)
	}
	sd := sdtest.Start(t)
	bin := sdtest.LegionBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	mgr, err := units.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to the private manager: %v", err)
	}
	t.Cleanup(func() { mgr.Close() })
	e := &env{t: t, sd: sd, bin: bin, mgr: mgr, logFile: filepath.Join(sd.Dir, "legion.log")}

	e.ws = filepath.Join(sd.Home, "ws")
	if err := os.MkdirAll(e.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	e.git(e.ws, "init", "-q", "-b", "main")
	// The finisher merges as whoever the repository says; the sandbox's
	// home has no git identity.
	e.git(e.ws, "config", "user.name", "legion-test")
	e.git(e.ws, "config", "user.email", "legion-test@example.com")
	if err := os.WriteFile(filepath.Join(e.ws, "README"), []byte("demo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.git(e.ws, "add", "README")
	e.git(e.ws, "commit", "-q", "-m", "first")

	if o.staleAfter == "" {
		o.staleAfter = "3s"
	}
	var agent string
	switch {
	case o.agent != "":
		agent = o.agent
	case o.claude != "":
		agent = strconv.Quote(o.claude)
	default:
		scriptFile := filepath.Join(sd.Home, "agent.script")
		script = strings.ReplaceAll(script, "@LEGION@", bin)
		if err := os.WriteFile(scriptFile, []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
		agent = fmt.Sprintf(`"/usr/bin/env", "LEGION_SCRIPT_FILE=%s", "%s", "scripted-agent"`, scriptFile, bin)
	}
	idleGrace := ""
	if o.idleGrace != "" {
		idleGrace = fmt.Sprintf("idle_grace = %q\n", o.idleGrace)
	}
	argv := fmt.Sprintf("agent.new = [%s, \"--session-id\", \"{session_id}\", \"{prompt}\"]\nagent.resume = [%s, \"--resume\", \"{session_id}\", \"{prompt}\"]", agent, agent)
	if o.codex != "" {
		argv = fmt.Sprintf("agent.kind = \"codex\"\nagent.permissions = \"bypass\"\nagent.new = [%q, \"{prompt}\"]\nagent.resume = [%q, \"resume\", \"--last\", \"{prompt}\"]", o.codex, o.codex)
	}
	if o.gemini != "" {
		argv = fmt.Sprintf("agent.kind = \"gemini\"\nagent.permissions = \"bypass\"\nagent.new = [%q, \"--session-id\", \"{session_id}\", \"{prompt}\"]\nagent.resume = [%q, \"--resume\", \"{session_id}\", \"{prompt}\"]", o.gemini, o.gemini)
	}
	if o.argv != "" {
		argv = o.argv
	}
	if o.opencode != "" {
		argv = fmt.Sprintf("agent.kind = \"opencode\"\nagent.permissions = \"bypass\"\nagent.new = [%q, \"--prompt\", \"{prompt}\"]\nagent.resume = [%q, \"--continue\", \"--prompt\", \"{prompt}\"]", o.opencode, o.opencode)
	}
	toml := fmt.Sprintf(`[helper]
log_level = "debug"

[worker]
startup_grace = "1s"

[teams.%s]
id = "%s"
workspace = "%s"
issue_prefix = "DEMO"
wip_limit = %d
stale_after = "%s"
restart_cooldown = "1s"
start_limit_burst = %d
start_limit_interval = "10m"
%s
%s%s`, teamName, teamID, e.ws, o.wipLimit, o.staleAfter, cmp.Or(o.startLimitBurst, 20), argv, idleGrace, o.extra)
	cfgDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	e.configPath = filepath.Join(cfgDir, "legion.toml")
	if err := os.WriteFile(e.configPath, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}

	// Test drop-ins: output to a file (there is no journal), a fast tick.
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	ctl, err := unitname.ControllerUnit(teamName)
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("StandardOutput=append:%s\nStandardError=append:%s\n", e.logFile, e.logFile)
	e.dropIn(filepath.Join(unitDir, unitname.HelperUnit+".d", "90-test.conf"), "[Service]\n"+out)
	ctlService := fmt.Sprintf("ExecStart=\nExecStart=%s controller --interval %s %%i\n", bin, cmp.Or(o.interval, "1s"))
	if o.interval != "" {
		ctlService += "WatchdogSec=0\n"
	}
	e.dropIn(filepath.Join(unitDir, ctl+".d", "90-test.conf"), "[Service]\n"+ctlService+out)
	e.legion(ctx, "install")
	e.openTeam()
	t.Cleanup(func() {
		if t.Failed() {
			e.logFailure()
		}
	})
	return e
}

// openTeam opens the team of e.configPath, and its local tracker.
func (e *env) openTeam() {
	e.t.Helper()
	cfg, err := config.Load(e.configPath)
	if err != nil {
		e.t.Fatal(err)
	}
	ct, _ := cfg.Team(teamName)
	stateDir, err := config.StateDir()
	if err != nil {
		e.t.Fatal(err)
	}
	if e.team, err = team.Open(ct, cfg.Path, stateDir); err != nil {
		e.t.Fatal(err)
	}
	if gh, ok := e.team.Tracker.(*github.Tracker); ok { // tracker = "github": no local store
		e.store = nil
		e.lookup = func(ctx context.Context, id string) (controller.TrackedIssue, error) {
			is, _, err := gh.Issue(ctx, id)
			return is, err
		}
		return
	}
	if _, ok := e.team.Tracker.(*linear.Client); ok { // the test sets lookup from its fake Linear
		e.store = nil
		return
	}
	if e.store, err = e.team.Local(); err != nil {
		e.t.Fatal(err)
	}
	e.lookup = e.store.Issue
}

// logFailure logs, for a failed test, the helper's and controller's log,
// what the controller would do now, and the end of each transcript.
func (e *env) logFailure() {
	t := e.t
	// The tests poll sessions.list many times a second: its debug
	// lines would hide the controller's decisions.
	b, _ := os.ReadFile(e.logFile)
	var kept []string
	polls := 0
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, `msg="command done"`) && strings.Contains(line, "cmd=sessions.list") {
			polls++
			continue
		}
		kept = append(kept, line)
	}
	t.Logf("legion log (%s), without its %d debug lines of sessions.list:\n%s", e.logFile, polls, tail(strings.Join(kept, ""), 150))
	// What the controller would do now, and why.
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	out, err := exec.CommandContext(sctx, e.bin, "state", teamName).CombinedOutput()
	cancel()
	t.Logf("legion state %s (err %v):\n%s", teamName, err, out)
	trs, _ := filepath.Glob(filepath.Join(e.stateDir(), "transcripts", "*.log"))
	for _, tr := range trs {
		b, _ := os.ReadFile(tr)
		t.Logf("transcript %s:\n%s", filepath.Base(tr), tail(string(b), 30))
	}
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func (e *env) dropIn(path, text string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// git runs git in dir as a test user.
func (e *env) git(dir string, args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// legion runs the CLI with the sandbox's environment and fails the test
// when it fails.
func (e *env) legion(ctx context.Context, args ...string) string {
	e.t.Helper()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = os.Environ()
	var o, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &se
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("legion %s: %v\nstderr: %s\nstdout: %s", strings.Join(args, " "), err, se.String(), o.String())
	}
	return o.String()
}

// legionAll is legion, returning what it printed on stdout and stderr.
func (e *env) legionAll(ctx context.Context, args ...string) string {
	e.t.Helper()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("legion %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startController starts legion@demo.
func (e *env) startController() {
	e.t.Helper()
	ctl, _ := unitname.ControllerUnit(teamName)
	if _, err := e.sd.Systemctl(e.t, "start", ctl); err != nil {
		e.t.Fatalf("start %s: %v", ctl, err)
	}
}

// addIssue adds an issue through the CLI and returns its identifier.
func (e *env) addIssue(ctx context.Context, title string) string {
	e.t.Helper()
	return strings.TrimSpace(e.legion(ctx, "issue", "add", teamName, title))
}

func (e *env) issue(ctx context.Context, id string) controller.TrackedIssue {
	e.t.Helper()
	is, err := e.lookup(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return is
}

// poll calls cond until it reports true; on the deadline the test fails
// with what cond said last.
func (e *env) poll(ctx context.Context, what string, cond func() (bool, string)) {
	e.t.Helper()
	d := waitFor
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > d {
		d = time.Until(dl) // a slow real CLI's test gives itself longer
	}
	waitfor.Check(e.t, d, what, func() error {
		ok, last := cond()
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			e.t.Fatalf("waiting for %s: %v; last seen %s", what, ctx.Err(), last)
		}
		return fmt.Errorf("last seen %s", last)
	})
}

// waitUnit polls until unit's state satisfies cond.
func (e *env) waitUnit(ctx context.Context, what, unit string, cond func(units.State) bool) {
	e.t.Helper()
	e.poll(ctx, what, func() (bool, string) {
		st, err := e.mgr.State(ctx, unit)
		if err != nil {
			return false, err.Error()
		}
		return cond(st), st.String()
	})
}

// waitStatus waits until issue id has status st.
func (e *env) waitStatus(ctx context.Context, id string, st controller.Status) {
	e.t.Helper()
	e.poll(ctx, fmt.Sprintf("%s in %s", id, st), func() (bool, string) {
		is := e.issue(ctx, id)
		return is.Status == st, fmt.Sprintf("status %q labels %v", is.Status, is.Labels)
	})
}

// workers lists the team's worker units that are loaded.
func (e *env) workers(ctx context.Context) []units.State {
	e.t.Helper()
	list, err := e.mgr.List(ctx, "legion-"+teamID.String()[:8]+"-*.service")
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}

// running reports whether a unit state counts as a live process.
func running(s units.State) bool {
	switch s.ActiveState {
	case "active", "activating", "reloading":
		return true
	}
	return false
}

// workerUnit is the unit of issue's worker in mode.
func workerUnit(t *testing.T, issue string, mode controller.Mode) string {
	t.Helper()
	u, err := unitname.WorkerUnit(teamID.String()[:8], issue, string(mode))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// waitNoWorkers waits until none of the team's workers runs.
func (e *env) waitNoWorkers(ctx context.Context) {
	e.t.Helper()
	e.poll(ctx, "no worker running", func() (bool, string) {
		var live []string
		for _, s := range e.workers(ctx) {
			if running(s) {
				live = append(live, s.Name+"="+s.ActiveState)
			}
		}
		return len(live) == 0, strings.Join(live, " ")
	})
}

// assertFinished checks that issue id went all the way: Done, file merged
// into main with content want, its worktree and branch gone.
func (e *env) assertFinished(ctx context.Context, id, file, want string) {
	e.t.Helper()
	e.waitStatus(ctx, id, controller.StatusDone)
	e.waitNoWorkers(ctx)
	got := e.git(e.ws, "show", "main:"+file)
	if !strings.Contains(got, want) {
		e.t.Errorf("main:%s = %q; want it to contain %q", file, got, want)
	}
	if br := e.git(e.ws, "branch", "--list", "legion/"+id); strings.TrimSpace(br) != "" {
		e.t.Errorf("branch legion/%s still exists: %q", id, br)
	}
	if wts := e.git(e.ws, "worktree", "list"); strings.Contains(wts, "/"+id+" ") { // not DEMO-10 for DEMO-1
		e.t.Errorf("worktree of %s still listed:\n%s", id, wts)
	}
}

// sessionFile returns the text of the agent session of issue in mode (the
// Claude Code session file the scripted agent wrote under ~/.claude) and
// the session's id.
func (e *env) sessionFile(issue string, mode controller.Mode) (string, string) {
	e.t.Helper()
	id := sessionID(issue, mode)
	files, _ := filepath.Glob(filepath.Join(e.sd.Home, ".claude", "projects", "*", id+".jsonl"))
	if len(files) != 1 {
		e.t.Fatalf("session files of %s %s (%s): %v; want one", issue, mode, id, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b), id
}

// sessionID is the agent session id of issue's worker in mode.
func sessionID(issue string, mode controller.Mode) string {
	return claudecode.SessionID(teamID, issue, string(team.SessionMode(mode))).String()
}

// transcript returns the pty-worker transcript of session id.
func (e *env) transcript(id string) string {
	e.t.Helper()
	b, err := os.ReadFile(e.transcriptPath(id))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// transcriptOrEmpty is the transcript of session id, "" while there is none.
func (e *env) transcriptOrEmpty(id string) string {
	e.t.Helper()
	b, err := os.ReadFile(e.transcriptPath(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.t.Fatal(err)
	}
	return string(b)
}

func (e *env) transcriptPath(id string) string {
	return filepath.Join(e.stateDir(), "transcripts", id+".log")
}

// decision is what `legion state --json` suggests for issue id.
func (e *env) decision(ctx context.Context, id string) controller.Decision {
	e.t.Helper()
	var rep controller.Report
	if err := json.Unmarshal([]byte(e.legion(ctx, "state", teamName, "--json")), &rep); err != nil {
		e.t.Fatalf("legion state --json: %v", err)
	}
	for _, is := range rep.Issues {
		if is.ID == id {
			return is.Decision
		}
	}
	e.t.Fatalf("legion state --json has no issue %s", id)
	return controller.Decision{}
}
