package dashboard

import (
	"bytes"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/team"
)

// TestParseClaudeUsage: real session files of Claude Code 2.1.330 (from
// the session format notes' samples): each assistant message counted once
// although its usage is on every content block's line, and the largest
// cost-state total (which a resume carries on).
func TestParseClaudeUsage(t *testing.T) {
	tests := []struct {
		file          string
		input, output int64
		cost          float64
	}{
		{"turns-thinking-and-cross-dir-resume.jsonl", 20272, 154, 0.08416799999999999},
		{"killed-mid-stream-then-resumed.jsonl", 4999, 13, 0.020256},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			u, err := ParseClaudeUsage(f)
			if err != nil {
				t.Fatalf("ParseClaudeUsage(%s): %v", tt.file, err)
			}
			if u.InputTokens != tt.input || u.OutputTokens != tt.output || u.CostUSD == nil || *u.CostUSD != tt.cost {
				t.Errorf("ParseClaudeUsage(%s) = %+v (cost %v); want input %d, output %d, cost %v", tt.file, u, u.CostUSD, tt.input, tt.output, tt.cost)
			}
		})
	}
}

// TestParseRealUsage: files the real CLIs wrote against the repository's
// fake model APIs (whose usage differs field by field), before and after
// a resume: gemini FACTS G31 (Gemini CLI 0.61.0's chat file, from
// agent.TestRealGeminiNewAndResume: three model calls, then one resumed,
// each written again as it changes) and opencode FACTS O27 (opencode
// 1.18.33 through Legion's plugin, from agent.TestRealOpencodeNewAndResume:
// two calls, then one resumed, each first with zeros; opencode's own
// session row said input 180, output 15, reasoning 15, cache read 120,
// cost 0.00054).
func TestParseRealUsage(t *testing.T) {
	cost := 0.00018 + 0.00018 + 0.00018
	tests := []struct {
		file  string
		parse func(io.Reader) (Usage, error)
		want  Usage
	}{
		// Per call: prompt 100 of which 40 cached, tool-use prompt 3,
		// candidates 10, thoughts 5.
		{"gemini-session-new-and-resumed.jsonl", ParseGeminiUsage, Usage{InputTokens: 4 * 63, CacheReadTokens: 4 * 40, OutputTokens: 4 * 15}},
		// Per call: input 100 of which 40 cached, output 10 of which 5
		// reasoning.
		{"opencode-usage.jsonl", ParseOpencodeUsage, Usage{InputTokens: 3 * 60, CacheReadTokens: 3 * 40, OutputTokens: 3 * 10, CostUSD: &cost}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := tt.parse(f)
			if err != nil {
				t.Fatalf("parse %s: %v", tt.file, err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("parse %s (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

func TestParseUsageLines(t *testing.T) {
	tests := []struct {
		name    string
		parse   func(string) (Usage, error)
		text    string
		want    Usage
		wantErr string
	}{
		{"claude no usage", claudeText, `{"type":"user","message":{"role":"user","content":"hi"}}` + "\n", Usage{}, ""},
		{"claude partial last line", claudeText,
			`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":5,"output_tokens":2,"cache_read_input_tokens":3,"cache_creation_input_tokens":4}}}` + "\n" +
				`{"type":"assistant","message":{"id":"m2","usage":{"input_tok`, Usage{InputTokens: 5, OutputTokens: 2, CacheReadTokens: 3, CacheCreationTokens: 4}, ""},
		{"claude malformed line between", claudeText,
			`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":5}}}` + "\nnot json \"usage\"\n" +
				`{"type":"assistant","message":{"id":"m2","usage":{"input_tokens":6}}}` + "\n", Usage{InputTokens: 11}, ""},
		{"claude negative", claudeText, `{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":-5}}}` + "\n", Usage{}, "0 or more"},
		{"codex last total counts", codexText,
			`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":null}}` + "\n" +
				`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":7,"reasoning_output_tokens":3,"total_tokens":107}}}}` + "\n" +
				`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":300,"cached_input_tokens":100,"output_tokens":20,"reasoning_output_tokens":5,"total_tokens":320}}}}` + "\n",
			Usage{InputTokens: 200, CacheReadTokens: 100, OutputTokens: 20}, ""},
		{"gemini last line of an id counts", geminiText,
			`{"id":"g1","type":"gemini","content":"","tokens":{"input":10,"output":1,"cached":0,"thoughts":0,"tool":0,"total":11}}` + "\n" +
				`{"$set":{"lastUpdated":"t"}}` + "\n" +
				`{"id":"g1","type":"gemini","content":"","tokens":{"input":10,"output":1,"cached":4,"thoughts":2,"tool":1,"total":14},"toolCalls":[]}` + "\n" +
				`{"id":"u1","type":"user","tokens":{"input":99}}` + "\n" +
				`{"id":"g2","type":"gemini","tokens":{"input":5,"output":1,"cached":9}}` + "\n",
			Usage{InputTokens: 7, CacheReadTokens: 9, OutputTokens: 4}, ""},
		{"gemini history set once", geminiText,
			`{"$set":{"messages":[{"id":"g1","type":"gemini","tokens":{"input":10,"output":1}},{"id":"u","type":"user"}]}}` + "\n" +
				`{"id":"g1","type":"gemini","tokens":{"input":10,"output":1}}` + "\n" +
				`{"id":"g2","type":"gemini","tokens":{"input":20,"output":2}}`,
			Usage{InputTokens: 30, OutputTokens: 3}, ""},
		{"gemini negative", geminiText, `{"id":"g1","type":"gemini","tokens":{"input":10,"thoughts":-1}}`, Usage{}, "0 or more"},
		{"opencode no cost", opencodeText,
			`{"id":"m1","tokens":{"input":0,"output":0,"reasoning":0,"cache":{"read":0,"write":0}}}` + "\n" +
				`{"id":"m1","tokens":{"input":7,"output":2,"reasoning":1,"cache":{"read":3,"write":4}}}` + "\n" +
				`not json` + "\n" + `{"id":"m2"}` + "\n" +
				`{"id":"m3","tokens":{"input":1}}` + "\n" + `{"id":"m4","tokens":{"inp`,
			Usage{InputTokens: 8, OutputTokens: 3, CacheReadTokens: 3, CacheCreationTokens: 4}, ""},
		{"opencode negative cost", opencodeText, `{"id":"m1","tokens":{"input":1},"cost":-0.5}`, Usage{}, "0 or more"},
		{"opencode negative tokens", opencodeText, `{"id":"m1","tokens":{"cache":{"write":-1}}}`, Usage{}, "0 or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parse(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse = %+v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.InputTokens != tt.want.InputTokens || got.OutputTokens != tt.want.OutputTokens ||
				got.CacheReadTokens != tt.want.CacheReadTokens || got.CacheCreationTokens != tt.want.CacheCreationTokens || got.CostUSD != nil {
				t.Errorf("parse = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func claudeText(s string) (Usage, error) { return ParseClaudeUsage(strings.NewReader(s)) }
func codexText(s string) (Usage, error)  { return ParseCodexUsage(strings.NewReader(s)) }
func geminiText(s string) (Usage, error) { return ParseGeminiUsage(strings.NewReader(s)) }
func opencodeText(s string) (Usage, error) {
	return ParseOpencodeUsage(strings.NewReader(s))
}

// TestIssueUsage: an issue's usage is its phases' session files where
// the team's kind keeps them, a retro's in its implementer's session, and
// the subagents' files; phases that never ran count nothing.
func TestIssueUsage(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	ct := config.Team{Name: "demo", ID: uuid.MustParse("6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"), Tracker: config.TrackerLocal, IssuePrefix: "DEMO",
		Workspace: t.TempDir(), Agent: config.Agent{Kind: config.AgentClaude}}
	tm, err := team.Open(ct, "", state)
	if err != nil {
		t.Fatal(err)
	}
	line := func(id string, in int) string {
		return `{"type":"assistant","message":{"id":"` + id + `","usage":{"input_tokens":` + strings.Repeat("1", in) + `,"output_tokens":1}}}` + "\n"
	}
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := func(mode controller.Mode) string {
		id, _, err := tm.SessionOf("DEMO-1", mode)
		if err != nil {
			t.Fatal(err)
		}
		return (&agent.Claude{}).SessionFile(home, tm.Worktrees.Path("DEMO-1"), id)
	}
	write(file(controller.ModePlan), line("p1", 2))                                  // 11
	write(file(controller.ModeImplement), line("i1", 3)+line("i1", 3)+line("i2", 1)) // 111 + 1
	write(filepath.Join(claudecode.SubagentDir(file(controller.ModeImplement)), "agent-x.jsonl"), line("s1", 2))
	if file(controller.ModeRetro) != file(controller.ModeImplement) {
		t.Fatalf("the retro's session file %s is not its implementer's %s", file(controller.ModeRetro), file(controller.ModeImplement))
	}
	u, err := IssueUsage(tm, home, "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	if u.InputTokens != 11+111+1+11 || u.OutputTokens != 4 || len(u.Files) != 3 {
		t.Errorf("IssueUsage = %+v; want input 134, output 4 from 3 files", u)
	}
	// A file that grew is read again.
	write(file(controller.ModeReview), line("r1", 1))
	if u, err = IssueUsage(tm, home, "DEMO-1"); err != nil || u.InputTokens != 135 {
		t.Errorf("IssueUsage after the review = %+v, %v; want input 135", u, err)
	}
}

// TestIssueUsageByKind: a team whose modes run four kinds (agent.kind
// and kind_by_mode) sums each phase's files where dispatch put that
// kind's conversation home: the real Gemini CLI's chat file and the usage
// file of Legion's opencode plugin (testdata, see TestParseRealUsage), a
// Codex rollout and a Claude Code session file.
func TestIssueUsageByKind(t *testing.T) {
	ws := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	toml := `[teams.demo]
id = "6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"
workspace = "` + ws + `"
agent.kind = "claude"
agent.kind_by_mode = { plan = "gemini", implement = "opencode", retro = "opencode", review = "codex" }
`
	cfg, err := config.Parse(filepath.Join(ws, "legion.toml"), []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := team.Open(cfg.Teams[0], "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tm.Legion = "/opt/legion/bin/legion"
	home := t.TempDir()
	// The session file each mode's kind named at dispatch.
	sessionFile := func(mode controller.Mode) string {
		t.Helper()
		d, err := tm.PlanDispatch(t.Context(), "DEMO-1", mode, home)
		if err != nil {
			t.Fatal(err)
		}
		return d.SessionFile
	}
	write := func(path string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	testdata := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	planID, _, err := tm.SessionOf("DEMO-1", controller.ModePlan)
	if err != nil {
		t.Fatal(err)
	}
	// Gemini: the chat files beside logs.json (gemini FACTS G8, G31).
	write(filepath.Join(filepath.Dir(sessionFile(controller.ModePlan)), "chats", "session-2026-11-29T07-09-"+planID.String()[:8]+".jsonl"),
		testdata("gemini-session-new-and-resumed.jsonl"))
	// opencode: the plugin's usage file beside the session file.
	write(filepath.Join(filepath.Dir(sessionFile(controller.ModeImplement)), agent.OpencodeUsageFile), testdata("opencode-usage.jsonl"))
	// Codex: a rollout of its home.
	write(filepath.Join(filepath.Dir(sessionFile(controller.ModeReview)), "sessions", "2026", "11", "29", "rollout-2026-11-29T07-09-00-x.jsonl"),
		[]byte(`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10,"reasoning_output_tokens":5,"total_tokens":110}}}}`+"\n"))
	// Claude Code: its session file under ~/.claude.
	write(sessionFile(controller.ModeFinish), []byte(`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":7,"output_tokens":2,"cache_read_input_tokens":3,"cache_creation_input_tokens":4}}}`+"\n"))

	got, err := IssueUsage(tm, home, "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	cost := 0.00054
	want := Usage{
		InputTokens:         4*63 + 3*60 + 60 + 7,
		CacheReadTokens:     4*40 + 3*40 + 40 + 3,
		OutputTokens:        4*15 + 3*10 + 10 + 2,
		CacheCreationTokens: 4,
		CostUSD:             &cost,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12), cmpopts.IgnoreFields(Usage{}, "Files")); diff != "" {
		t.Errorf("IssueUsage (-want +got):\n%s", diff)
	}
	if len(got.Files) != 4 {
		t.Errorf("IssueUsage read %q; want one file of each kind", got.Files)
	}

	// A corrupt file is an error naming it.
	bad := filepath.Join(filepath.Dir(sessionFile(controller.ModeImplement)), agent.OpencodeUsageFile)
	write(bad, []byte(`{"id":"m1","tokens":{"input":-1}}`+"\n"))
	if _, err := IssueUsage(tm, home, "DEMO-1"); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "0 or more") {
		t.Errorf("IssueUsage with a negative count in %s: %v; want an error naming it", bad, err)
	}
}

// FuzzParseUsage: session files are outside input; no input makes the
// parsers panic or report negative counts.
func FuzzParseUsage(f *testing.F) {
	for _, name := range []string{"turns-thinking-and-cross-dir-resume.jsonl", "killed-mid-stream-then-resumed.jsonl", "gemini-session-new-and-resumed.jsonl", "opencode-usage.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":3,"cached_input_tokens":9}}}}`))
	f.Add([]byte(`{"type":"cost-state","totalCostUSD":1e308}` + "\n" + `{"type":"assistant","message":{"usage":{}}}`))
	f.Add([]byte(`{"id":"g","type":"gemini","tokens":{"input":3,"cached":9,"tool":9223372036854775807,"output":1,"thoughts":9223372036854775807}}`))
	f.Add([]byte(`{"$set":{"messages":[{"type":"gemini","tokens":{"input":1}}]}}`))
	f.Add([]byte(`{"id":"m","tokens":{"input":1,"cache":{"read":2,"write":3}},"cost":1e308}` + "\n" + `{"id":"n","tokens":{},"cost":1e308}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (Usage, error){
			func(b []byte) (Usage, error) { return ParseClaudeUsage(bytes.NewReader(b)) },
			func(b []byte) (Usage, error) { return ParseCodexUsage(bytes.NewReader(b)) },
			func(b []byte) (Usage, error) { return ParseGeminiUsage(bytes.NewReader(b)) },
			func(b []byte) (Usage, error) { return ParseOpencodeUsage(bytes.NewReader(b)) },
		} {
			u, err := parse(data)
			if err != nil {
				continue
			}
			if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheCreationTokens < 0 || u.CostUSD != nil && *u.CostUSD < 0 {
				t.Errorf("usage %+v from %q: negative", u, data)
			}
		}
	})
}

func TestParseClaudeUsageSaturates(t *testing.T) {
	big := `{"type":"assistant","message":{"id":"%s","usage":{"input_tokens":9223372036854775000}}}` + "\n"
	u, err := ParseClaudeUsage(strings.NewReader(strings.Replace(big, "%s", "a", 1) + strings.Replace(big, "%s", "b", 1)))
	if err != nil || u.InputTokens != math.MaxInt64 {
		t.Errorf("ParseClaudeUsage(two huge counts) = %+v, %v; want input at MaxInt64", u, err)
	}
}
