package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
	"github.com/legion-dev/legion/units/unitname"
)

// needsWait is the generous deadline of every condition the tests poll.
const needsWait = 90 * time.Second

// needsScript is the scripted agent's part per issue (by LEGION_ISSUE):
// DEMO-1's planner asks a question, DEMO-2's wants to run a command that
// needs permission, DEMO-3's ends its turn without worker-done, DEMO-4's
// turn fails at the API (a rate limit). Each says what it got, so its
// session file shows it.
const needsScript = `
if-env LEGION_ISSUE=DEMO-1 if-env LEGION_MODE=plan once ask Which database? | Postgres | SQLite
if-env LEGION_ISSUE=DEMO-1 if-env LEGION_MODE=plan once say chose $ANSWER
if-env LEGION_ISSUE=DEMO-2 if-env LEGION_MODE=plan once bash touch approved.txt
if-env LEGION_ISSUE=DEMO-2 if-env LEGION_MODE=plan once say ran it
if-env LEGION_ISSUE=DEMO-3 if-env LEGION_MODE=plan once say I planned half of it; shall I go on?
if-env LEGION_ISSUE=DEMO-4 if-env LEGION_MODE=plan once apierror rate_limit
if-prompt go-on say going on with $PROMPT
`

// needsEnv is a private user manager with Legion installed for the real
// binary, teams "demo" (the scripted agent running script, its
// controller started) and, when broken, "broken" (an agent that cannot
// start, so its worker fails at once), and the dashboard's handler.
type needsEnv struct {
	t      *testing.T
	sd     *sdtest.Manager
	bin    string
	ws     string
	config string
	log    string
	srv    *Server
	http   *httptest.Server
	store  *local.Store
	team   *team.Team
}

func startNeedsEnv(t *testing.T, script string, broken bool) *needsEnv {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		sdtest.Require(t, "git (apt-get install git)", false)
	}
	sd := sdtest.Start(t)
	e := &needsEnv{t: t, sd: sd, bin: sdtest.LegionBinary(t), log: filepath.Join(sd.Dir, "legion.log")}
	e.ws = filepath.Join(sd.Home, "ws")
	if err := os.MkdirAll(e.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "legion-test"},
		{"config", "user.email", "legion-test@example.com"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := exec.Command("git", append([]string{"-C", e.ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	scriptFile := filepath.Join(sd.Home, "agent.script")
	if err := os.WriteFile(scriptFile, []byte(strings.ReplaceAll(script, "@LEGION@", e.bin)), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := fmt.Sprintf(`"/usr/bin/env", "LEGION_SCRIPT_FILE=%s", "%s", "scripted-agent"`, scriptFile, e.bin)
	toml := fmt.Sprintf(`[worker]
startup_grace = "1s"

[teams.demo]
id = "6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "%s"
issue_prefix = "DEMO"
wip_limit = 6
stale_after = "1h"
idle_grace = "0s"
restart_cooldown = "1s"
agent.new = [%s, "--session-id", "{session_id}", "{prompt}"]
agent.resume = [%s, "--resume", "{session_id}", "{prompt}"]
`, e.ws, agent, agent)
	if broken {
		toml += fmt.Sprintf(`
[teams.broken]
id = "7f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "%s"
issue_prefix = "BRK"
agent.kind = "custom"
agent.new = ["/nonexistent/agent", "{prompt}"]
`, e.ws)
	}
	cfgDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "legion")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	e.config = filepath.Join(cfgDir, "legion.toml")
	if err := os.WriteFile(e.config, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	// Output to a file (there is no journal here); the controllers tick
	// once an hour, so only events (the helper's, the tracker's) wake
	// them: an answer must reach the agent without a tick of its own.
	unitDir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "systemd", "user")
	out := fmt.Sprintf("StandardOutput=append:%s\nStandardError=append:%s\n", e.log, e.log)
	e.dropIn(filepath.Join(unitDir, unitname.HelperUnit+".d", "90-test.conf"), "[Service]\n"+out)
	for _, tn := range []string{"demo", "broken"} {
		ctl, err := unitname.ControllerUnit(tn)
		if err != nil {
			t.Fatal(err)
		}
		e.dropIn(filepath.Join(unitDir, ctl+".d", "90-test.conf"),
			fmt.Sprintf("[Service]\nExecStart=\nExecStart=%s controller --interval 1h %%i\nWatchdogSec=0\n%s", e.bin, out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), needsWait)
	defer cancel()
	e.legion(ctx, "install")

	cfg, err := config.Load(e.config)
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := cfg.Team("demo")
	state, err := config.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	if e.team, err = team.Open(ct, cfg.Path, state); err != nil {
		t.Fatal(err)
	}
	if e.store, err = e.team.Local(); err != nil {
		t.Fatal(err)
	}
	if e.srv, err = New(Options{Token: strings.Repeat("t", 43), ConfigPath: e.config}); err != nil {
		t.Fatal(err)
	}
	e.http = httptest.NewServer(e.srv.Handler())
	t.Cleanup(e.http.Close)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(e.log)
			t.Logf("legion log (%s):\n%s", e.log, lastLines(string(b), 120))
		}
	})
	return e
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

func (e *needsEnv) dropIn(path, text string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *needsEnv) legion(ctx context.Context, args ...string) string {
	e.t.Helper()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	var o, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &se
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("legion %s: %v\nstderr: %s", strings.Join(args, " "), err, se.String())
	}
	return o.String()
}

func (e *needsEnv) startController(name string) {
	e.t.Helper()
	ctl, _ := unitname.ControllerUnit(name)
	if out, err := e.sd.Systemctl(e.t, "start", ctl); err != nil {
		e.t.Fatalf("start %s: %v: %s", ctl, err, out)
	}
}

// call makes a request to the dashboard with the token and decodes the
// JSON answer into out; it returns the status code.
func (e *needsEnv) call(method, path string, body, out any) int {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.http.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.srv.opts.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && json.Unmarshal(b, out) != nil {
		e.t.Fatalf("%s %s: %d %s: not JSON", method, path, res.StatusCode, b)
	}
	return res.StatusCode
}

// need waits until GET /api/needs lists a need of kind for issue and
// returns it.
func (e *needsEnv) need(issue, kind string) Need {
	e.t.Helper()
	var got Need
	waitfor.Check(e.t, needsWait, issue+" needs a "+kind, func() error {
		var res NeedsResult
		if code := e.call("GET", "/api/needs", nil, &res); code != http.StatusOK {
			return fmt.Errorf("GET /api/needs: %d %v", code, res.Errors)
		}
		for _, n := range res.Needs {
			if n.Issue == issue && n.Kind == kind {
				got = n
				return nil
			}
		}
		return fmt.Errorf("needs %+v, errors %v", res.Needs, res.Errors)
	})
	return got
}

// sessionFileHas waits until the planner's session file of issue holds
// want.
func (e *needsEnv) sessionFileHas(issue, want string) {
	e.t.Helper()
	id := claudecode.SessionID(e.team.ID, issue, string(controller.ModePlan)).String()
	waitfor.Check(e.t, needsWait, issue+"'s session file shows "+want, func() error {
		files, _ := filepath.Glob(filepath.Join(e.sd.Home, ".claude", "projects", "*", id+".jsonl"))
		if len(files) != 1 {
			return fmt.Errorf("session files %v", files)
		}
		b, _ := os.ReadFile(files[0])
		if !strings.Contains(string(b), want) {
			return fmt.Errorf("last lines:\n%s", lastLines(string(b), 4))
		}
		return nil
	})
}

func (e *needsEnv) addIssues(ctx context.Context, n int) {
	e.t.Helper()
	for i := 1; i <= n; i++ {
		if _, err := e.store.Add(ctx, fmt.Sprintf("Issue %d", i)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestNeedsAnswered: under the real manager with the scripted agent,
// every kind of wait shows in GET /api/needs, and an answer posted to
// the dashboard goes through the tracker (a comment by the dashboard's
// user, user-feedback-given) and reaches the agent: its session file
// shows it, and an approved command ran. The controllers tick once an
// hour: the tracker write wakes them.
func TestNeedsAnswered(t *testing.T) {
	e := startNeedsEnv(t, needsScript, false)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	e.addIssues(ctx, 4)
	e.startController("demo")

	t.Run("question", func(t *testing.T) {
		n := e.need("DEMO-1", NeedQuestion)
		if len(n.Questions) != 1 || n.Questions[0].Question != "Which database?" || strings.Join(n.Questions[0].Options, ",") != "Postgres,SQLite" {
			t.Fatalf("question need = %+v; want Which database? with Postgres, SQLite", n)
		}
		var res AnswerResult
		if code := e.call("POST", "/api/needs/demo/DEMO-1/answer", AnswerRequest{Kind: NeedQuestion, Choice: "SQLite"}, &res); code != http.StatusOK {
			t.Fatalf("answer: %d %+v", code, res)
		}
		e.sessionFileHas("DEMO-1", "chose SQLite")
		is, err := e.store.Issue(ctx, "DEMO-1")
		if err != nil {
			t.Fatal(err)
		}
		// The controller may comment after it (its escalation, from a
		// tick that collected before the answer).
		if !slices.ContainsFunc(is.Comments, func(c controller.Comment) bool { return c.Text == "SQLite" && c.Author == dashboardUser() }) {
			t.Errorf("the tracker's comments %+v have no SQLite by %s", is.Comments, dashboardUser())
		}
	})
	t.Run("permission", func(t *testing.T) {
		n := e.need("DEMO-2", NeedPermission)
		if n.Tool != "Bash" || n.Command != "touch approved.txt" {
			t.Fatalf("permission need = %+v; want Bash touch approved.txt", n)
		}
		var res AnswerResult
		if code := e.call("POST", "/api/needs/demo/DEMO-2/answer", AnswerRequest{Kind: NeedPermission, Decision: "approve"}, &res); code != http.StatusOK {
			t.Fatalf("approve: %d %+v", code, res)
		}
		e.sessionFileHas("DEMO-2", "ran it")
		if _, err := os.Stat(filepath.Join(e.team.Worktrees.Path("DEMO-2"), "approved.txt")); err != nil {
			t.Errorf("the approved command did not run: %v", err)
		}
	})
	t.Run("turn", func(t *testing.T) {
		n := e.need("DEMO-3", NeedTurn)
		if !strings.Contains(n.Message, "shall I go on?") {
			t.Fatalf("turn need = %+v; want the agent's last message", n)
		}
		var res AnswerResult
		if code := e.call("POST", "/api/needs/demo/DEMO-3/answer", AnswerRequest{Kind: NeedTurn, Text: "go-on please"}, &res); code != http.StatusOK {
			t.Fatalf("reply: %d %+v", code, res)
		}
		e.sessionFileHas("DEMO-3", "going on with go-on please")
	})
	t.Run("rate limit", func(t *testing.T) {
		n := e.need("DEMO-4", NeedRateLimit)
		if n.Message == "" {
			t.Errorf("rate limit need = %+v; want the API's error", n)
		}
		var res AnswerResult
		if code := e.call("POST", "/api/needs/demo/DEMO-4/answer", AnswerRequest{Kind: NeedTurn, Text: "go-on now"}, &res); code != http.StatusOK {
			t.Fatalf("reply: %d %+v", code, res)
		}
		e.sessionFileHas("DEMO-4", "going on with go-on now")
	})
	t.Run("refused", func(t *testing.T) {
		var res errorBody
		if code := e.call("POST", "/api/needs/demo/DEMO-1/answer", AnswerRequest{Kind: NeedQuestion, Text: "again"}, &res); code != http.StatusConflict || !strings.Contains(res.Error, "DEMO-1") {
			t.Errorf("answering a question that is gone: %d %q; want 409 naming DEMO-1", code, res.Error)
		}
		if code := e.call("POST", "/api/needs/demo/DEMO-3/answer", AnswerRequest{Kind: "poke"}, &res); code != http.StatusBadRequest || !strings.Contains(res.Error, "poke") {
			t.Errorf("kind poke: %d %q; want 400 naming it", code, res.Error)
		}
		if code := e.call("POST", "/api/needs/nope/DEMO-3/answer", AnswerRequest{Kind: NeedTurn, Text: "x"}, &res); code != http.StatusNotFound || !strings.Contains(res.Error, "nope") {
			t.Errorf("team nope: %d %q; want 404 naming it", code, res.Error)
		}
	})
	t.Run("timeline", func(t *testing.T) {
		var tl Timeline
		if code := e.call("GET", "/api/timeline/demo?hours=2", nil, &tl); code != http.StatusOK {
			t.Fatalf("GET /api/timeline/demo: %d", code)
		}
		if len(tl.Issues) != 4 || tl.Issues[0].Issue != "DEMO-1" {
			t.Fatalf("timeline = %+v; want the 4 issues", tl)
		}
		live := 0
		for _, is := range tl.Issues {
			for _, p := range is.Phases {
				if p.Live && p.Mode == "plan" {
					live++
				}
			}
		}
		if live == 0 {
			t.Errorf("timeline %+v shows no live planner", tl.Issues)
		}
		if code := e.call("GET", "/api/timeline/demo?hours=0", nil, &errorBody{}); code != http.StatusBadRequest {
			t.Errorf("hours=0: %d; want 400", code)
		}
	})
}

// TestNeedsFailedReset: a worker whose agent cannot start fails at once
// (systemd gives up); the queue lists it with its cause and an excerpt,
// and the reset (sessions.reset) takes the failure away, so the
// controller may start it again.
func TestNeedsFailedReset(t *testing.T) {
	e := startNeedsEnv(t, needsScript, true)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cfg, err := config.Load(e.config)
	if err != nil {
		t.Fatal(err)
	}
	bt, _ := cfg.Team("broken")
	state, _ := config.StateDir()
	tb, err := team.Open(bt, cfg.Path, state)
	if err != nil {
		t.Fatal(err)
	}
	store, err := tb.Local()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Add(ctx, "Cannot start"); err != nil {
		t.Fatal(err)
	}
	e.startController("broken")
	n := e.need("BRK-1", NeedFailed)
	if !strings.Contains(n.Cause, "nonexistent") || len(n.Journal) == 0 || n.Unit == "" {
		t.Fatalf("failed need = %+v; want the cause naming the agent, an excerpt and the unit", n)
	}
	var res AnswerResult
	if code := e.call("POST", "/api/needs/broken/BRK-1/answer", AnswerRequest{Kind: NeedFailed, Session: n.Session}, &res); code != http.StatusOK || res.Reset == nil {
		t.Fatalf("reset: %d %+v", code, res)
	}
	if res.Reset.State == api.StateFailed {
		t.Errorf("after the reset session %s is %s; want it no longer failed", n.Session, res.Reset.State)
	}
}
