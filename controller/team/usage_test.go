package team

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent/claude"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/agent/codex"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/agent/opencode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
)

// TestIssueUsage: an issue's usage is its phases' session files where
// the team's kind keeps them, a retro's in its implementer's session, and
// the subagents' files; phases that never ran count nothing.
func TestIssueUsage(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	ct := config.Team{Name: "demo", ID: uuid.MustParse("6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f"), Tracker: config.TrackerLocal, IssuePrefix: "DEMO",
		Workspace: t.TempDir(), Agent: config.Agent{Kind: config.AgentClaude}}
	tm, err := Open(ct, "", state)
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
		return claude.New(config.Agent{}).SessionFile(home, tm.Worktrees.Path("DEMO-1"), id)
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
	tm, err := Open(cfg.Teams[0], "", t.TempDir())
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
		b, err := os.ReadFile(filepath.Join("..", "..", "agent", "kinds", "testdata", name))
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
	write(filepath.Join(filepath.Dir(sessionFile(controller.ModeImplement)), opencode.UsageFile), testdata("opencode-usage.jsonl"))
	// Codex: a rollout of its home.
	write(filepath.Join(filepath.Dir(sessionFile(controller.ModeReview)), "sessions", "2026", "11", "29", "rollout-2026-11-29T07-09-00-x.jsonl"),
		[]byte(`{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10,"reasoning_output_tokens":5,"total_tokens":110}}}}`+"\n"))
	// Claude Code: its session file under ~/.claude.
	write(sessionFile(controller.ModeFinish), []byte(`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":7,"output_tokens":2,"cache_read_input_tokens":3,"cache_creation_input_tokens":4}}}`+"\n"))

	got, err := IssueUsage(tm, home, "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	// opencode reported its cost; the Gemini CLI's tokens (model
	// gemini-2.5-flash) cost what the shipped prices say; the Codex
	// rollout names no model and Claude Code's line reported no cost and
	// no model: their tokens have no price.
	gemini := config.DefaultPrices["gemini-2.5-flash"]
	cost := 0.00054 + (4*63*gemini.Input+4*40*gemini.CacheRead+4*15*gemini.Output)/1e6
	want := Usage{
		InputTokens:         4*63 + 3*60 + 60 + 7,
		CacheReadTokens:     4*40 + 3*40 + 40 + 3,
		OutputTokens:        4*15 + 3*10 + 10 + 2,
		CacheCreationTokens: 4,
		CostUSD:             &cost,
		Model:               "gemini-2.5-flash",
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12), cmpopts.IgnoreFields(Usage{}, "Files")); diff != "" {
		t.Errorf("IssueUsage (-want +got):\n%s", diff)
	}
	if len(got.Files) != 4 {
		t.Errorf("IssueUsage read %q; want one file of each kind", got.Files)
	}

	// A corrupt file is an error naming it.
	bad := filepath.Join(filepath.Dir(sessionFile(controller.ModeImplement)), opencode.UsageFile)
	write(bad, []byte(`{"id":"m1","tokens":{"input":-1}}`+"\n"))
	if _, err := IssueUsage(tm, home, "DEMO-1"); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "0 or more") {
		t.Errorf("IssueUsage with a negative count in %s: %v; want an error naming it", bad, err)
	}
}

// TestSpend: a team's Spend of an issue is its phases' usage, priced at
// budget.prices where the agent reported no cost (a Codex rollout naming
// its model), with the phases listed and Unpriced when some tokens have
// no price; a Claude Code conversation that reported its cost is not
// priced again.
func TestSpend(t *testing.T) {
	ws := t.TempDir()
	cfg, err := config.Parse(filepath.Join(ws, "legion.toml"), []byte("[teams.demo]\nid = \"6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f\"\nworkspace = \""+ws+"\"\n"+
		"agent.kind_by_mode = { review = \"codex\" }\nbudget.issue_tokens = 1000\nbudget.prices = { \"my-model\" = { input = 1000, output = 2000 } }\n"))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	tm, err := Open(cfg.Teams[0], cfg.Path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tm.LookupEnv = func(k string) (string, bool) { return map[string]string{"HOME": home}[k], k == "HOME" }
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	planID, _, err := tm.SessionOf("DEMO-1", controller.ModePlan)
	if err != nil {
		t.Fatal(err)
	}
	claudeKind, _ := kinds.For(tm.Agent)
	write(claudeKind.SessionFile(home, tm.Worktrees.Path("DEMO-1"), planID),
		`{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","usage":{"input_tokens":100,"output_tokens":10}}}`+"\n"+
			`{"type":"cost-state","totalCostUSD":0.25}`+"\n")
	reviewID, _, err := tm.SessionOf("DEMO-1", controller.ModeReview)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tm.StateDir, "agents", claudecode.SessionID(tm.ID, "DEMO-1", "review").String())
	write(filepath.Join(codex.Home(dir, reviewID), "sessions", "2026", "11", "29", "rollout-x.jsonl"),
		`{"type":"turn_context","payload":{"model":"my-model-2"}}`+"\n"+
			`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"output_tokens":500}}}}`+"\n")
	s, err := tm.Spend(t.Context(), "DEMO-1")
	if err != nil {
		t.Fatal(err)
	}
	want := controller.Spend{Tokens: 110 + 1500, USD: 0.25 + 1 + 1, Phases: []controller.PhaseSpend{
		{Mode: controller.ModePlan, Tokens: 110, USD: 0.25}, {Mode: controller.ModeReview, Tokens: 1500, USD: 2}}}
	if diff := cmp.Diff(want, s, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Spend (-want +got):\n%s", diff)
	}
	// A model without a price: its tokens count, its dollars are unknown.
	write(filepath.Join(codex.Home(dir, reviewID), "sessions", "2026", "11", "29", "rollout-x.jsonl"),
		`{"type":"turn_context","payload":{"model":"nobody-prices-me"}}`+"\n"+
			`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"output_tokens":501}}}}`+"\n")
	if s, err = tm.Spend(t.Context(), "DEMO-1"); err != nil || !s.Unpriced || s.Tokens != 1611 || s.USD != 0.25 {
		t.Errorf("Spend with an unpriced model = %+v, %v; want 1,611 tokens, $0.25, unpriced", s, err)
	}
	// Collect reads it into the state, with the team's budget.
	src := tm.Sources(nil)
	st, _, err := controller.Collect(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	if st.Budget == nil || st.Budget.IssueTokens != 1000 {
		t.Fatalf("Collect's budget = %+v; want the team's", st.Budget)
	}
	if _, err := os.Stat(filepath.Join(tm.StateDir, "budget.json")); err != nil {
		t.Errorf("the day ledger was not written: %v", err)
	}
}
