package kinds

// Real CLIs at a rate or usage limit of the fake APIs (issue 36): what
// reaches Legion's hook, translated as `legion hook` translates it.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/agent/codex/codextest"
	"github.com/legion-dev/legion/agent/codex/openaitest"
	"github.com/legion-dev/legion/agent/gemini/geminitest"
	"github.com/legion-dev/legion/agent/opencode/opencodetest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/internal/waitfor"
)

// standInLegion writes a stand-in for legion that logs "<arg> <payload>"
// of every hook call into log, and returns its path.
func standInLegion(t *testing.T, root, log string) string {
	t.Helper()
	legion := filepath.Join(root, "bin", "legion")
	if err := os.MkdirAll(filepath.Dir(legion), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nin=$(cat)\nprintf '%%s %%s\\n' \"$1\" \"$in\" >> %s\n", shellquote.Quote(log))
	if err := os.WriteFile(legion, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return legion
}

// limitSession prepares a session of kind for the real CLI bin in a new
// worktree, with a stand-in legion logging its hooks, and returns the
// argv, directory and environment to start it with, and the hook log. user writes
// the user's own config into the home before Prepare.
func limitSession(t *testing.T, kind config.AgentKind, bin string, user func(home string), env ...string) (argv []string, dir string, environ []string, hookLog string) {
	t.Helper()
	root, repo, wt, home := agenttest.GitWorktree(t)
	user(home)
	hookLog = filepath.Join(root, "hooks.log")
	legion := standInLegion(t, root, hookLog)
	argvNew, argvResume, _ := config.KindArgv(kind)
	k, err := For(config.Agent{Kind: kind, New: argvNew, Resume: argvResume, Permissions: config.PermissionsAllowlist})
	if err != nil {
		t.Fatal(err)
	}
	s := agent.Session{
		ID: k.SessionID(agenttest.TeamID, "X-1", "implement"), Mode: "implement", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion,
	}
	s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: "first prompt"}
	l := agenttest.Prepared(t, k, s)
	environ = append(append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}, env...), l.Env...)
	return append([]string{bin}, l.ArgvNew[1:]...), wt, environ, hookLog
}

// translated is the payload of the first hook event named name, after the
// kind's hook dialect (as `legion hook` translates it), or nil.
func translated(t *testing.T, kind config.AgentKind, log, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	d, hasDialect := HookDialect(string(kind))
	for _, line := range strings.Split(string(b), "\n") {
		_, payload, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if hasDialect {
			payload = string(d.Translate([]byte(payload)))
		}
		var ev map[string]any
		if json.Unmarshal([]byte(payload), &ev) == nil && ev["hook_event_name"] == name {
			return ev
		}
	}
	return nil
}

// TestRealCodexLimit: the real Codex CLI at a 429 sends no Stop; its
// PostModelRequest hook (status failed, the error's text), which Legion's
// config asks for, reaches Legion as a StopFailure "rate_limit" once
// codex.HookDialect translates it, with the reset time of a ChatGPT plan's
// usage limit; a plain rate limit has none. Codex's own retries are off
// (the provider's request_max_retries and stream_max_retries 0, X37).
func TestRealCodexLimit(t *testing.T) {
	bin := codextest.Binary(t)
	reset := time.Now().Add(50 * time.Hour)
	for _, c := range []struct {
		name      string
		failure   *openaitest.Failure
		wantReset bool
	}{
		{"usage limit", openaitest.UsageLimitReached("plus", reset), true},
		{"rate limit", openaitest.RateLimited(20 * time.Second), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := openaitest.NewServer(t)
			srv.Script(openaitest.Turn{Failure: c.failure, Repeat: openaitest.Forever})
			argv, dir, env, hookLog := limitSession(t, config.AgentCodex, bin, func(home string) {
				if err := srv.WriteUserConfig(home); err != nil {
					t.Fatal(err)
				}
				cfg := filepath.Join(home, ".codex", "config.toml")
				b, err := os.ReadFile(cfg)
				if err != nil {
					t.Fatal(err)
				}
				b = append(b, "request_max_retries = 0\nstream_max_retries = 0\n"...)
				if err := os.WriteFile(cfg, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}, openaitest.KeyEnv+"="+openaitest.Key)
			run := startCodex(t, argv, dir, env)
			var ev map[string]any
			waitfor.Check(t, 2*time.Minute, "a StopFailure from "+hookLog, func() error {
				if ev = translated(t, config.AgentCodex, hookLog, "StopFailure"); ev == nil {
					return fmt.Errorf("screen:\n%s", lastLines(run.text(), 10))
				}
				return nil
			})
			if ev["error"] != "rate_limit" {
				t.Errorf("StopFailure error = %v; want rate_limit (payload %v)", ev["error"], ev)
			}
			at, _ := ev["reset_at"].(string)
			switch {
			case !c.wantReset && at != "":
				t.Errorf("StopFailure reset_at = %q; want none", at)
			case c.wantReset:
				got, err := time.Parse(time.RFC3339, at)
				// Codex shows minutes: the reset is the end of the minute shown.
				if err != nil || got.Before(reset.Add(-time.Second)) || got.After(reset.Add(time.Minute)) {
					t.Errorf("StopFailure reset_at = %q (%v); want the fake's reset %s, to the minute", at, err, reset.Format(time.RFC3339))
				}
			}
			if translated(t, config.AgentCodex, hookLog, "Stop") != nil {
				t.Errorf("a Stop hook fired at the limit")
			}
		})
	}
}

// TestRealOpencodeLimit: the real opencode at a 429 retries it by itself
// (each retry a session.status "retry" event with the retry's time), and
// Legion's plugin relays the first retry as a StopFailure "rate_limit"
// whose reset_at is that time (retry-after from now).
func TestRealOpencodeLimit(t *testing.T) {
	bin := opencodetest.Binary(t)
	srv := openaitest.NewServer(t)
	srv.Script(openaitest.Turn{Failure: openaitest.RateLimited(40 * time.Second), Repeat: openaitest.Forever})
	argv, dir, env, hookLog := limitSession(t, config.AgentOpencode, bin, func(home string) {
		opencodetest.WriteUserConfig(t, srv, home)
	}, openaitest.KeyEnv+"="+openaitest.Key)
	run := startCodex(t, argv, dir, env)
	var ev map[string]any
	waitfor.Check(t, 3*time.Minute, "a StopFailure from "+hookLog, func() error {
		if ev = translated(t, config.AgentOpencode, hookLog, "StopFailure"); ev == nil {
			return fmt.Errorf("screen:\n%s", lastLines(run.text(), 10))
		}
		return nil
	})
	var failed time.Time
	for _, r := range srv.Requests() {
		if r.Turn.Failure != nil {
			failed = r.Time
			break
		}
	}
	if ev["error"] != "rate_limit" || !strings.Contains(fmt.Sprint(ev["error_message"]), "Rate limit reached") {
		t.Errorf("StopFailure = %v; want error rate_limit with the API's message", ev)
	}
	at, err := time.Parse(time.RFC3339, fmt.Sprint(ev["reset_at"]))
	if err != nil || failed.IsZero() || at.Before(failed.Add(39*time.Second)) || at.After(failed.Add(45*time.Second)) {
		t.Errorf("StopFailure reset_at = %v (%v); want the 429's retry-after, 40 s after %s", ev["reset_at"], err, failed.Format(time.RFC3339))
	}
}

// TestRealGeminiLimit: the real Gemini CLI at a spent daily quota (429
// RESOURCE_EXHAUSTED with a PerDay quota id) fires no hook after
// BeforeAgent: it opens its own dialog, "Usage limit reached for
// <model>." with "1. Keep trying" and "2. Stop", and waits there
// (gemini FACTS G32). Nothing reaches Legion's hook; the screen is all
// there is.
func TestRealGeminiLimit(t *testing.T) {
	bin := geminitest.Binary(t)
	srv := geminitest.NewServer(t)
	srv.Script(geminitest.Turn{Failure: geminitest.Exhausted(geminitest.PerDay, 30*time.Second), Repeat: geminitest.Forever})
	argv, dir, env, hookLog := limitSession(t, config.AgentGemini, bin, func(home string) {
		if err := geminitest.WriteUserSettings(home); err != nil {
			t.Fatal(err)
		}
	}, srv.Env()...)
	run := startCodex(t, argv, dir, env)
	waitfor.Check(t, 2*time.Minute, "Gemini's usage limit dialog", func() error {
		if s := strings.Join(strings.Fields(run.text()), " "); !strings.Contains(s, "Usage limit reached for "+geminitest.Model+".") || !strings.Contains(s, "1. Keep trying") {
			return fmt.Errorf("screen:\n%s", lastLines(run.text(), 15))
		}
		return nil
	})
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("requests = %d; want 1 (a daily quota is not retried)", n)
	}
	for _, name := range []string{"AfterAgent", "StopFailure", "Notification", "Stop"} {
		if ev := translated(t, config.AgentGemini, hookLog, name); ev != nil {
			t.Errorf("a %s hook fired at the limit: %v", name, ev)
		}
	}
}
