package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
)

// TestPrintReportBudget: with a budget, legion state says the team's
// spend today against its daily limit, the per-issue limit, each issue's
// spend (or why it is unknown) and a ledger problem; without one, none of
// it.
func TestPrintReportBudget(t *testing.T) {
	rep := controller.Report{
		Budget: &controller.SpendBudget{IssueTokens: 2_000_000, DayUSD: 25, Today: controller.Spend{Tokens: 1234, USD: 1.5}, Problem: "budget ledger x: disk full"},
		Issues: []controller.IssueState{
			{Issue: controller.Issue{ID: "A-1", Status: controller.StatusTodo, Spend: &controller.Spend{Tokens: 1_500_000, USD: 3.25}}},
			{Issue: controller.Issue{ID: "A-2", Status: controller.StatusTodo, SpendError: "usage of /f: permission denied"}},
			{Issue: controller.Issue{ID: "A-3", Status: controller.StatusTodo, Spend: &controller.Spend{}}},
		},
	}
	var b strings.Builder
	if err := printReport(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Budget: today 1,234 tokens, $1.50 of $25.00; per issue 2,000,000 tokens\n",
		"  A-1: 1,500,000 tokens, $3.25\n",
		"  A-2: spend unknown: usage of /f: permission denied\n",
		"  budget ledger x: disk full\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("legion state:\n%s\nwant %q", b.String(), want)
		}
	}
	if strings.Contains(b.String(), "  A-3:") {
		t.Errorf("legion state lists A-3, which spent nothing:\n%s", b.String())
	}
	rep.Budget = nil
	b.Reset()
	if err := printReport(&b, rep); err != nil || strings.Contains(b.String(), "Budget") {
		t.Errorf("legion state without a budget:\n%s (%v); want no budget lines", b.String(), err)
	}
}

// TestPrintPauses: legion limits lists each paused kind with until when
// and from what; legion state says which kinds are paused.
func TestPrintPauses(t *testing.T) {
	now := time.Now()
	pauses := map[string]*controller.Pause{
		"claude": {Until: now.Add(time.Hour), Hits: []time.Time{now, now}, Waited: 3 * time.Minute},
		"codex":  {Until: now.Add(-time.Minute), ResetKnown: true, Hits: []time.Time{now}},
	}
	var b strings.Builder
	if err := printPauses(&b, pauses, now); err != nil {
		t.Fatal(err)
	}
	until := now.Add(time.Hour).Local().Format(time.DateTime)
	for _, want := range []string{"claude  " + until + "  backoff", "codex   - (not paused)       reset time"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("legion limits:\n%s\nwant %q", b.String(), want)
		}
	}
	b.Reset()
	if err := printReport(&b, controller.Report{Pauses: pauses}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "claude paused until "+until) || strings.Contains(b.String(), "codex paused") {
		t.Errorf("legion state:\n%s\nwant claude paused, codex not", b.String())
	}
}

// TestPrintReportRoom: issues whose start waits for room are listed after
// the table as not stalled; with none waiting the line is left out.
func TestPrintReportRoom(t *testing.T) {
	wait := &controller.RoomWait{Gate: controller.GateTeamSessions, Text: "session_limit 1 reached (1 of the team's agents live)"}
	rep := controller.Report{Issues: []controller.IssueState{
		{Issue: controller.Issue{ID: "A-1", Status: controller.StatusTodo}, Decision: controller.Decision{Action: controller.ActionDispatchPlanner}},
		{Issue: controller.Issue{ID: "A-2", Status: controller.StatusTodo}, Decision: controller.Decision{Action: controller.ActionSkip, Room: wait,
			Reason: "waiting for room: " + wait.Text + "; would dispatch_planner"}},
	}}
	var b strings.Builder
	if err := printReport(&b, rep); err != nil {
		t.Fatal(err)
	}
	if want := "\nwaiting for room (not stalled; dispatched once there is room): A-2\n"; !strings.Contains(b.String(), want) {
		t.Errorf("legion state:\n%s\nwant %q", b.String(), want)
	}
	rep.Issues = rep.Issues[:1]
	b.Reset()
	if err := printReport(&b, rep); err != nil || strings.Contains(b.String(), "waiting for room") {
		t.Errorf("legion state with nothing waiting:\n%s (%v); want no room line", b.String(), err)
	}
}

// TestLimitsFindsTheConfig: `legion limits show TEAM` finds legion.toml as
// every command does ($LEGION_CONFIG here), and says when no kind is
// paused.
func TestLimitsFindsTheConfig(t *testing.T) {
	dir := sandboxXDG(t)
	path := filepath.Join(dir, "legion.toml")
	if err := os.WriteFile(path, []byte("[teams.demo]\nid = \"6f1c2b9e-8d4a-4c3b-9e2f-1a2b3c4d5e6f\"\nworkspace = \""+dir+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LEGION_CONFIG", path)
	out, _, err := legion(t, "limits", "show", "demo")
	if err != nil || !strings.Contains(out, "no agent kind waits at its API's limit") {
		t.Errorf("legion limits show demo = %q, %v; want no pause", out, err)
	}
}
