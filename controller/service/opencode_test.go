package service_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/agent/opencode/opencodetest"
	"github.com/legion-dev/legion/controller"
)

// startOpencode is start for a team whose agent is the real opencode CLI
// (kind opencode, its default argvs, the bypass policy unless o.extra
// says otherwise), served by a fake Responses API (the returned server).
// The user's ~/.config/opencode/opencode.json names the fake as the openai
// provider, its key read from the manager's environment ({env:…}).
func startOpencode(t *testing.T, o teamOptions) (*env, *openaitest.Server) {
	t.Helper()
	o.opencode = opencodetest.Binary(t)
	if o.idleGrace == "" {
		o.idleGrace = "2s"
	}
	if o.staleAfter == "" {
		o.staleAfter = "2m"
	}
	srv := openaitest.NewServer(t)
	e := start(t, "", o)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	opencodetest.WriteUserConfig(t, srv, home)
	if out, err := e.sd.Systemctl(t, "set-environment", openaitest.KeyEnv+"="+openaitest.Key); err != nil {
		t.Fatalf("systemctl --user set-environment: %v\n%s", err, out)
	}
	logRequests(t, srv)
	return e, srv
}

// logRequests logs srv's requests when t fails.
func logRequests(t *testing.T, srv *openaitest.Server) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range srv.Requests() {
				t.Logf("API request %s title %v unscripted %v: turn %+v", r.Time.Format("15:04:05.000"), r.Title, r.Unscripted, r.Turn)
			}
		}
	})
}

// opencodePhase is codexPhase with opencode's bash tool for every command.
func (e *env) opencodePhase(issue string, mode controller.Mode) []openaitest.Turn {
	turns := e.codexPhase(issue, mode)
	for i, t := range turns {
		if t.Exec != "" {
			b := openaitest.Bash(t.Exec)
			b.Match = t.Match
			turns[i] = b
		}
	}
	return turns
}

// responsesTools are the names of the tools a Responses API request body
// offers the model.
func responsesTools(t *testing.T, r openaitest.Request) []string {
	t.Helper()
	tools, err := r.Tools()
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// TestMixedOpencodeTodoToDone (issue 21): a team that plans with opencode
// (agent.kind_by_mode) and implements, reviews, retros and finishes with
// Claude Code completes an issue, each phase's agent its kind's real CLI
// against its own fake API.
func TestMixedOpencodeTodoToDone(t *testing.T) {
	bin := opencodetest.Binary(t)
	e := startClaude(t, teamOptions{wipLimit: 1, staleAfter: "2m", extra: "agent.kind_by_mode = { plan = \"opencode\" }\n"},
		"PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), openaitest.KeyEnv+"="+openaitest.Key)
	srv := openaitest.NewServer(t)
	logRequests(t, srv)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	opencodetest.WriteUserConfig(t, srv, home)
	ctx := claudeCtx(t, 25*time.Minute)
	id := e.addIssue(ctx, "Write a file")
	srv.Script(e.opencodePhase(id, controller.ModePlan)...)
	e.scriptAll(id, controller.ModePlan)
	e.startController()
	e.assertFinished(ctx, id, id+".txt", "impl "+id)

	s := e.waitCompleted(ctx, id, controller.ModePlan)
	if s.Exit == nil || !strings.HasPrefix(s.Exit.Reason, "completed:") {
		t.Errorf("plan session ended %v; want completed", s.Exit)
	}
	for _, m := range allModes[1:] {
		assertCompletedAnyCode(t, e.waitCompleted(ctx, id, m))
	}
	if left := srv.Left(); len(left) != 0 {
		t.Errorf("%d scripted opencode turns were never asked for: %+v", len(left), left)
	}
	if tr := e.transcript(workerID(id, controller.ModePlan)); !strings.Contains(tr, "opencode") {
		t.Errorf("the plan worker did not run opencode; its transcript:\n%s", tail(tr, 10))
	}
	e.assertScripted()
}

// opencodeKind is the kinds' suite's driver of the real opencode CLI
// (startOpencode).
type opencodeKind struct{ responsesKind }

func startOpencodeKind(t *testing.T, o teamOptions) (*env, kindDriver) {
	e, srv := startOpencode(t, o)
	return e, &opencodeKind{responsesKind{e: e, srv: srv}}
}

// script: a shell step is a call of opencode's bash tool.
func (k *opencodeKind) script(issue string, mode controller.Mode, before ...step) {
	m := phaseMatch(issue, mode)
	var turns []openaitest.Turn
	for _, s := range before {
		t := openaitest.Turn{Text: s.text, Stall: s.stall}
		if s.shell != "" {
			t = openaitest.Bash(s.shell)
		}
		t.Match = m
		turns = append(turns, t)
	}
	k.srv.Script(append(turns, k.e.opencodePhase(issue, mode)...)...)
}

// completed is assertCompleted: opencode ends on SIGINT with 0.
func (k *opencodeKind) completed(t testing.TB, s api.Session) {
	t.Helper()
	assertCompleted(t, s)
}

// resumeArgs: `opencode --continue` with the conversation's own session
// database (the session file holds its ses_ id); the plugin sends the
// resumed prompt.
func (k *opencodeKind) resumeArgs(string) string { return "--continue" }

// question: opencode's TUI offers the model its question tool, whose
// dialog Legion's plugin does not answer, so Legion's opencode.json
// denies it (permission question: deny): opencode does not offer it,
// and a call of it fails at once instead of waiting on a dialog nobody
// sees. The model asks in text and ends its turn.
func (k *opencodeKind) question(issue string) kindQuestion {
	scriptToolQuestion(k.srv, k.e.opencodePhase(issue, controller.ModePlan), "question", map[string]any{"header": "Scope"})
	return textKindQuestion(func() {
		t := k.e.t.(*testing.T)
		for i, r := range k.srv.Requests() {
			if tools := responsesTools(t, r); !r.Title && (slices.Contains(tools, "question") || !slices.Contains(tools, "bash")) {
				t.Errorf("request %d offers the tools %q; want bash and not question", i, tools)
			}
		}
		assertToolRefused(t, k.srv, "question")
	})
}
