package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/activation/api"
)

func agentWorker(mode Mode, st api.AgentState) *Worker {
	return &Worker{Mode: mode, Session: "s-" + string(mode), Agent: &api.Agent{State: st}}
}

// TestDecideIssueBudget: an issue over its budget starts no agent and is
// escalated once, with the spend per phase; its working agent is left to
// end its turn, then ended with the escalation; an agent waiting on a
// person is ended at once; a person's answer is not relayed until the
// label budget-approved, which lets it go on; under the budget nothing
// changes.
func TestDecideIssueBudget(t *testing.T) {
	spend := &Spend{Tokens: 1500, USD: 0.75, Phases: []PhaseSpend{{Mode: ModePlan, Tokens: 500, USD: 0.25}, {Mode: ModeImplement, Tokens: 1000, USD: 0.5}}}
	b := &SpendBudget{IssueTokens: 1000}
	for _, c := range []struct {
		name   string
		is     Issue
		want   Action
		ending bool // the decision ends the live worker
	}{
		{"todo over budget", Issue{ID: "A-1", Status: StatusTodo, Spend: spend}, ActionEscalateBudget, false},
		{"working agent finishes its turn", Issue{ID: "A-1", Status: StatusInProgress, Spend: spend, Worker: agentWorker(ModeImplement, api.AgentWorking)}, ActionSkip, false},
		{"idle agent ended", Issue{ID: "A-1", Status: StatusInProgress, Spend: spend, Worker: agentWorker(ModeImplement, api.AgentIdle)}, ActionEscalateBudget, true},
		{"waiting agent ended", Issue{ID: "A-1", Status: StatusInProgress, Spend: spend, Worker: agentWorker(ModeImplement, api.AgentWaitingPermission)}, ActionEscalateBudget, true},
		{"escalated: waits", Issue{ID: "A-1", Status: StatusInProgress, Spend: spend, Labels: []string{LabelInputNeeded}}, ActionSkip, false},
		{"answer not relayed", Issue{ID: "A-1", Status: StatusInProgress, Spend: spend, Labels: []string{LabelFeedbackGiven}, Feedback: "go on"}, ActionSkip, false},
		{"approved", Issue{ID: "A-1", Status: StatusTodo, Spend: spend, Labels: []string{LabelBudgetApproved}}, ActionDispatchPlanner, false},
		{"under budget", Issue{ID: "A-1", Status: StatusTodo, Spend: &Spend{Tokens: 999}}, ActionDispatchPlanner, false},
		{"spend unknown", Issue{ID: "A-1", Status: StatusTodo}, ActionDispatchPlanner, false},
		{"done", Issue{ID: "A-1", Status: StatusDone, Spend: spend}, ActionNone, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(State{Budget: b, Issues: []Issue{c.is}})[0]
			if d.Action != c.want {
				t.Fatalf("Decide = %s (%s); want %s", d.Action, d.Reason, c.want)
			}
			if d.Action == ActionEscalateBudget {
				if !strings.Contains(d.Comment, "1,500 tokens of its budget of 1,000") || !strings.Contains(d.Comment, "- plan: 500 tokens, $0.25") ||
					!strings.Contains(d.Comment, "- implement: 1,000 tokens, $0.50") || !strings.Contains(d.Comment, LabelBudgetApproved) {
					t.Errorf("escalation comment:\n%s\nwant the spend against the budget, per phase, and how to go on", d.Comment)
				}
				if diff := cmp.Diff([]string{LabelInputNeeded}, d.AddLabels); diff != "" {
					t.Errorf("labels added (-want +got):\n%s", diff)
				}
			}
			if got := d.Action == ActionEscalateBudget && c.is.Worker != nil; got != c.ending {
				t.Errorf("ends the worker: %v; want %v", got, c.ending)
			}
		})
	}
	// Dollars count as tokens do.
	d := Decide(State{Budget: &SpendBudget{IssueUSD: 0.5}, Issues: []Issue{{ID: "A-1", Status: StatusTodo, Spend: spend}}})[0]
	if d.Action != ActionEscalateBudget || !strings.Contains(d.Reason, "$0.75 of its budget of $0.50") {
		t.Errorf("Decide over the dollar budget = %s (%s); want escalate_budget with the dollars", d.Action, d.Reason)
	}
}

// TestDecideDayBudget: a team over its daily budget starts no agent (the
// reason says why and when it goes on) but leaves live ones and
// escalations alone.
func TestDecideDayBudget(t *testing.T) {
	s := State{Budget: &SpendBudget{DayUSD: 10, Today: Spend{Tokens: 5, USD: 10}}, Issues: []Issue{
		{ID: "A-1", Status: StatusTodo},
		{ID: "A-2", Status: StatusInProgress, Worker: agentWorker(ModeImplement, api.AgentWaitingPermission)},
		{ID: "A-3", Status: StatusInProgress, Labels: []string{LabelWorkerDone}},
	}}
	ds := Decide(s)
	if got := actions(ds); !cmp.Equal(got, []Action{ActionSkip, ActionEscalatePermission, ActionSkip}) {
		t.Errorf("Decide over the daily budget = %v; want no dispatch, the permission escalated", got)
	}
	if !strings.Contains(ds[0].Reason, "daily budget reached: the team's agents spent $10.00 today") || !strings.Contains(ds[0].Reason, "tomorrow") {
		t.Errorf("reason %q; want the day's spend and when it goes on", ds[0].Reason)
	}
	s.Budget.Today.USD = 9.99
	if got := Decide(s)[0].Action; got != ActionDispatchPlanner {
		t.Errorf("Decide under the daily budget = %s; want dispatch_planner", got)
	}
}

// TestLedger: the team's spend today is what its issues spent since the
// day began (an issue first seen today counts fully, one seen before
// counts from then), survives a new Ledger on the same file, starts again
// at midnight, and a corrupt file is quarantined, not lost.
func TestLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "budget.json")
	day1 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.Local)
	l := &Ledger{Path: path}
	// The first observation: what was spent before counts as before today.
	if got, p := l.Observe(day1, map[string]Spend{"A-1": {Tokens: 100, USD: 1}}); got.Tokens != 0 || p != "" {
		t.Errorf("first Observe = %+v, %q; want nothing today", got, p)
	}
	got, _ := l.Observe(day1.Add(time.Hour), map[string]Spend{"A-1": {Tokens: 150, USD: 1.5}, "A-2": {Tokens: 10, USD: 0.1}})
	if got.Tokens != 60 || got.USD < 0.59 || got.USD > 0.61 {
		t.Errorf("Observe = %+v; want 50 of A-1 and A-2's 10 tokens, $0.60", got)
	}
	// A restart, and A-2 no longer listed: still counted.
	l = &Ledger{Path: path}
	if got, _ = l.Observe(day1.Add(2*time.Hour), map[string]Spend{"A-1": {Tokens: 160, USD: 1.6}}); got.Tokens != 70 {
		t.Errorf("Observe after a restart = %+v; want 70 tokens", got)
	}
	// The next day starts from yesterday's last.
	if got, _ = l.Observe(day1.Add(24*time.Hour), map[string]Spend{"A-1": {Tokens: 165, USD: 1.65}}); got.Tokens != 5 {
		t.Errorf("Observe the next day = %+v; want 5 tokens", got)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	l = &Ledger{Path: path}
	got, p := l.Observe(day1.Add(25*time.Hour), map[string]Spend{"A-1": {Tokens: 170}})
	if got.Tokens != 0 || !strings.Contains(p, "not Legion's JSON: moved to") {
		t.Errorf("Observe with a corrupt ledger = %+v, %q; want a fresh day and the quarantine named", got, p)
	}
	if m, _ := filepath.Glob(path + "*corrupt*"); len(m) != 1 {
		if m, _ = filepath.Glob(filepath.Join(filepath.Dir(path), "*")); len(m) < 2 {
			t.Errorf("files after the quarantine: %q; want the corrupt ledger kept beside the new one", m)
		}
	}
}
