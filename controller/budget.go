package controller

// Budgets: what an issue's agents may spend, and a team's in a day
// (legion.toml's budget.*). The spend comes from the agents' own usage
// records (SpendSource); Decide stops work that crossed a limit.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/atomicfile"
)

// LabelBudgetApproved on an issue lets its agents go on past the issue's
// budget: a person saw the spend and agreed to more.
const LabelBudgetApproved = "budget-approved"

// Spend is what agents used: tokens (input, output, cache reads and
// writes, as they record them) and cost in US dollars (what the agent
// reported, else its tokens at the team's prices; Unpriced says some
// tokens had neither, so USD is a floor).
type Spend struct {
	Tokens   int64   `json:"tokens"`
	USD      float64 `json:"usd"`
	Unpriced bool    `json:"unpriced,omitempty"`
	// Phases are an issue's spend by phase (a retro's is in its
	// implementer's conversation), for the escalation and the board.
	Phases []PhaseSpend `json:"phases,omitempty"`
}

// PhaseSpend is one phase's part of an issue's Spend.
type PhaseSpend struct {
	Mode   Mode    `json:"mode"`
	Tokens int64   `json:"tokens"`
	USD    float64 `json:"usd"`
}

// String is the spend as people read it: "1,234,567 tokens, $3.21".
func (s Spend) String() string {
	out := FormatTokens(s.Tokens)
	if s.USD > 0 || !s.Unpriced {
		out += fmt.Sprintf(", $%.2f", s.USD)
		if s.Unpriced {
			out += " or more (some tokens have no price)"
		}
	}
	return out
}

// FormatTokens is n tokens as people read them: "1,234,567 tokens".
func FormatTokens(n int64) string { return groupDigits(n) + " tokens" }

// groupDigits writes n with thousands separators.
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// SpendSource reads what an issue's agents spent so far.
type SpendSource interface {
	Spend(ctx context.Context, issue string) (Spend, error)
}

// SpendBudget is a team's limits (0: none) and what its agents spent today.
type SpendBudget struct {
	IssueTokens int64   `json:"issue_tokens,omitempty"`
	IssueUSD    float64 `json:"issue_usd,omitempty"`
	DayTokens   int64   `json:"day_tokens,omitempty"`
	DayUSD      float64 `json:"day_usd,omitempty"`
	// Today is what the team's agents spent since local midnight (the
	// Ledger's day); Problem says what went wrong with the ledger's file.
	Today   Spend  `json:"today"`
	Problem string `json:"problem,omitempty"`
}

// issueOver says why s crosses the issue limits, "" when it does not.
func (b *SpendBudget) issueOver(s *Spend) string {
	switch {
	case b == nil || s == nil:
		return ""
	case b.IssueTokens > 0 && s.Tokens >= b.IssueTokens:
		return fmt.Sprintf("%s tokens of its budget of %s (budget.issue_tokens)", groupDigits(s.Tokens), groupDigits(b.IssueTokens))
	case b.IssueUSD > 0 && s.USD >= b.IssueUSD:
		return fmt.Sprintf("$%.2f of its budget of $%.2f (budget.issue_usd)", s.USD, b.IssueUSD)
	}
	return ""
}

// dayOver says why the team's spend today crosses its daily limits, ""
// when it does not.
func (b *SpendBudget) dayOver() string {
	switch {
	case b == nil:
		return ""
	case b.DayTokens > 0 && b.Today.Tokens >= b.DayTokens:
		return fmt.Sprintf("the team's agents used %s tokens today, its daily budget is %s (budget.day_tokens)", groupDigits(b.Today.Tokens), groupDigits(b.DayTokens))
	case b.DayUSD > 0 && b.Today.USD >= b.DayUSD:
		return fmt.Sprintf("the team's agents spent $%.2f today, its daily budget is $%.2f (budget.day_usd)", b.Today.USD, b.DayUSD)
	}
	return ""
}

// applyBudget turns d, decided for is without budgets, into what the
// budgets allow: a team over its daily budget starts no agent; an issue
// over its own budget (and not budget-approved) starts none either, and
// its live agent is ended once its turn is over, the issue escalated once
// with the spend per phase.
func applyBudget(d Decision, is Issue, s State) Decision {
	if is.Status == StatusDone || s.Budget == nil {
		return d
	}
	if why := s.Budget.issueOver(is.Spend); why != "" && !is.HasLabel(LabelBudgetApproved) {
		w := is.Worker
		switch {
		case is.HasLabel(LabelInputNeeded) || is.HasLabel(LabelFeedbackGiven):
			// Escalated already (for this or another reason): the answer
			// a person gives is not relayed to an agent over its budget.
			if d.Action == ActionRelayFeedback || startsWorker(d.Action) {
				return Decision{Issue: is.ID, Action: ActionSkip,
					Reason: "over budget (" + why + "): waiting for the label " + LabelBudgetApproved + " or a higher budget"}
			}
			return d
		case w != nil && w.Agent != nil && !w.Agent.State.WaitsOnHuman() && w.Agent.State != api.AgentIdle && w.Agent.State != api.AgentEnded:
			return Decision{Issue: is.ID, Action: ActionSkip,
				Reason: "over budget (" + why + "): its " + string(w.Mode) + " agent is ended when its turn ends"}
		case w != nil || startsWorker(d.Action) || d.Action == ActionSkip:
			out := Decision{Issue: is.ID, Action: ActionEscalateBudget, Reason: "over budget: " + why,
				Comment:   budgetComment(is, why),
				AddLabels: []string{LabelInputNeeded}}
			if w != nil {
				out.Mode = w.Mode
			}
			return out
		}
		return d
	}
	if why := s.Budget.dayOver(); why != "" && startsWorker(d.Action) {
		return Decision{Issue: is.ID, Action: ActionSkip,
			Reason: fmt.Sprintf("daily budget reached: %s; would %s tomorrow, or when budget.day_* is raised", why, d.Action)}
	}
	return d
}

// budgetComment is the escalation of an issue over its budget.
func budgetComment(is Issue, why string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "This issue's agents reached %s: Legion stopped them", why)
	if is.Worker != nil {
		fmt.Fprintf(&b, " (the %s agent is ended, its conversation kept)", is.Worker.Mode)
	}
	b.WriteString(".\n\nSpend so far, " + is.Spend.String() + ":\n\n")
	for _, p := range is.Spend.Phases {
		fmt.Fprintf(&b, "- %s: %s\n", p.Mode, Spend{Tokens: p.Tokens, USD: p.USD, Unpriced: is.Spend.Unpriced}.String())
	}
	b.WriteString("\nTo let it go on, add the label " + LabelBudgetApproved + " (or raise budget.issue_tokens / budget.issue_usd in legion.toml), " +
		"then remove " + LabelInputNeeded + ".")
	return b.String()
}

// Ledger keeps what each issue's agents had spent at the start of the
// day, so the team's spend today survives restarts of the controller and
// issues leaving the tracker's list. It is a small JSON file in the
// team's state directory; a corrupt one is quarantined and the day starts
// again from what the issues have spent now.
type Ledger struct {
	Path string

	mu     sync.Mutex
	loaded bool
	day    ledgerFile
}

type ledgerFile struct {
	Day   string           `json:"day"`   // local date, 2006-01-02
	Start map[string]Spend `json:"start"` // issue → spend at the day's start (or when first seen, for an issue that spent nothing before today)
	Last  map[string]Spend `json:"last"`  // issue → spend when last seen
}

// Today reads the ledger at path, as the controller last wrote it, for
// another process (the dashboard): the team's spend today (local time of
// now), zero when the ledger is of another day or does not exist.
func Today(path string, now time.Time) (Spend, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Spend{}, nil
	}
	if err != nil {
		return Spend{}, err
	}
	var f ledgerFile
	if err := json.Unmarshal(data, &f); err != nil {
		return Spend{}, fmt.Errorf("budget ledger %s: %w", path, err)
	}
	if f.Day != now.Format(time.DateOnly) {
		return Spend{}, nil
	}
	return f.today(), nil
}

// today is the spend since the day's start.
func (f ledgerFile) today() Spend {
	var today Spend
	for _, id := range slices.Sorted(maps.Keys(f.Last)) {
		last, start := f.Last[id], f.Start[id]
		today.Tokens += max(last.Tokens-start.Tokens, 0)
		today.USD += max(last.USD-start.USD, 0)
		today.Unpriced = today.Unpriced || last.Unpriced
	}
	return today
}

// Observe records the issues' spend now and returns the team's spend
// today (local time of now): for every issue ever seen today, its last
// spend less its spend at the start of the day. problem, when not empty,
// says what went wrong with the file (the spend is still right for this
// process).
func (l *Ledger) Observe(now time.Time, spends map[string]Spend) (today Spend, problem string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var problems []string
	if !l.loaded {
		l.loaded = true
		switch data, err := os.ReadFile(l.Path); {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			problems = append(problems, fmt.Sprintf("budget ledger %s: %v", l.Path, err))
		case json.Unmarshal(data, &l.day) != nil || l.day.Day == "":
			l.day = ledgerFile{}
			q, qerr := atomicfile.Quarantine(l.Path, now)
			problems = append(problems, fmt.Sprintf("budget ledger %s is not Legion's JSON: moved to %s (%v); today's spend starts again from now", l.Path, q, qerr))
		}
	}
	date := now.Format(time.DateOnly)
	if l.day.Day != date {
		start := l.day.Last
		if l.day.Day == "" {
			// No ledger yet: what the issues spent before counts as before today.
			start = spends
		}
		l.day = ledgerFile{Day: date, Start: maps.Clone(start), Last: maps.Clone(l.day.Last)}
	}
	if l.day.Start == nil {
		l.day.Start = map[string]Spend{}
	}
	if l.day.Last == nil {
		l.day.Last = map[string]Spend{}
	}
	for id, s := range spends {
		s.Phases = nil
		l.day.Last[id] = s
	}
	today = l.day.today()
	data, err := json.Marshal(l.day)
	if err == nil {
		err = atomicfile.WritePrivate(l.Path, append(data, '\n'))
	}
	if err != nil {
		problems = append(problems, fmt.Sprintf("budget ledger %s: %v", l.Path, err))
	}
	return today, strings.Join(problems, "; ")
}
