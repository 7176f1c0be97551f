package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/followmodel"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/ptyworker/claude/anthropictest"
	"github.com/legion-dev/legion/ptyworker/claude/claudetest"
	"github.com/legion-dev/legion/ptyworker/codex/codextest"
	"github.com/legion-dev/legion/ptyworker/codex/openaitest"
	"github.com/legion-dev/legion/ptyworker/gemini/geminitest"
	"github.com/legion-dev/legion/ptyworker/opencode/opencodetest"
)

// followCommand is the only step of the probes' prompt; failCommand is
// one that fails, a git command, which every kind's allowlist policy runs
// unasked (Gemini CLI asked before `ls /nonexistent…`).
const (
	followCommand = "echo hello-follow"
	failCommand   = "git rev-parse --verify nonexistent-legion-follow"
)

// followPrompt is a prompt in Legion's instruction format whose only step
// is command.
func followPrompt(command string) string {
	return "# Legion: plan X-1 (team t)\n\nRun this command, then end your turn:\n\n```sh\n" + command + "\n```\n"
}

// followProbe is one real CLI run against a fake API in follow mode.
type followProbe struct {
	kind   config.AgentKind
	policy config.PermissionPolicy
	argv   []string // the kind's argv, the binary first
	// setup points the CLI at its fake in home (user config) and returns the
	// environment for it and the transcripts of the requests so far.
	setup func(t *testing.T, home string) (env []string, transcripts func() []followmodel.Transcript)
	stop  string // the hook event of a turn's end
	// noExitCode: the CLI sends a failed command's output with no exit
	// code or error flag (opencode), so no model can tell it failed.
	noExitCode bool
}

// probe runs p with followCommand, then with failCommand, and checks what
// the CLI sent back: the output without an error, then an error the fake
// reads as one (none for a CLI that sends no exit code); each time the
// turn ends after the model's final text.
func probe(t *testing.T, p followProbe) {
	t.Run("echo", func(t *testing.T) {
		r := runFollow(t, p, followCommand)
		if r.IsError || !strings.Contains(r.Text, "hello-follow") {
			t.Errorf("the result of %q = %+v; want its output, no error", followCommand, *r)
		}
	})
	t.Run("fail", func(t *testing.T) {
		r := runFollow(t, p, failCommand)
		if r.IsError == p.noExitCode || !strings.Contains(r.Text, "Needed a single revision") {
			t.Errorf("the result of %q = %+v; want git's message, an error: %v", failCommand, *r, !p.noExitCode)
		}
	})
}

// runFollow starts the real CLI as Prepare says, with followPrompt(command),
// and waits until a request carries the result of command and the turn
// ended; it returns that result.
func runFollow(t *testing.T, p followProbe, command string) *followmodel.Result {
	root, repo, wt, home := gitWorktree(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	hookLog := filepath.Join(root, "hooks.log")
	legion := filepath.Join(root, "bin", "legion")
	if err := os.MkdirAll(filepath.Dir(legion), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
in=$(cat)
printf '%%s %%s\n' "$1" "$in" >> %s
case $in in *'"hook_event_name":"PermissionRequest"'*)
	echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}' ;;
esac
`, shellquote.Quote(hookLog))
	if err := os.WriteFile(legion, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env, transcripts := p.setup(t, home)
	argvResume := append([]string{p.argv[0]}, "--resume", "{session_id}", "{prompt}")
	k, err := For(config.Agent{Kind: p.kind, New: p.argv, Resume: argvResume, Permissions: p.policy})
	if err != nil {
		t.Fatal(err)
	}
	s := Session{
		ID: k.SessionID(teamID, "X-1", "plan"), Mode: "plan", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion, Env: env,
	}
	s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: followPrompt(command)}
	l := prepared(t, k, s)
	env = append(append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}, env...), l.Env...)
	run := startCodex(t, l.ArgvNew, wt, env)
	var got *followmodel.Result
	err = waitfor.Until(3*time.Minute, "a request carrying the result of "+command, func() error {
		ts := transcripts()
		for _, tr := range ts {
			if got = resultOf(tr, command); got != nil {
				return nil
			}
		}
		return fmt.Errorf("%d requests, none with the result; hooks: %d; screen:\n%s", len(ts), len(hookEvents(t, hookLog)), lastLines(run.text(), 20))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: the result of %q: %+v", p.kind, command, *got)
	waitfor.Check(t, 3*time.Minute, "the turn's "+p.stop+" hook", func() error {
		if evs := hookEvents(t, hookLog); countEvents(evs, p.stop) < 1 {
			return fmt.Errorf("hooks so far: %d; screen:\n%s", len(evs), lastLines(run.text(), 15))
		}
		return nil
	})
	ts := transcripts()
	if d := followmodel.Decide(ts[len(ts)-1], followmodel.Traits{}); d.Action != followmodel.Say || !strings.HasPrefix(d.Text, "Done:") {
		t.Errorf("the last request's answer = %+v; want the final text", d)
	}
	return got
}

// resultOf is the result of the shell call of command in tr, or nil.
func resultOf(tr followmodel.Transcript, command string) *followmodel.Result {
	id := ""
	for _, it := range tr.Items {
		if it.Call != nil && it.Call.Command == command {
			id = it.Call.ID
		}
		if it.Result != nil && id != "" && it.Result.CallID == id {
			return it.Result
		}
	}
	return nil
}

// TestRealFollowClaude: the real Claude Code, told by its prompt to run one
// command, runs it when the fake API follows the prompt (allowlist policy:
// a read-only echo needs no permission, FACTS F6a).
func TestRealFollowClaude(t *testing.T) {
	bin := claudetest.Binary(t)
	srv := anthropictest.NewServer(t)
	srv.Follow(followmodel.Traits{})
	probe(t, followProbe{
		kind: config.AgentClaude, policy: config.PermissionsAllowlist, stop: "Stop",
		argv: []string{bin, "--session-id", "{session_id}", "{prompt}"},
		setup: func(t *testing.T, home string) ([]string, func() []followmodel.Transcript) {
			return []string{"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-ant-api03-legion-test-0123456789abcdefghijklmnop",
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}, func() []followmodel.Transcript {
					var ts []followmodel.Transcript
					for _, r := range srv.MessageRequests("") {
						ts = append(ts, r.Transcript())
					}
					return ts
				}
		},
	})
}

// openaiTranscripts are the transcripts of srv's requests.
func openaiTranscripts(t *testing.T, srv *openaitest.Server) func() []followmodel.Transcript {
	return func() []followmodel.Transcript {
		var ts []followmodel.Transcript
		for _, r := range srv.Requests() {
			tr, err := openaitest.Transcript(r.Body)
			if err != nil {
				t.Errorf("request %s: %v", r.Path, err)
				continue
			}
			ts = append(ts, tr)
		}
		return ts
	}
}

// TestRealFollowCodex: the real Codex CLI (allowlist policy: Codex's own
// sandbox and approvals) runs the prompt's command the fake asks for.
func TestRealFollowCodex(t *testing.T) {
	bin := codextest.Binary(t)
	srv := openaitest.NewServer(t)
	srv.Follow(followmodel.Traits{})
	argv, _, _ := config.KindArgv(config.AgentCodex)
	probe(t, followProbe{
		kind: config.AgentCodex, policy: config.PermissionsAllowlist, stop: "Stop", argv: append([]string{bin}, argv[1:]...),
		setup: func(t *testing.T, home string) ([]string, func() []followmodel.Transcript) {
			if err := srv.WriteUserConfig(home); err != nil {
				t.Fatal(err)
			}
			return []string{openaitest.KeyEnv + "=" + openaitest.Key}, openaiTranscripts(t, srv)
		},
	})
}

// TestRealFollowOpencode: the real opencode (allowlist policy) runs the
// prompt's command with its bash tool. A failed command's output comes
// back with no exit code (opencode FACTS O20).
func TestRealFollowOpencode(t *testing.T) {
	bin := opencodetest.Binary(t)
	srv := openaitest.NewServer(t)
	srv.Follow(followmodel.Traits{})
	argv, _, _ := config.KindArgv(config.AgentOpencode)
	probe(t, followProbe{
		kind: config.AgentOpencode, policy: config.PermissionsAllowlist, stop: "Stop", noExitCode: true, argv: append([]string{bin}, argv[1:]...),
		setup: func(t *testing.T, home string) ([]string, func() []followmodel.Transcript) {
			opencodetest.WriteUserConfig(t, srv, home)
			return []string{openaitest.KeyEnv + "=" + openaitest.Key}, openaiTranscripts(t, srv)
		},
	})
}

// TestRealFollowGemini: the real Gemini CLI (allowlist policy) runs the
// prompt's command with run_shell_command.
func TestRealFollowGemini(t *testing.T) {
	bin := geminitest.Binary(t)
	srv := geminitest.NewServer(t)
	srv.Follow(followmodel.Traits{})
	argv, _, _ := config.KindArgv(config.AgentGemini)
	probe(t, followProbe{
		kind: config.AgentGemini, policy: config.PermissionsAllowlist, stop: "AfterAgent", argv: append([]string{bin}, argv[1:]...),
		setup: func(t *testing.T, home string) ([]string, func() []followmodel.Transcript) {
			if err := geminitest.WriteUserSettings(home); err != nil {
				t.Fatal(err)
			}
			return srv.Env(), func() []followmodel.Transcript {
				var ts []followmodel.Transcript
				for _, r := range srv.Requests() {
					tr, err := geminitest.Transcript(r.Body)
					if err != nil {
						t.Errorf("request %s: %v", r.Path, err)
						continue
					}
					ts = append(ts, tr)
				}
				return ts
			}
		},
	})
}

// TestRealFollowClaudeResumeContinues: Claude Code resumed with the same
// prompt (a worker's restart) sends the conversation with the prompt
// again, and the follow model continues with the step not yet run instead
// of starting over. The first turn is cut after step one by a scripted
// text, then the CLI is ended with SIGINT and started again with the
// resume argv.
func TestRealFollowClaudeResumeContinues(t *testing.T) {
	bin := claudetest.Binary(t)
	root, repo, wt, home := gitWorktree(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	srv := anthropictest.NewServer(t)
	srv.Follow(followmodel.Traits{})
	const one, two = "echo one-follow", "echo two-follow"
	srv.Script(anthropictest.AnySession, anthropictest.Turn{
		Match: func(r *anthropictest.Request) bool {
			tr := r.Transcript()
			return resultOf(tr, one) != nil && resultOf(tr, two) == nil
		},
		Blocks: []anthropictest.Block{anthropictest.Text("Pausing after the first step.")},
	})
	hookLog := filepath.Join(root, "hooks.log")
	legion := filepath.Join(root, "bin", "legion")
	if err := os.MkdirAll(filepath.Dir(legion), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nin=$(cat)\nprintf '%%s %%s\\n' \"$1\" \"$in\" >> %s\n", shellquote.Quote(hookLog))
	if err := os.WriteFile(legion, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	k, err := For(config.Agent{Kind: config.AgentClaude, New: []string{bin, "--session-id", "{session_id}", "{prompt}"},
		Resume: []string{bin, "--resume", "{session_id}", "{prompt}"}, Permissions: config.PermissionsAllowlist})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"ANTHROPIC_BASE_URL=" + srv.URL, "ANTHROPIC_API_KEY=sk-ant-api03-legion-test-0123456789abcdefghijklmnop", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	s := Session{
		ID: k.SessionID(teamID, "X-1", "plan"), Mode: "plan", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion, Env: env,
	}
	prompt := "# Legion: plan X-1 (team t)\n\n```sh\n" + one + "\n```\n\n```sh\n" + two + "\n```\n"
	s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: prompt}
	l := prepared(t, k, s)
	cliEnv := append(append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}, env...), l.Env...)
	stops := func() int { return countEvents(hookEvents(t, hookLog), "Stop") }

	run := startCodex(t, l.ArgvNew, wt, cliEnv)
	waitfor.Check(t, 3*time.Minute, "the first turn's Stop", func() error {
		if stops() < 1 {
			return fmt.Errorf("screen:\n%s", lastLines(run.text(), 15))
		}
		return nil
	})
	if n := srv.Pending(anthropictest.AnySession); n != 0 {
		t.Fatalf("the pause was not taken (%d turns left); screen:\n%s", n, lastLines(run.text(), 15))
	}
	run.cmd.Process.Signal(syscall.SIGINT) // Claude Code exits at once (FACTS F4b)
	waitfor.Check(t, time.Minute, "claude to end after SIGINT", func() error {
		select {
		case <-run.done:
			return nil
		default:
			return errors.New(lastLines(run.text(), 6))
		}
	})

	run = startCodex(t, l.ArgvResume, wt, cliEnv)
	var last *anthropictest.Request
	waitfor.Check(t, 3*time.Minute, "a request carrying the result of "+two, func() error {
		for _, r := range srv.MessageRequests("") {
			if resultOf(r.Transcript(), two) != nil {
				last = r
				return nil
			}
		}
		return fmt.Errorf("screen:\n%s", lastLines(run.text(), 15))
	})
	prompts, ones := 0, 0
	for _, it := range last.Transcript().Items {
		if it.Text == prompt {
			prompts++
		}
		if it.Call != nil && it.Call.Command == one {
			ones++
		}
	}
	if prompts != 2 || ones != 1 {
		t.Errorf("the resumed conversation has the prompt %d times and %q run %d times; want 2 and 1", prompts, one, ones)
	}
}
