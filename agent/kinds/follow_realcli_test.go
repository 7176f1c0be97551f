package kinds

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/agent/claude/claudetest"
	"github.com/legion-dev/legion/agent/codex/codextest"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/agent/gemini/geminitest"
	"github.com/legion-dev/legion/agent/opencode/opencodetest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/instructions"
	"github.com/legion-dev/legion/internal/followmodel"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/internal/waitfor"
)

// The commands of the probes: followCommand is the only step of the first
// prompt; failCommand one that fails, a git command, which every kind's
// allowlist policy runs unasked (Gemini CLI asked before `ls
// /nonexistent…`, FACTS G24); stepOne and stepTwo the steps of the resume
// probe.
const (
	followCommand = "echo hello-follow"
	failCommand   = "git rev-parse --verify nonexistent-legion-follow"
	stepOne       = "echo one-follow"
	stepTwo       = "echo two-follow"
	askCommand    = "echo 'Question: Ship it today? (yes|no)'"
	afterAnswer   = "echo after-answer-follow"
)

// followPrompt is a prompt in Legion's instruction format whose steps are
// commands.
func followPrompt(commands ...string) string {
	p := "# Legion: plan X-1 (team t)\n\nRun these commands in order, then end your turn:\n"
	for _, c := range commands {
		p += "\n```sh\n" + c + "\n```\n"
	}
	return p
}

// followProbe is a real CLI against a fake API in follow mode.
type followProbe struct {
	kind             config.AgentKind
	argv, argvResume []string // the kind's argv, the binary first
	// setup points the CLI at its fake in home (user config) and returns
	// the environment for it.
	setup func(t *testing.T, home string) (env []string)
	// transcripts are those of the fake's requests so far.
	transcripts func(t *testing.T) []followmodel.Transcript
	// pause scripts a text answer, once, for the request that carries the
	// result of stepOne and not of stepTwo; taken says whether it was
	// taken.
	pause func(t *testing.T) (taken func() bool)
	end   func(t *testing.T, run *codexRun) // ends the CLI cleanly
	stop  string                            // the hook event of a turn's end
	// noExitCode: the CLI sends a failed command's output with no exit
	// code or error flag (opencode), so no model can tell it failed.
	noExitCode bool
	// askTool: the CLI offers AskUserQuestion, which the model uses when
	// the prompt names it (Claude Code).
	askTool bool
}

// probe runs the CLI, allowlist policy, with followCommand, then with
// failCommand, and checks what the CLI sent back: the output without an
// error, then an error the fake reads as one (none for a CLI that sends no
// exit code); each time the turn ends after the model's final text. Then
// it cuts a two-step run after step one and resumes it with the same
// prompt: the model continues with step two. Last, a command prints a
// `Question:` line: the model asks it in text and ends its turn; resumed
// with the answer as the prompt, it runs the next step. And the plan
// phase's instructions as Legion renders them: the model runs the stand-in
// legion's three commands, the plan comment's text one argument.
func probe(t *testing.T, p followProbe) {
	t.Run("echo", func(t *testing.T) {
		r := newFollowRun(t, p, followPrompt(followCommand)).result(t, followCommand, 1)
		if r.IsError || !strings.Contains(r.Text, "hello-follow") {
			t.Errorf("the result of %q = %+v; want its output, no error", followCommand, *r)
		}
	})
	t.Run("fail", func(t *testing.T) {
		r := newFollowRun(t, p, followPrompt(failCommand)).result(t, failCommand, 1)
		if r.IsError == p.noExitCode || !strings.Contains(r.Text, "Needed a single revision") {
			t.Errorf("the result of %q = %+v; want git's message, an error: %v", failCommand, *r, !p.noExitCode)
		}
	})
	t.Run("resume", func(t *testing.T) {
		taken := p.pause(t)
		prompt := followPrompt(stepOne, stepTwo)
		fr := newFollowRun(t, p, prompt)
		fr.waitStop(t, 1)
		if !taken() {
			t.Fatalf("the pause after step one was not taken; screen:\n%s", lastLines(fr.run.text(), 15))
		}
		p.end(t, fr.run)
		fr.resume(t, prompt)
		fr.result(t, stepTwo, 2)
		ts := p.transcripts(t)
		prompts, ones := 0, 0
		for _, it := range ts[len(ts)-1].Items {
			if it.Text == prompt || it.Text == strings.TrimSpace(prompt) { // Gemini CLI trims it (FACTS G25)
				prompts++
			}
			if it.Call != nil && it.Call.Command == stepOne {
				ones++
			}
		}
		if prompts != 2 || ones != 1 {
			t.Errorf("the resumed conversation has the prompt %d times and %q run %d times; want 2 and 1", prompts, stepOne, ones)
		}
	})
	t.Run("question", func(t *testing.T) {
		fr := newFollowRun(t, p, followPrompt(askCommand, afterAnswer))
		fr.waitStop(t, 1)
		ts := p.transcripts(t)
		want := followmodel.Decision{Action: followmodel.Say, Text: "Before I go on I need an answer to this question: Ship it today? (yes|no)"}
		if d := followmodel.Decide(ts[len(ts)-1], followmodel.Traits{}); d.Action != want.Action || d.Text != want.Text {
			t.Fatalf("the answer that ended the turn = %+v; want %+v", d, want)
		}
		p.end(t, fr.run)
		fr.resume(t, "yes")
		fr.result(t, afterAnswer, 2)
	})
	t.Run("rendered plan", func(t *testing.T) {
		set, err := instructions.Load("")
		if err != nil {
			t.Fatal(err)
		}
		var legion string
		fr := newFollowRunFor(t, p, func(l, wt string) string {
			legion = l
			text, err := set.Render(instructions.Data{Team: "t", Issue: "X-1", Mode: "plan", Branch: "legion/X-1",
				Worktree: wt, Base: "main", Review: "local", AskTool: p.askTool, Legion: l})
			if err != nil {
				t.Fatal(err)
			}
			return text
		})
		done := legion + " issue label t X-1 worker-done"
		if r := fr.result(t, done, 1); r.IsError {
			t.Errorf("the result of %q = %+v; want no error", done, *r)
		}
		var asked []any
		for _, ev := range hookEvents(t, fr.hookLog) {
			if ev["hook_event_name"] == "PermissionRequest" {
				asked = append(asked, ev["tool_input"])
			}
		}
		t.Logf("%s asked permission (answered allow by the stand-in) for: %v", p.kind, asked)
		b, err := os.ReadFile(filepath.Join(fr.root, "argv.log"))
		if err != nil {
			t.Fatal(err)
		}
		want := "issue show t X-1\nissue comment t X-1 Plan: Read the issue, write a failing test first, then make it pass\nissue label t X-1 worker-done\n"
		if string(b) != want {
			t.Errorf("the stand-in legion ran with\n%s\nwant\n%s", b, want)
		}
	})
	if !p.askTool {
		return
	}
	t.Run("ask tool", func(t *testing.T) {
		fr := newFollowRun(t, p, followPrompt(askCommand, afterAnswer)+"\nTo ask a person, use the AskUserQuestion tool.\n")
		fr.result(t, afterAnswer, 1)
		ts := p.transcripts(t)
		var asked *followmodel.Call
		var answer *followmodel.Result
		for _, it := range ts[len(ts)-1].Items {
			if it.Call != nil && it.Call.Tool == "AskUserQuestion" {
				asked = it.Call
			}
			if it.Result != nil && asked != nil && it.Result.CallID == asked.ID {
				answer = it.Result
			}
		}
		if asked == nil || asked.Question != "Ship it today? (yes|no)" || answer == nil || !strings.Contains(answer.Text, `="yes"`) {
			t.Errorf("the question asked with the tool: %+v, answered %+v; want the question, answered yes", asked, answer)
		}
	})
}

// askAnswer is the stand-in hook's answer "yes" to the follow model's
// AskUserQuestion call of askCommand's question: its input echoed back
// with the answers (FACTS F3k).
const askAnswer = `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":{` +
	`"questions":[{"question":"Ship it today? (yes|no)","header":"Question","options":[{"label":"yes","description":"Answer yes"},` +
	`{"label":"no","description":"Answer no"}],"multiSelect":false}],"answers":{"Ship it today? (yes|no)":"yes"}}}}}`

// followRun is one start of the CLI.
type followRun struct {
	p       followProbe
	root    string
	kind    agent.Kind
	session agent.Session
	wt      string
	env     []string
	hookLog string
	launch  agent.Launch
	run     *codexRun
}

// newFollowRun starts the real CLI as Prepare says, allowlist policy, with
// prompt, in a new worktree and home, with a stand-in legion that logs its
// hook calls and allows every PermissionRequest (as a person's approval
// would).
func newFollowRun(t *testing.T, p followProbe, prompt string) *followRun {
	t.Helper()
	return newFollowRunFor(t, p, func(string, string) string { return prompt })
}

// newFollowRunFor is newFollowRun with the prompt made for the stand-in
// legion's path and the worktree. The stand-in logs the argv of every
// call that is not a hook's to argv.log beside hooks.log.
func newFollowRunFor(t *testing.T, p followProbe, promptFor func(legion, wt string) string) *followRun {
	t.Helper()
	root, repo, wt, home := agenttest.GitWorktree(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	fr := &followRun{p: p, root: root, wt: wt, hookLog: filepath.Join(root, "hooks.log")}
	legion := filepath.Join(root, "bin", "legion")
	if err := os.MkdirAll(filepath.Dir(legion), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1" != hook ]; then
	printf '%%s\n' "$*" >> %s
	exit 0
fi
in=$(cat)
printf '%%s %%s\n' "$1" "$in" >> %s
case $in in
*'"hook_event_name":"PermissionRequest"'*'"tool_name":"AskUserQuestion"'*)
	echo '%s' ;;
*'"hook_event_name":"PermissionRequest"'*)
	echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}' ;;
esac
`, shellquote.Quote(filepath.Join(root, "argv.log")), shellquote.Quote(fr.hookLog), askAnswer)
	if err := os.WriteFile(legion, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := p.setup(t, home)
	k, err := For(config.Agent{Kind: p.kind, New: p.argv, Resume: p.argvResume, Permissions: config.PermissionsAllowlist})
	if err != nil {
		t.Fatal(err)
	}
	s := agent.Session{
		ID: k.SessionID(agenttest.TeamID, "X-1", "plan"), Mode: "plan", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion, Env: env,
	}
	s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: promptFor(legion, wt)}
	fr.kind, fr.session = k, s
	fr.launch = agenttest.Prepared(t, k, s)
	fr.env = append(append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}, env...), fr.launch.Env...)
	fr.run = startCodex(t, fr.launch.ArgvNew, wt, fr.env)
	return fr
}

// resume starts the CLI again with its resume argv and prompt, as a
// worker does for a person's answer after the CLI ended.
func (fr *followRun) resume(t *testing.T, prompt string) {
	t.Helper()
	fr.session.Vars.Prompt = prompt
	fr.launch = agenttest.Prepared(t, fr.kind, fr.session)
	fr.run = startCodex(t, fr.launch.ArgvResume, fr.wt, fr.env)
}

// result waits until a request carries the result of command and the
// turn-end hook fired stops times in all, and checks that the model's
// answer to the last request is its final text; it returns the result.
func (fr *followRun) result(t *testing.T, command string, stops int) *followmodel.Result {
	t.Helper()
	var got *followmodel.Result
	waitfor.Check(t, 3*time.Minute, "a request carrying the result of "+command, func() error {
		ts := fr.p.transcripts(t)
		for _, tr := range ts {
			if got = resultOf(tr, command); got != nil {
				return nil
			}
		}
		return fmt.Errorf("%d requests, none with the result; hooks: %d; screen:\n%s", len(ts), len(hookEvents(t, fr.hookLog)), lastLines(fr.run.text(), 20))
	})
	t.Logf("%s: the result of %q: %+v", fr.p.kind, command, *got)
	fr.waitStop(t, stops)
	ts := fr.p.transcripts(t)
	if d := followmodel.Decide(ts[len(ts)-1], followmodel.Traits{}); d.Action != followmodel.Say || !strings.HasPrefix(d.Text, "Done:") {
		t.Errorf("the last request's answer = %+v; want the final text", d)
	}
	return got
}

// waitStop waits until the turn-end hook fired n times in all.
func (fr *followRun) waitStop(t *testing.T, n int) {
	t.Helper()
	waitfor.Check(t, 3*time.Minute, fmt.Sprintf("%d %s hooks", n, fr.p.stop), func() error {
		if evs := hookEvents(t, fr.hookLog); countEvents(evs, fr.p.stop) < n {
			return fmt.Errorf("hooks so far: %d; screen:\n%s", len(evs), lastLines(fr.run.text(), 15))
		}
		return nil
	})
}

// resultOf is the result of the shell call of command in tr, or nil.
func resultOf(tr followmodel.Transcript, command string) *followmodel.Result {
	return tr.ResultOf(command)
}

// pausing reports whether tr carries the result of stepOne and not of
// stepTwo: the request the resume probe answers with a pause.
func pausing(tr followmodel.Transcript) bool {
	return resultOf(tr, stepOne) != nil && resultOf(tr, stepTwo) == nil
}

// interrupt ends the CLI with SIGINT (Claude Code and Gemini CLI exit
// cleanly on it).
func interrupt(t *testing.T, run *codexRun) {
	t.Helper()
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitfor.Check(t, time.Minute, "the CLI to end after SIGINT", func() error {
		select {
		case <-run.done:
			return nil
		default:
			return errors.New(lastLines(run.text(), 6))
		}
	})
	run.cmd.Wait()
}

// ctrlC ends Codex or opencode with Ctrl-C at the idle prompt.
func ctrlC(t *testing.T, run *codexRun) { run.end(t) }

// TestRealFollowClaude: the real Claude Code, told by its prompt what to
// run, runs it when the fake API follows the prompt (FACTS F9a, F9b).
func TestRealFollowClaude(t *testing.T) {
	bin := claudetest.Binary(t)
	srv := anthropictest.NewServer(t)
	srv.Follow(followmodel.Traits{})
	probe(t, followProbe{
		kind: config.AgentClaude, stop: "Stop", end: interrupt, askTool: true,
		argv:       []string{bin, "--session-id", "{session_id}", "{prompt}"},
		argvResume: []string{bin, "--resume", "{session_id}", "{prompt}"},
		setup: func(t *testing.T, home string) []string {
			return []string{"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-ant-api03-legion-test-0123456789abcdefghijklmnop",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
		},
		transcripts: func(t *testing.T) []followmodel.Transcript {
			var ts []followmodel.Transcript
			for _, r := range srv.MessageRequests("") {
				ts = append(ts, r.Transcript())
			}
			return ts
		},
		pause: func(t *testing.T) func() bool {
			srv.Script(anthropictest.AnySession, anthropictest.Turn{
				Match:  func(r *anthropictest.Request) bool { return pausing(r.Transcript()) },
				Blocks: []anthropictest.Block{anthropictest.Text("Pausing after the first step.")},
			})
			return func() bool { return srv.Pending(anthropictest.AnySession) == 0 }
		},
	})
}

// openaiProbe is the part of a probe of a CLI that speaks the Responses
// API to srv.
func openaiProbe(srv *openaitest.Server, p followProbe) followProbe {
	p.transcripts = func(t *testing.T) []followmodel.Transcript {
		ts, err := srv.Transcripts()
		if err != nil {
			t.Error(err)
		}
		return ts
	}
	p.pause = func(t *testing.T) func() bool {
		srv.Script(openaitest.Turn{Text: "Pausing after the first step.", Match: func(body []byte) bool {
			tr, err := openaitest.Transcript(body)
			return err == nil && pausing(tr)
		}})
		return func() bool { return len(srv.Left()) == 0 }
	}
	return p
}

// TestRealFollowCodex: the real Codex CLI (Codex's own sandbox and
// approvals) runs what the prompt says (FACTS X26).
func TestRealFollowCodex(t *testing.T) {
	bin := codextest.Binary(t)
	srv := openaitest.NewServer(t)
	srv.Follow(followmodel.Traits{})
	argv, argvResume, _ := config.KindArgv(config.AgentCodex)
	probe(t, openaiProbe(srv, followProbe{
		kind: config.AgentCodex, stop: "Stop", end: ctrlC,
		argv: append([]string{bin}, argv[1:]...), argvResume: append([]string{bin}, argvResume[1:]...),
		setup: func(t *testing.T, home string) []string {
			if err := srv.WriteUserConfig(home); err != nil {
				t.Fatal(err)
			}
			return []string{openaitest.KeyEnv + "=" + openaitest.Key}
		},
	}))
}

// TestRealFollowOpencode: the real opencode runs what the prompt says with
// its bash tool. A failed command's output comes back with no exit code
// (opencode FACTS O21).
func TestRealFollowOpencode(t *testing.T) {
	bin := opencodetest.Binary(t)
	srv := openaitest.NewServer(t)
	srv.Follow(followmodel.Traits{})
	argv, argvResume, _ := config.KindArgv(config.AgentOpencode)
	probe(t, openaiProbe(srv, followProbe{
		kind: config.AgentOpencode, stop: "Stop", end: ctrlC, noExitCode: true,
		argv: append([]string{bin}, argv[1:]...), argvResume: append([]string{bin}, argvResume[1:]...),
		setup: func(t *testing.T, home string) []string {
			opencodetest.WriteUserConfig(t, srv, home)
			return []string{openaitest.KeyEnv + "=" + openaitest.Key}
		},
	}))
}

// TestRealFollowGemini: the real Gemini CLI runs what the prompt says with
// run_shell_command (FACTS G23).
func TestRealFollowGemini(t *testing.T) {
	bin := geminitest.Binary(t)
	srv := geminitest.NewServer(t)
	srv.Follow(followmodel.Traits{})
	argv, argvResume, _ := config.KindArgv(config.AgentGemini)
	probe(t, followProbe{
		kind: config.AgentGemini, stop: "AfterAgent", end: interrupt,
		argv: append([]string{bin}, argv[1:]...), argvResume: append([]string{bin}, argvResume[1:]...),
		setup: func(t *testing.T, home string) []string {
			if err := geminitest.WriteUserSettings(home); err != nil {
				t.Fatal(err)
			}
			return srv.Env()
		},
		transcripts: func(t *testing.T) []followmodel.Transcript {
			ts, err := srv.Transcripts()
			if err != nil {
				t.Error(err)
			}
			return ts
		},
		pause: func(t *testing.T) func() bool {
			srv.Script(geminitest.Turn{Text: "Pausing after the first step.", Match: func(body []byte) bool {
				tr, err := geminitest.Transcript(body)
				return err == nil && pausing(tr)
			}})
			return func() bool { return len(srv.Left()) == 0 }
		},
	})
}
