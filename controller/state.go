package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/legion-dev/legion/activation/api"

	"github.com/legion-dev/legion/controller/workspace"
)

// ReviewSource is where review outcomes live when they are not labels on
// the issue: pull requests on GitHub (package controller/github).
type ReviewSource interface {
	// Reviews returns the outcome per issue identifier in one batched
	// query; issues without a pull request or outcome label may be missing.
	Reviews(ctx context.Context, issues []string) (map[string]Review, error)
	// AddLabel puts an outcome label on the issue's pull request (the
	// reviewer's `legion issue label`); RemoveLabel removes one (no-op
	// when absent).
	AddLabel(ctx context.Context, issue, label string) error
	RemoveLabel(ctx context.Context, issue, label string) error
}

// BoardTracker is a Tracker whose one query per tick reads the review
// outcomes of a review source too (GitHub: each issue's linked pull
// request): when that is the team's, Collect sends no review query.
type BoardTracker interface {
	Tracker
	// Board returns what Issues returns and the outcome per issue (a
	// non-nil map) as BoardReviews would report them.
	Board(ctx context.Context) ([]TrackedIssue, map[string]Review, error)
	BoardReviews() ReviewSource
}

// Session is a live agent session of the team, as the helper reports it.
type Session struct {
	Name    string `json:"name"`
	Unit    string `json:"unit"`
	Issue   string `json:"issue"`
	Mode    Mode   `json:"mode"`
	Session string `json:"session"` // the agent's session UUID
	// State is the helper's state of the session; exited, failed and
	// lost are not live.
	State    SessionState `json:"state"`
	Question string       `json:"question,omitempty"` // pending AskUserQuestion, if waiting_input
	Cause    string       `json:"cause,omitempty"`    // with failed: why systemd gave up on it
	Agent    *api.Agent   `json:"agent,omitempty"`    // what the agent does, from its hooks
	// Completed is when the session's last run exited with status 0;
	// zero otherwise (running, failed, or exited otherwise).
	Completed time.Time `json:"completed,omitzero"`
}

// SessionState is a session's state as the helper reports it.
type SessionState string

// States of a session (the helper's own, see activation).
const (
	SessionStarting     SessionState = "starting"
	SessionRunning      SessionState = "running"
	SessionWaitingInput SessionState = "waiting_input" // the agent asks a question
	SessionStale        SessionState = "stale"
	SessionExited       SessionState = "exited"
	SessionFailed       SessionState = "failed" // systemd gave up: start limit, or failed for good
	SessionLost         SessionState = "lost"   // a reboot cut a `legion spawn` session (never a team's worker)
)

// Live reports whether the session still occupies its issue.
func (s Session) Live() bool {
	return s.State != SessionExited && s.State != SessionFailed && s.State != SessionLost && s.State != ""
}

// SessionSource lists the team's sessions in one call.
type SessionSource interface {
	Sessions(ctx context.Context) ([]Session, error)
}

// WorktreeLister lists the team's issue worktrees (package
// controller/workspace). A broken worktree is listed with its Problem;
// an error fails the whole tick, so it is only for a listing that could
// not be made at all.
type WorktreeLister interface {
	List(ctx context.Context) ([]workspace.Worktree, error)
}

// Sources are where Collect reads from, each once.
type Sources struct {
	Tracker Tracker
	// Reviews is nil for the local review source: the outcome is a label on
	// the issue itself (worker-approved / worker-changes-requested).
	Reviews   ReviewSource
	Sessions  SessionSource
	Worktrees WorktreeLister // nil: worktrees are not reported
	WIPLimit  int
	// IdleGrace is how long an agent may sit at its prompt without
	// worker-done before it is escalated (State.IdleGrace).
	IdleGrace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Room is where the room for more agents is read (package
	// controller/capacity); nil: no capacity gate beyond the WIP limit.
	Room RoomSource
	// Budget is the team's budget (its limits; Today is filled in from
	// Ledger); nil for none, and then Spend is not read.
	Budget *SpendBudget
	Spend  SpendSource
	Ledger *Ledger
	// KindOf is the agent kind of each mode; Limits keeps the kinds'
	// pauses at their API's limits (nil: an agent stopped at a limit is
	// escalated at once); LimitWindows are the kinds' longest limits.
	KindOf       map[Mode]string
	Limits       *Limits
	LimitWindows map[string]time.Duration
	// Dispatched keeps each dispatch until its tracker changes are made
	// (nil: not kept).
	Dispatched *Dispatched
}

// IssueState is one issue in `legion state`: what was collected and what
// Decide suggests.
type IssueState struct {
	Issue
	Session  string `json:"session,omitempty"` // the live session's name
	Decision `json:"decision"`
}

// Report is the output of `legion state`.
type Report struct {
	WIPLimit int          `json:"wip_limit"`
	Room     Room         `json:"room"`
	Budget   *SpendBudget `json:"budget,omitempty"`
	// Pauses are the agent kinds waiting at their API's limits.
	Pauses        map[string]*Pause `json:"pauses,omitempty"`
	LimitsProblem string            `json:"limits_problem,omitempty"`
	Issues        []IssueState      `json:"issues"`
}

// Collect reads every source once (one tracker query, one review query, one
// session listing) and joins them into the State that Decide reads.
func Collect(ctx context.Context, src Sources) (State, []TrackedIssue, error) {
	var tracked []TrackedIssue
	var outcomes map[string]Review
	var err error
	board, isBoard := src.Tracker.(BoardTracker)
	if isBoard && src.Reviews != nil && src.Reviews == board.BoardReviews() {
		tracked, outcomes, err = board.Board(ctx)
	} else {
		tracked, err = src.Tracker.Issues(ctx)
	}
	if err != nil {
		return State{}, nil, fmt.Errorf("collect issues: %w", err)
	}
	var sessions []Session
	if src.Sessions != nil {
		if sessions, err = src.Sessions.Sessions(ctx); err != nil {
			return State{}, nil, fmt.Errorf("collect sessions: %w", err)
		}
	}
	switch {
	case outcomes != nil: // read with the issues
	case src.Reviews == nil:
		outcomes = reviewsFromLabels(tracked)
	default:
		ids := make([]string, 0, len(tracked))
		for _, t := range tracked {
			if t.Status != StatusDone {
				ids = append(ids, t.ID)
			}
		}
		if outcomes, err = src.Reviews.Reviews(ctx, ids); err != nil {
			return State{}, nil, fmt.Errorf("collect review outcomes: %w", err)
		}
	}

	trees := map[string]*workspace.Worktree{}
	if src.Worktrees != nil {
		list, err := src.Worktrees.List(ctx)
		if err != nil {
			return State{}, nil, fmt.Errorf("collect worktrees: %w", err)
		}
		for i := range list {
			trees[list[i].Issue] = &list[i]
		}
	}
	live := map[string]Session{}
	failed := map[string][]FailedWorker{}
	for _, s := range sessions {
		switch {
		case s.Issue == "":
		case s.Live():
			live[s.Issue] = s
		case s.State == SessionFailed:
			failed[s.Issue] = append(failed[s.Issue], FailedWorker{Mode: s.Mode, Session: s.Name, Unit: s.Unit, Cause: s.Cause})
		}
	}
	var room Room
	if src.Room != nil {
		if room, err = src.Room.Room(ctx); err != nil {
			return State{}, nil, fmt.Errorf("collect the room for agents: %w", err)
		}
	}
	now := time.Now
	if src.Now != nil {
		now = src.Now
	}
	st := State{WIPLimit: src.WIPLimit, LabelReviews: src.Reviews == nil, Issues: make([]Issue, 0, len(tracked)),
		Now: now(), IdleGrace: src.IdleGrace, Room: room}
	var records map[string]Dispatch
	if src.Dispatched != nil {
		// Unreadable records are quarantined: their issues are decided
		// from the tracker, as before records were kept.
		records, _ = src.Dispatched.All(now())
	}
	completed := map[string]map[Mode]time.Time{}
	for _, s := range sessions {
		if s.Issue == "" || s.Completed.IsZero() || s.State != SessionExited {
			continue
		}
		if completed[s.Issue] == nil {
			completed[s.Issue] = map[Mode]time.Time{}
		}
		if s.Completed.After(completed[s.Issue][s.Mode]) {
			completed[s.Issue][s.Mode] = s.Completed
		}
	}
	for _, t := range tracked {
		is := Issue{
			ID: t.ID, Title: t.Title, Status: t.Status, Labels: slices.Clone(t.Labels),
			Review: outcomes[t.ID], Feedback: t.latestHuman().Text, FeedbackBy: t.latestHuman().Author,
			Worktree: trees[t.ID], Failed: failed[t.ID],
		}
		if is.Labels == nil {
			is.Labels = []string{}
		}
		if r, ok := records[t.ID]; ok {
			is.Dispatched = &r
		}
		is.Completed = completed[t.ID]
		if s, ok := live[t.ID]; ok {
			is.Worker = &Worker{Mode: s.Mode, Session: s.Name, Blocked: s.State == SessionWaitingInput, Question: s.Question, Agent: s.Agent}
		}
		st.Issues = append(st.Issues, is)
		delete(live, t.ID)
	}
	// A live session whose issue the tracker no longer lists (a tracker may
	// leave out closed issues: Linear's Done and Canceled) is decided as a
	// Done issue's, or the agent of a finished phase would idle at its
	// prompt for ever.
	for _, s := range sessions {
		if l, ok := live[s.Issue]; ok && l.Name == s.Name {
			st.Issues = append(st.Issues, Issue{ID: s.Issue, Title: "(not an open issue of the tracker)", Status: StatusDone, Labels: []string{},
				Worker: &Worker{Mode: s.Mode, Session: s.Name, Blocked: s.State == SessionWaitingInput, Question: s.Question, Agent: s.Agent}})
		}
	}
	if src.Budget != nil && src.Spend != nil {
		st.Budget = collectSpend(ctx, src, &st)
	}
	st.KindOf, st.LimitWindows = src.KindOf, src.LimitWindows
	if src.Limits != nil {
		st.Pauses, st.LimitsProblem = src.Limits.Observe(&st, src.LimitWindows)
	}
	return st, tracked, nil
}

// collectSpend reads what each issue's agents spent (an issue whose spend
// cannot be read says why and is not held to its budget) and the team's
// spend today, and returns the team's budget with it.
func collectSpend(ctx context.Context, src Sources, st *State) *SpendBudget {
	b := *src.Budget
	spends := make(map[string]Spend, len(st.Issues))
	for i := range st.Issues {
		is := &st.Issues[i]
		s, err := src.Spend.Spend(ctx, is.ID)
		if err != nil {
			is.SpendError = err.Error()
			continue
		}
		is.Spend = &s
		spends[is.ID] = s
	}
	if src.Ledger != nil {
		b.Today, b.Problem = src.Ledger.Observe(st.Now, spends)
	}
	return &b
}

// reviewsFromLabels is the local review source.
func reviewsFromLabels(issues []TrackedIssue) map[string]Review {
	out := map[string]Review{}
	for _, t := range issues {
		switch {
		case slices.Contains(t.Labels, LabelChangesRequest):
			out[t.ID] = ReviewChangesRequested
		case slices.Contains(t.Labels, LabelApproved):
			out[t.ID] = ReviewApproved
		}
	}
	return out
}

// Suggest runs Decide on st and pairs each issue with its decision.
func Suggest(st State) Report {
	ds := Decide(st)
	r := Report{WIPLimit: st.WIPLimit, Room: st.Room, Budget: st.Budget, Pauses: st.Pauses, LimitsProblem: st.LimitsProblem, Issues: make([]IssueState, len(st.Issues))}
	for i, is := range st.Issues {
		r.Issues[i] = IssueState{Issue: is, Decision: ds[i]}
		if is.Worker != nil {
			r.Issues[i].Session = is.Worker.Session
		}
	}
	return r
}
