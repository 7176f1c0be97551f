package kinds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/agent/opencode"
	"github.com/legion-dev/legion/agent/opencode/opencodetest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/internal/waitfor"
)

// TestRealOpencodeNewAndResume: the real opencode CLI, started as Prepare
// says in a new worktree, with the user's opencode.json naming the fake as
// its openai provider, sends the prompt and relays its events through
// Legion's plugin as Claude Code's hook payloads; the stand-in hook allows
// its permission request and the command runs; Ctrl-C ends it; the session
// file then holds opencode's ses_ id, and the resume argv continues the
// same conversation with the new prompt.
func TestRealOpencodeNewAndResume(t *testing.T) {
	bin := opencodetest.Binary(t)
	root, repo, wt, home := agenttest.GitWorktree(t)
	srv := openaitest.NewServer(t)
	srv.Script(
		openaitest.Bash("touch approved"),
		openaitest.Turn{Text: "First turn done."},
		openaitest.Turn{Text: "Second turn done."},
	)
	opencodetest.WriteUserConfig(t, srv, home)
	hookLog := filepath.Join(root, "hooks.log")
	legion := filepath.Join(root, "my bin", "legion")
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

	argvNew, argvResume, _ := config.KindArgv(config.AgentOpencode)
	a := config.Agent{Kind: config.AgentOpencode, New: argvNew, Resume: argvResume, Permissions: config.PermissionsAsk}
	k, err := For(a)
	if err != nil {
		t.Fatal(err)
	}
	s := agent.Session{
		ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: "implement", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion,
	}
	plan := func(prompt string) agent.Launch {
		s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: prompt}
		l := agenttest.Prepared(t, k, s)
		if l.Agent != string(config.AgentClaude) {
			t.Errorf("Launch.Agent = %q; want the worker's claude half", l.Agent)
		}
		return l
	}
	env := func(l agent.Launch) []string {
		return append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color",
			openaitest.KeyEnv + "=" + openaitest.Key}, l.Env...)
	}
	withBin := func(argv []string) []string { return append([]string{bin}, argv[1:]...) }

	l := plan("first prompt")
	start := time.Now()
	run := startCodex(t, withBin(l.ArgvNew), wt, append(env(l), "OPENCODE_PRINT_LOGS=1"))
	waitfor.Check(t, 3*time.Minute, "the first turn's Stop", func() error {
		if evs := hookEvents(t, hookLog); countEvents(evs, "Stop") < 1 {
			return fmt.Errorf("hooks so far: %d; screen:\n%s", len(evs), lastLines(run.text(), 15))
		}
		return nil
	})
	if reqs := srv.Requests(); len(reqs) > 0 {
		t.Logf("first API request %s after the start", reqs[0].Time.Sub(start).Round(time.Millisecond))
	}
	if _, err := os.Stat(filepath.Join(wt, "approved")); err != nil {
		t.Errorf("the command the hook approved did not run: %v", err)
	}
	code := run.end(t)
	t.Logf("opencode exit code after Ctrl-C: %d", code)
	evs := hookEvents(t, hookLog)
	for _, name := range []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop"} {
		if countEvents(evs, name) == 0 {
			t.Errorf("no %s hook; hooks: %v", name, evs)
		}
	}
	id, err := os.ReadFile(l.SessionFile)
	if err != nil || !strings.HasPrefix(string(id), "ses_") {
		t.Fatalf("session file after the first turn: %q, %v; want opencode's ses_ id", id, err)
	}
	for _, ev := range evs {
		if ev["session_id"] != strings.TrimSpace(string(id)) {
			t.Errorf("hook %v has session_id %v; want %s", ev["hook_event_name"], ev["session_id"], id)
		}
	}

	l = plan("second prompt")
	before := len(evs)
	run = startCodex(t, withBin(l.ArgvResume), wt, env(l))
	waitfor.Check(t, 3*time.Minute, "the resumed turn's Stop", func() error {
		if evs := hookEvents(t, hookLog)[before:]; countEvents(evs, "Stop") < 1 {
			return fmt.Errorf("hooks so far: %d; screen:\n%s", len(evs), lastLines(run.text(), 15))
		}
		return nil
	})
	run.end(t)
	for _, ev := range hookEvents(t, hookLog)[before:] {
		if ev["hook_event_name"] == "SessionStart" && ev["source"] != "resume" {
			t.Errorf("resumed SessionStart: source %v; want resume", ev["source"])
		}
	}
	var last []byte
	for _, r := range srv.Requests() {
		if !r.Title {
			last = r.Body
		}
	}
	if !bytes.Contains(last, []byte("second prompt")) || !bytes.Contains(last, []byte("first prompt")) {
		t.Errorf("the resumed turn's request does not carry both prompts:\n%.2000s", last)
	}
	// The plugin wrote every assistant message's tokens (the fake's usage,
	// as opencode counts it: cached and reasoning tokens apart, FACTS
	// O27), before and after the resume: three model calls.
	usage, err := os.ReadFile(filepath.Join(filepath.Dir(l.SessionFile), opencode.UsageFile))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]string{}
	for line := range strings.Lines(string(usage)) {
		var m struct {
			ID     string          `json:"id"`
			Tokens json.RawMessage `json:"tokens"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("usage file line %q: %v", line, err)
		}
		byID[m.ID] = string(m.Tokens)
	}
	want := `{"total":110,"input":60,"output":5,"reasoning":5,"cache":{"write":0,"read":40}}`
	if len(byID) != 3 {
		t.Errorf("usage file has %d messages; want 3:\n%s", len(byID), usage)
	}
	for id, tokens := range byID {
		if tokens != want {
			t.Errorf("usage of %s = %s; want %s", id, tokens, want)
		}
	}
}

// TestRealOpencodeUserQuestionRule: a "question" permission in the user's
// own opencode.json does not bring the question tool back (its dialog
// reaches no hook or plugin event, FACTS O19). The merged config keeps the
// user's key order, so their "question" rule comes before any "*" (theirs
// or Legion's), and the last rule that matches is what opencode applies
// (O19a): the real CLI's first turn request must offer no question tool.
func TestRealOpencodeUserQuestionRule(t *testing.T) {
	for _, tc := range []struct {
		policy config.PermissionPolicy
		user   string // the user's "permission", in its key order
	}{
		{config.PermissionsBypass, `{"question": "allow"}`},
		{config.PermissionsAllowlist, `{"question": "allow", "*": "allow"}`},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			bin := opencodetest.Binary(t)
			root, repo, wt, home := agenttest.GitWorktree(t)
			srv := openaitest.NewServer(t)
			srv.Script(openaitest.Turn{Text: "Done."})
			opencodetest.WriteUserConfig(t, srv, home)
			userConfig := filepath.Join(home, ".config", "opencode", "opencode.json")
			b, err := os.ReadFile(userConfig)
			if err != nil || !bytes.HasPrefix(b, []byte("{")) {
				t.Fatalf("read %s: %q, %v", userConfig, b, err)
			}
			b = append([]byte("{\n  \"permission\": "+tc.user+","), b[1:]...)
			if err := os.WriteFile(userConfig, b, 0o600); err != nil {
				t.Fatal(err)
			}
			legion := filepath.Join(root, "legion")
			if err := os.WriteFile(legion, []byte("#!/bin/sh\ncat >/dev/null\n"), 0o755); err != nil {
				t.Fatal(err)
			}

			argvNew, argvResume, _ := config.KindArgv(config.AgentOpencode)
			k, err := For(config.Agent{Kind: config.AgentOpencode, New: argvNew, Resume: argvResume, Permissions: tc.policy})
			if err != nil {
				t.Fatal(err)
			}
			s := agent.Session{
				ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: "implement", Cwd: wt, Repo: repo, Home: home,
				Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion,
			}
			s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: "a prompt"}
			l := agenttest.Prepared(t, k, s)
			env := append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color",
				openaitest.KeyEnv + "=" + openaitest.Key}, l.Env...)
			run := startCodex(t, append([]string{bin}, l.ArgvNew[1:]...), wt, env)
			var turn openaitest.Request
			waitfor.Check(t, 3*time.Minute, "the first turn's request", func() error {
				for _, r := range srv.Requests() {
					if !r.Title {
						turn = r
						return nil
					}
				}
				return fmt.Errorf("no turn request yet; screen:\n%s", lastLines(run.text(), 15))
			})
			run.end(t)
			names, err := turn.Tools()
			if err != nil {
				t.Fatalf("the turn request: %v\n%.2000s", err, turn.Body)
			}
			if !slices.Contains(names, "bash") || slices.Contains(names, "question") {
				t.Errorf("%s policy, the user's permission %s: the request offers %v; want bash and no question", tc.policy, tc.user, names)
			}
		})
	}
}
