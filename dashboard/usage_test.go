package dashboard

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/ptyworker/claude"
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
	write(filepath.Join(claude.SubagentDir(file(controller.ModeImplement)), "agent-x.jsonl"), line("s1", 2))
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

// FuzzParseUsage: session files are outside input; no input makes the
// parsers panic or report negative counts.
func FuzzParseUsage(f *testing.F) {
	for _, name := range []string{"turns-thinking-and-cross-dir-resume.jsonl", "killed-mid-stream-then-resumed.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":3,"cached_input_tokens":9}}}}`))
	f.Add([]byte(`{"type":"cost-state","totalCostUSD":1e308}` + "\n" + `{"type":"assistant","message":{"usage":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (Usage, error){
			func(b []byte) (Usage, error) { return ParseClaudeUsage(bytes.NewReader(b)) },
			func(b []byte) (Usage, error) { return ParseCodexUsage(bytes.NewReader(b)) },
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
