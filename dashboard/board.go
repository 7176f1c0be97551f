package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/service"
	"github.com/legion-dev/legion/controller/team"
)

// Phases are the board's columns, in order.
var Phases = []controller.Status{
	controller.StatusTodo, controller.StatusInProgress, controller.StatusNeedsReview,
	controller.StatusRetro, controller.StatusDone,
}

// Board is GET /api/board: one team's issues by phase, each with its live
// session.
type Board struct {
	Team    string   `json:"team"`
	Columns []Column `json:"columns"`
	// Other holds issues in a status outside the five phases (Backlog,
	// Canceled, ...).
	Other []BoardIssue `json:"other,omitempty"`
	// Refreshed is when the tracker was last read; Error is why that read
	// failed (the board then shows the last good one).
	Refreshed time.Time `json:"refreshed"`
	Error     string    `json:"error,omitempty"`
	// Live says the sessions are the helper's live view (false until the
	// session stream's first snapshot, or while the helper is unreachable).
	Live bool `json:"live"`
	// Budget is the team's budget (budget.* of legion.toml) with its
	// spend today, as the controller last recorded it; nil for none.
	Budget *controller.SpendBudget `json:"budget,omitempty"`
}

// Column is one phase of a Board.
type Column struct {
	Status controller.Status `json:"status"`
	Issues []BoardIssue      `json:"issues"`
}

// BoardIssue is one issue on the board.
type BoardIssue struct {
	ID     string            `json:"id"`
	Title  string            `json:"title"`
	Status controller.Status `json:"status"`
	Labels []string          `json:"labels"`
	// Session is the issue's live session (State not ended), else its
	// most recent one; nil when it has none.
	Session *api.Session `json:"session,omitempty"`
	// Failed are the issue's sessions that systemd gave up on.
	Failed []controller.FailedWorker `json:"failed,omitempty"`
	// Action and Reason are what the controller would do next (as
	// `legion state` suggests).
	Action controller.Action `json:"action"`
	Reason string            `json:"reason,omitempty"`
	// Room says why its next agent waits for room (a session limit,
	// memory); nil when it does not wait. Such an issue is not stalled.
	Room *controller.RoomWait `json:"room,omitempty"`
	// Usage is the tokens and cost of the issue's agents so far, from
	// their session files (team.IssueUsage); nil when none could be read.
	Usage *agent.Usage `json:"usage,omitempty"`
}

// teamState is what the server keeps of one team: its tracker, opened
// once, and the last report read from it.
type teamState struct {
	t         *team.Team
	report    controller.Report
	digest    string // of report, to tell a change
	refreshed time.Time
	err       error
}

// boards holds every team's state.
type boards struct {
	mu    sync.Mutex // held across a refresh: one at a time
	cfg   *config.Config
	teams map[string]*teamState
}

// loadConfig reads legion.toml again and opens the trackers of teams not
// yet open (a team whose id changed is opened anew).
func (s *Server) loadConfig() (*config.Config, error) {
	cfg, err := config.LoadOrEmpty(s.opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	state, err := config.StateDir()
	if err != nil {
		return nil, err
	}
	b := &s.boards
	if b.teams == nil {
		b.teams = map[string]*teamState{}
	}
	for _, t := range cfg.Teams {
		if ts, ok := b.teams[t.Name]; ok && ts.t != nil && ts.t.ID == t.ID {
			continue
		}
		tm, err := team.Open(t, cfg.Path, state)
		b.teams[t.Name] = &teamState{t: tm, err: err}
	}
	for name := range b.teams {
		if _, ok := cfg.Team(name); !ok {
			delete(b.teams, name)
		}
	}
	b.cfg = cfg
	return cfg, nil
}

// teams is GET /api/teams: the configured teams' names, sorted.
func (s *Server) teams(w http.ResponseWriter, r *http.Request) {
	s.boards.mu.Lock()
	cfg, err := s.loadConfig()
	s.boards.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	names := make([]string, 0, len(cfg.Teams))
	for _, t := range cfg.Teams {
		names = append(names, t.Name)
	}
	writeJSON(w, http.StatusOK, map[string]any{"teams": names})
}

// board is GET /api/board?team=NAME: the team's board, from the tracker as
// last read and the sessions as they are now. A team whose tracker was
// not read yet is read first.
func (s *Server) board(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("team")
	if name == "" {
		writeError(w, http.StatusBadRequest, "board: no team: want /api/board?team=NAME")
		return
	}
	s.boards.mu.Lock()
	ts, ok := s.boards.teams[name]
	// Read when never read, or when the last read failed: with no page
	// connected nothing else reads it again, and a GET would be answered
	// with that failure for good (the chaos run: a Linear 502 on the
	// first read after a restart of the server).
	if !ok || ts.refreshed.IsZero() || ts.err != nil {
		if _, err := s.loadConfig(); err != nil {
			s.boards.mu.Unlock()
			writeError(w, http.StatusInternalServerError, "%v", err)
			return
		}
		if ts, ok = s.boards.teams[name]; ok {
			s.refreshTeam(r.Context(), ts)
		}
	}
	var rep controller.Report
	var refreshed time.Time
	var rerr error
	if ok {
		rep, refreshed, rerr = ts.report, ts.refreshed, ts.err
	}
	s.boards.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "board: no team %q in %s", name, s.opts.ConfigPath)
		return
	}
	sessions, live := s.Sessions()
	b := buildBoard(name, rep, sessions)
	b.Refreshed, b.Live = refreshed, live
	if ts.t != nil && ts.t.Budget.Any() {
		bud := ts.t.Budget
		b.Budget = &controller.SpendBudget{IssueTokens: bud.IssueTokens, IssueUSD: bud.IssueUSD, DayTokens: bud.DayTokens, DayUSD: bud.DayUSD}
		var err error
		if b.Budget.Today, err = controller.Today(filepath.Join(ts.t.StateDir, "budget.json"), time.Now()); err != nil {
			b.Budget.Problem = err.Error()
		}
	}
	if ts.t != nil {
		home, _ := os.UserHomeDir()
		for _, col := range b.Columns {
			for i := range col.Issues {
				if u, err := team.IssueUsage(ts.t, home, col.Issues[i].ID); err == nil && (u.Total() > 0 || u.CostUSD != nil) {
					col.Issues[i].Usage = &u
				}
			}
		}
	}
	if rerr != nil {
		b.Error = rerr.Error()
	}
	writeJSON(w, http.StatusOK, b)
}

// buildBoard joins a team's report (the tracker as last read) with the
// sessions as they are now.
func buildBoard(name string, rep controller.Report, sessions []api.Session) Board {
	b := Board{Team: name, Columns: make([]Column, len(Phases))}
	col := map[controller.Status]int{}
	for i, p := range Phases {
		b.Columns[i] = Column{Status: p, Issues: []BoardIssue{}}
		col[p] = i
	}
	byIssue := map[string][]api.Session{}
	for _, ss := range sessions {
		if ss.Team == name && ss.Issue != "" {
			byIssue[ss.Issue] = append(byIssue[ss.Issue], ss)
		}
	}
	for _, is := range rep.Issues {
		bi := BoardIssue{
			ID: is.ID, Title: is.Title, Status: is.Status, Labels: is.Labels,
			Failed: is.Failed, Action: is.Action, Reason: is.Reason, Room: is.Decision.Room,
		}
		bi.Session = pickSession(byIssue[is.ID])
		if i, ok := col[is.Status]; ok {
			b.Columns[i].Issues = append(b.Columns[i].Issues, bi)
		} else {
			b.Other = append(b.Other, bi)
		}
	}
	return b
}

// pickSession is the session an issue's card shows: a live one (the
// newest if several), else the one that ended last.
func pickSession(ss []api.Session) *api.Session {
	if len(ss) == 0 {
		return nil
	}
	newer := func(a, b api.Session) int {
		if a.State.Ended() != b.State.Ended() {
			if a.State.Ended() {
				return 1
			}
			return -1
		}
		return -cmp.Compare(activity(a).UnixNano(), activity(b).UnixNano())
	}
	best := slices.MinFunc(ss, newer)
	return &best
}

// activity is when a session last did something, as far as known.
func activity(s api.Session) time.Time {
	var t time.Time
	if s.LastActivity != nil {
		t = *s.LastActivity
	}
	if s.Exit != nil && s.Exit.Time.After(t) {
		t = s.Exit.Time
	}
	return t
}

// liveSessions is the controller's SessionSource for one team, from the
// hub's live view: a tracker refresh lists no sessions of its own.
type liveSessions struct {
	s    *Server
	team string
}

func (l liveSessions) Sessions(context.Context) ([]controller.Session, error) {
	ss, _ := l.s.Sessions()
	return service.ControllerSessions(l.team, ss), nil
}

// refreshTeam reads ts's tracker once (s.boards.mu held) and reports
// whether the board changed.
func (s *Server) refreshTeam(ctx context.Context, ts *teamState) bool {
	if ts.t == nil {
		ts.refreshed = time.Now()
		return false // opening it failed: ts.err says why
	}
	src := ts.t.Sources(liveSessions{s: s, team: ts.t.Name})
	src.Worktrees = nil // the board shows no worktrees; the session view's diff does
	st, _, err := controller.Collect(ctx, src)
	if err != nil && ctx.Err() != nil {
		// The read was given up by whoever asked (a GET whose client went
		// away, the server stopping), not failed by the tracker: the board
		// keeps what it had, and the next GET reads again. Recorded as the
		// board's error, it was served to everyone after, never read again
		// while no page was connected (the chaos run: "context canceled"
		// and no issues, after a client's timeout during a Linear stall).
		return false
	}
	ts.refreshed = time.Now()
	if err != nil {
		changed := ts.err == nil || ts.err.Error() != err.Error()
		ts.err = fmt.Errorf("read the tracker of team %s: %w", ts.t.Name, err)
		return changed
	}
	hadErr := ts.err != nil
	ts.err = nil
	ts.report = controller.Suggest(st)
	// The room's figures (free memory) move on every read: a board
	// changes with what its cards show, not with them.
	digest := ts.report
	digest.Room = controller.Room{}
	d, _ := json.Marshal(digest)
	changed := string(d) != ts.digest
	ts.digest = string(d)
	return changed || hadErr
}

// refreshTrackers reads the trackers of the named teams again (every
// team when names is nil) and returns those whose board changed.
func (s *Server) refreshTrackers(ctx context.Context, names []string) []string {
	s.boards.mu.Lock()
	defer s.boards.mu.Unlock()
	if _, err := s.loadConfig(); err != nil {
		s.log.Warn("dashboard: legion.toml cannot be loaded; the boards show what they had", "err", err)
	}
	var changed []string
	for name, ts := range s.boards.teams {
		if names != nil && !slices.Contains(names, name) {
			continue
		}
		if s.refreshTeam(ctx, ts) {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	return changed
}
