package kinds

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	"github.com/legion-dev/legion/internal/benchreport"
	"github.com/legion-dev/legion/internal/shellquote"
	"github.com/legion-dev/legion/internal/waitfor"
)

// BenchmarkAgentCLIs starts each real agent CLI as its kind's Prepare says
// (Claude Code, Codex, the Gemini CLI, opencode), in a real PTY, against its local
// fake API, three times each, and reports the medians of: the time from
// the start to its first turn request at the API (start_ms), and the
// resident memory of the agent's whole process tree (VmRSS summed, MB)
// once its first turn has ended (the Stop hook, Gemini's AfterAgent) and
// it idles at its prompt. The worker's own memory is not in it (the same
// for every kind). Claude Code is the baseline: codex_vs_claude_start and
// _rss, gemini_vs_claude_start and _rss, opencode's likewise, are the ratios.
func BenchmarkAgentCLIs(b *testing.B) {
	claudeBin, codexBin, geminiBin, opencodeBin := claudetest.Binary(b), codextest.Binary(b), geminitest.Binary(b), opencodetest.Binary(b)
	const runs = 3
	var cStart, xStart, gStart, oStart []time.Duration
	var cRSS, xRSS, gRSS, oRSS []time.Duration // kB, as durations so Median sorts them
	for range b.N {
		for range runs {
			d, kb := benchCLI(b, config.AgentClaude, claudeBin)
			cStart, cRSS = append(cStart, d), append(cRSS, time.Duration(kb))
			d, kb = benchCLI(b, config.AgentCodex, codexBin)
			xStart, xRSS = append(xStart, d), append(xRSS, time.Duration(kb))
			d, kb = benchCLI(b, config.AgentGemini, geminiBin)
			gStart, gRSS = append(gStart, d), append(gRSS, time.Duration(kb))
			d, kb = benchCLI(b, config.AgentOpencode, opencodeBin)
			oStart, oRSS = append(oStart, d), append(oRSS, time.Duration(kb))
		}
	}
	benchreport.Vs(b, xStart, "codex_start_ms", cStart, "claude_start_ms", "codex_vs_claude_start")
	benchreport.Vs(b, gStart, "gemini_start_ms", cStart, "claude_start_ms", "gemini_vs_claude_start")
	mc, mx, mg := benchreport.Median(cRSS), benchreport.Median(xRSS), benchreport.Median(gRSS)
	b.ReportMetric(float64(mc)/1024, "claude_idle_rss_MB")
	b.ReportMetric(float64(mx)/1024, "codex_idle_rss_MB")
	b.ReportMetric(float64(mg)/1024, "gemini_idle_rss_MB")
	b.ReportMetric(float64(mx)/float64(mc), "codex_vs_claude_rss")
	b.ReportMetric(float64(mg)/float64(mc), "gemini_vs_claude_rss")
	benchreport.Vs(b, oStart, "opencode_start_ms", cStart, "claude_start_ms", "opencode_vs_claude_start")
	mo := benchreport.Median(oRSS)
	b.ReportMetric(float64(mo)/1024, "opencode_idle_rss_MB")
	b.ReportMetric(float64(mo)/float64(mc), "opencode_vs_claude_rss")
}

// benchCLI runs one agent of kind once: the time to its first turn request
// and its tree's RSS in kB once idle.
func benchCLI(b *testing.B, kind config.AgentKind, bin string) (time.Duration, int64) {
	b.Helper()
	root, repo, wt, home := agenttest.GitWorktree(b)
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		b.Fatal(err)
	}
	hookLog := filepath.Join(root, "hooks.log")
	legion := filepath.Join(root, "legion")
	script := fmt.Sprintf("#!/bin/sh\nin=$(cat)\nprintf '%%s %%s\\n' \"$1\" \"$in\" >> %s\n", shellquote.Quote(hookLog))
	if err := os.WriteFile(legion, []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}
	a := config.Agent{Kind: kind, Permissions: config.PermissionsAllowlist}
	var first func() (time.Time, bool)
	stop := "Stop" // the hook event that ends a turn
	switch kind {
	case config.AgentClaude:
		srv := anthropictest.NewServer(b)
		srv.Key = "sk-legion-bench"
		srv.Script(anthropictest.AnySession, anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("Ready.")}})
		env = append(env, "ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_AUTH_TOKEN="+srv.Key, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
		a.New, a.Resume = []string{bin, "--session-id", "{session_id}", "{prompt}"}, []string{bin, "--resume", "{session_id}", "{prompt}"}
		first = func() (time.Time, bool) {
			if reqs := srv.MessageRequests(""); len(reqs) > 0 {
				return reqs[0].Time, true
			}
			return time.Time{}, false
		}
	case config.AgentCodex, config.AgentOpencode:
		srv := openaitest.NewServer(b)
		srv.Script(openaitest.Turn{Text: "Ready."})
		if kind == config.AgentOpencode {
			opencodetest.WriteUserConfig(b, srv, home) // as after a user's first start
		} else if err := srv.WriteUserConfig(home); err != nil {
			b.Fatal(err)
		}
		env = append(env, openaitest.KeyEnv+"="+openaitest.Key)
		argvNew, argvResume, _ := config.KindArgv(kind)
		a.New, a.Resume = append([]string{bin}, argvNew[1:]...), append([]string{bin}, argvResume[1:]...)
		first = func() (time.Time, bool) {
			for _, r := range srv.Requests() {
				if !r.Title {
					return r.Time, true
				}
			}
			return time.Time{}, false
		}
	case config.AgentGemini:
		srv := geminitest.NewServer(b)
		srv.Script(geminitest.Turn{Text: "Ready."})
		if err := geminitest.WriteUserSettings(home); err != nil {
			b.Fatal(err)
		}
		env = append(env, srv.Env()...)
		argvNew, argvResume, _ := config.KindArgv(kind)
		a.New, a.Resume = append([]string{bin}, argvNew[1:]...), append([]string{bin}, argvResume[1:]...)
		stop = "AfterAgent"
		first = func() (time.Time, bool) {
			if reqs := srv.Requests(); len(reqs) > 0 {
				return reqs[0].Time, true
			}
			return time.Time{}, false
		}
	}
	k, err := For(a)
	if err != nil {
		b.Fatal(err)
	}
	s := agent.Session{ID: k.SessionID(agenttest.TeamID, "X-1", "plan"), Mode: "plan", Cwd: wt, Repo: repo, Home: home,
		Dir: filepath.Join(root, "state", "agents", "w"), Legion: legion}
	s.Vars = config.Vars{SessionID: s.ID.String(), Workspace: wt, Prompt: "say you are ready"}
	l := agenttest.Prepared(b, k, s)
	start := time.Now()
	run := startCodex(b, l.ArgvNew, wt, append(env, l.Env...))
	waitfor.Check(b, 2*time.Minute, string(kind)+"'s first turn to end ("+stop+" hook)", func() error {
		if countEvents(hookEvents(b, hookLog), stop) == 0 {
			return fmt.Errorf("screen:\n%s", lastLines(run.text(), 10))
		}
		return nil
	})
	at, ok := first()
	if !ok {
		b.Fatalf("%s: no turn request reached the API", kind)
	}
	return at.Sub(start), treeRSS(b, run.cmd.Process.Pid)
}

// treeRSS is the VmRSS, in kB, of pid and all its descendants.
func treeRSS(b *testing.B, pid int) int64 {
	b.Helper()
	children := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], p)
			}
		}
	}
	var total int64
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[0]
		todo = append(todo[1:], children[p]...)
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(p), "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				total += kb
			}
		}
		f.Close()
	}
	return total
}
