package kinds

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude"
	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/agent/codex"
	"github.com/legion-dev/legion/agent/gemini"
	"github.com/legion-dev/legion/agent/opencode"
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
			u, err := claude.ParseUsage(f)
			if err != nil {
				t.Fatalf("claude.ParseUsage(%s): %v", tt.file, err)
			}
			if u.InputTokens != tt.input || u.OutputTokens != tt.output || u.CostUSD == nil || *u.CostUSD != tt.cost || u.Model != "claude-opus-5-5" {
				t.Errorf("claude.ParseUsage(%s) = %+v (cost %v); want input %d, output %d, cost %v, model claude-opus-5-5 (not the interrupted turn's <synthetic>)", tt.file, u, u.CostUSD, tt.input, tt.output, tt.cost)
			}
		})
	}
}

// TestParseRealUsage: files the real CLIs wrote against the repository's
// fake model APIs (whose usage differs field by field), before and after
// a resume: gemini FACTS G31 (Gemini CLI 0.61.0's chat file, from
// TestRealGeminiNewAndResume: three model calls, then one resumed,
// each written again as it changes) and opencode FACTS O27 (opencode
// 1.18.33 through Legion's plugin, from TestRealOpencodeNewAndResume:
// two calls, then one resumed, each first with zeros; opencode's own
// session row said input 180, output 15, reasoning 15, cache read 120,
// cost 0.00054).
func TestParseRealUsage(t *testing.T) {
	cost := 0.00018 + 0.00018 + 0.00018
	tests := []struct {
		file  string
		parse func(io.Reader) (agent.Usage, error)
		want  agent.Usage
	}{
		// Per call: prompt 100 of which 40 cached, tool-use prompt 3,
		// candidates 10, thoughts 5.
		{"gemini-session-new-and-resumed.jsonl", gemini.ParseUsage, agent.Usage{InputTokens: 4 * 63, CacheReadTokens: 4 * 40, OutputTokens: 4 * 15, Model: "gemini-2.5-flash"}},
		// Per call: input 100 of which 40 cached, output 10 of which 5
		// reasoning.
		{"opencode-usage.jsonl", opencode.ParseUsage, agent.Usage{InputTokens: 3 * 60, CacheReadTokens: 3 * 40, OutputTokens: 3 * 10, CostUSD: &cost}},
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
		parse   func(string) (agent.Usage, error)
		text    string
		want    agent.Usage
		wantErr string
	}{
		{"claude no usage", claudeText, `{"type":"user","message":{"role":"user","content":"hi"}}` + "\n", agent.Usage{}, ""},
		{"claude partial last line", claudeText,
			`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":5,"output_tokens":2,"cache_read_input_tokens":3,"cache_creation_input_tokens":4}}}` + "\n" +
				`{"type":"assistant","message":{"id":"m2","usage":{"input_tok`, agent.Usage{InputTokens: 5, OutputTokens: 2, CacheReadTokens: 3, CacheCreationTokens: 4}, ""},
		{"claude malformed line between", claudeText,
			`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":5}}}` + "\nnot json \"usage\"\n" +
				`{"type":"assistant","message":{"id":"m2","usage":{"input_tokens":6}}}` + "\n", agent.Usage{InputTokens: 11}, ""},
		{"claude negative", claudeText, `{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":-5}}}` + "\n", agent.Usage{}, "0 or more"},
		{"codex model of the last turn", codexText,
			`{"timestamp":"t","type":"turn_context","payload":{"turn_id":"a","model":"gpt-5-codex"}}` + "\n" +
				`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"output_tokens":1}}}}` + "\n" +
				`{"timestamp":"t","type":"turn_context","payload":{"turn_id":"b","model":"gpt-5.1"}}` + "\n",
			agent.Usage{InputTokens: 10, OutputTokens: 1, Model: "gpt-5.1"}, ""},
		{"codex last total counts", codexText,
			`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":null}}` + "\n" +
				`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":7,"reasoning_output_tokens":3,"total_tokens":107}}}}` + "\n" +
				`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":300,"cached_input_tokens":100,"output_tokens":20,"reasoning_output_tokens":5,"total_tokens":320}}}}` + "\n",
			agent.Usage{InputTokens: 200, CacheReadTokens: 100, OutputTokens: 20}, ""},
		{"gemini last line of an id counts", geminiText,
			`{"id":"g1","type":"gemini","content":"","tokens":{"input":10,"output":1,"cached":0,"thoughts":0,"tool":0,"total":11}}` + "\n" +
				`{"$set":{"lastUpdated":"t"}}` + "\n" +
				`{"id":"g1","type":"gemini","content":"","tokens":{"input":10,"output":1,"cached":4,"thoughts":2,"tool":1,"total":14},"toolCalls":[]}` + "\n" +
				`{"id":"u1","type":"user","tokens":{"input":99}}` + "\n" +
				`{"id":"g2","type":"gemini","tokens":{"input":5,"output":1,"cached":9}}` + "\n",
			agent.Usage{InputTokens: 7, CacheReadTokens: 9, OutputTokens: 4}, ""},
		{"gemini history set once", geminiText,
			`{"$set":{"messages":[{"id":"g1","type":"gemini","tokens":{"input":10,"output":1}},{"id":"u","type":"user"}]}}` + "\n" +
				`{"id":"g1","type":"gemini","tokens":{"input":10,"output":1}}` + "\n" +
				`{"id":"g2","type":"gemini","tokens":{"input":20,"output":2}}`,
			agent.Usage{InputTokens: 30, OutputTokens: 3}, ""},
		{"gemini negative", geminiText, `{"id":"g1","type":"gemini","tokens":{"input":10,"thoughts":-1}}`, agent.Usage{}, "0 or more"},
		{"opencode no cost", opencodeText,
			`{"id":"m1","tokens":{"input":0,"output":0,"reasoning":0,"cache":{"read":0,"write":0}}}` + "\n" +
				`{"id":"m1","tokens":{"input":7,"output":2,"reasoning":1,"cache":{"read":3,"write":4}}}` + "\n" +
				`not json` + "\n" + `{"id":"m2"}` + "\n" +
				`{"id":"m3","tokens":{"input":1}}` + "\n" + `{"id":"m4","tokens":{"inp`,
			agent.Usage{InputTokens: 8, OutputTokens: 3, CacheReadTokens: 3, CacheCreationTokens: 4}, ""},
		{"opencode negative cost", opencodeText, `{"id":"m1","tokens":{"input":1},"cost":-0.5}`, agent.Usage{}, "0 or more"},
		{"opencode negative tokens", opencodeText, `{"id":"m1","tokens":{"cache":{"write":-1}}}`, agent.Usage{}, "0 or more"},
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
				got.CacheReadTokens != tt.want.CacheReadTokens || got.CacheCreationTokens != tt.want.CacheCreationTokens || got.CostUSD != nil ||
				tt.want.Model != "" && got.Model != tt.want.Model {
				t.Errorf("parse = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func claudeText(s string) (agent.Usage, error) { return claude.ParseUsage(strings.NewReader(s)) }
func codexText(s string) (agent.Usage, error)  { return codex.ParseUsage(strings.NewReader(s)) }
func geminiText(s string) (agent.Usage, error) { return gemini.ParseUsage(strings.NewReader(s)) }
func opencodeText(s string) (agent.Usage, error) {
	return opencode.ParseUsage(strings.NewReader(s))
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
		for _, r := range usageReaders(t) {
			parse := func(b []byte) (agent.Usage, error) { return r.ParseUsage(bytes.NewReader(b)) }
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
	u, err := claude.ParseUsage(strings.NewReader(strings.Replace(big, "%s", "a", 1) + strings.Replace(big, "%s", "b", 1)))
	if err != nil || u.InputTokens != math.MaxInt64 {
		t.Errorf("claude.ParseUsage(two huge counts) = %+v, %v; want input at MaxInt64", u, err)
	}
}

// usageReaders are the registry's kinds that record usage.
func usageReaders(t testing.TB) []agent.UsageReader {
	var out []agent.UsageReader
	for _, k := range All() {
		if r, ok := k.(agent.UsageReader); ok {
			out = append(out, r)
		}
	}
	return out
}

// TestEveryCLIRecordsUsage: every kind with a CLI of its own (a pin in
// agent/cliversion) tells where its agents record their usage, so the
// board shows tokens for all of them; only custom, whose program Legion
// does not know, records none.
func TestEveryCLIRecordsUsage(t *testing.T) {
	for _, k := range All() {
		_, pinned := cliversion.For(k.Name())
		if _, ok := k.(agent.UsageReader); ok != pinned {
			t.Errorf("kind %s: usage reader %v, CLI pinned %v; want every pinned CLI's kind to read usage, and only those", k.Name(), ok, pinned)
		}
	}
}

// TestPriced: a file whose agent reported no cost is priced at its
// model's price (the longest prefix that matches), per million tokens;
// one with a cost, no model or an unpriced model keeps what it had.
func TestPriced(t *testing.T) {
	prices := map[string]agent.Price{
		"gpt-5":       {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-5-codex": {Input: 2, Output: 20, CacheRead: 0.2},
	}
	u := agent.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CacheReadTokens: 2_000_000, Model: "gpt-5-codex-mini"}
	if got := u.Priced(prices); got.CostUSD == nil || math.Abs(*got.CostUSD-(2+2+0.4)) > 1e-9 {
		t.Errorf("Priced(%+v) cost %v; want 4.4 at gpt-5-codex's price", u, got.CostUSD)
	}
	u.Model = "gpt-5.1"
	if got := u.Priced(prices); got.CostUSD == nil || math.Abs(*got.CostUSD-(1.25+1+0.25)) > 1e-9 {
		t.Errorf("Priced(%+v) cost %v; want 2.5 at gpt-5's price", u, got.CostUSD)
	}
	reported := 0.5
	for _, v := range []agent.Usage{{InputTokens: 1, Model: "gpt-5", CostUSD: &reported}, {InputTokens: 1}, {InputTokens: 1, Model: "o3"}} {
		if got := v.Priced(prices); got.CostUSD != v.CostUSD {
			t.Errorf("Priced(%+v) cost %v; want it as it was", v, got.CostUSD)
		}
	}
}
