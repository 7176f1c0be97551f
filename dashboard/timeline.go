package dashboard

import (
	"context"
	"errors"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/internal/journal"
)

// DefaultTimelineHours is how far back GET /api/timeline looks unless
// ?hours= says otherwise (at most MaxTimelineHours).
const (
	DefaultTimelineHours = 6
	MaxTimelineHours     = 7 * 24
)

// timelineLines bounds the journal entries a timeline reads (the newest).
const timelineLines = 50000

// phaseGap splits a phase's span: lines of one issue's mode further apart
// than this are two runs of it (a resume after a reboot, a phase run
// again).
const phaseGap = 15 * time.Minute

// Timeline is GET /api/timeline/{team}: each issue's phases and its
// agents' activity between From and To.
type Timeline struct {
	Team string    `json:"team"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Source is where the history comes from: "journal" (Legion's lines,
	// LEGION_TEAM/LEGION_ISSUE/LEGION_MODE), or "dashboard" (the states
	// this server saw on the helper's session stream since it started,
	// when the journal cannot be read: Note says why and how to fix it).
	Source string          `json:"source"`
	Note   string          `json:"note,omitempty"`
	Issues []IssueTimeline `json:"issues"`
}

// IssueTimeline is one issue's rows.
type IssueTimeline struct {
	Issue    string            `json:"issue"`
	Title    string            `json:"title,omitempty"`
	Status   controller.Status `json:"status,omitempty"`
	Phases   []Span            `json:"phases"`
	Activity []Span            `json:"activity"`
}

// Span is a stretch of time: a phase (Mode; State empty) or an agent's
// state in it (working, idle, waiting_permission, waiting_answer,
// api_error, starting, failed).
type Span struct {
	Mode  string    `json:"mode"`
	State string    `json:"state,omitempty"`
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Live  bool      `json:"live,omitempty"` // it goes on now
}

// stateAttr reads the agent's state from a worker's "agent state" line.
var stateAttr = regexp.MustCompile(`(?:^| )state=("(?:[^"\\]|\\.)*"|\S+)`)

// entryState is the agent state an entry records, "" if none: the
// worker's "agent state" lines, and its start and end of the agent.
func entryState(e journal.Entry) string {
	switch {
	case strings.HasPrefix(e.Message, "agent state "):
		m := stateAttr.FindStringSubmatch(e.Message)
		if m == nil {
			return ""
		}
		v := m[1]
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		return v
	case strings.HasPrefix(e.Message, "agent started"):
		return string(api.AgentStarting)
	case strings.HasPrefix(e.Message, "agent ended"):
		return string(api.AgentEnded)
	}
	return ""
}

// BuildTimeline is the timeline of entries (a team's journal lines,
// oldest first) between from and to, with the issues as the tracker
// lists them (order, titles, statuses) and the helper's sessions (which
// phases run now, and failed ones). It is pure.
func BuildTimeline(teamName string, entries []journal.Entry, issues []controller.TrackedIssue, sessions []api.Session, from, to time.Time) Timeline {
	tl := Timeline{Team: teamName, From: from, To: to, Source: "journal", Issues: []IssueTimeline{}}
	rows := map[string]*IssueTimeline{}
	var order []string
	row := func(id string) *IssueTimeline {
		if r, ok := rows[id]; ok {
			return r
		}
		r := &IssueTimeline{Issue: id, Phases: []Span{}, Activity: []Span{}}
		rows[id] = r
		order = append(order, id)
		return r
	}
	for _, is := range issues {
		r := row(is.ID)
		r.Title, r.Status = is.Title, is.Status
	}
	live := map[string]api.Session{} // issue + "\x00" + mode
	for _, s := range sessions {
		if s.Team == teamName && s.Issue != "" {
			live[s.Issue+"\x00"+s.Mode] = s
		}
	}
	// Open spans by issue and mode, as indexes into their row's slices
	// (which only grow).
	type key struct{ issue, mode string }
	phase := map[key]int{}
	act := map[key]int{}
	for _, e := range entries {
		if e.Team != teamName || e.Issue == "" || e.Mode == "" || e.Mode == "controller" || e.Time.After(to) {
			continue
		}
		at := e.Time
		if at.Before(from) {
			at = from
		}
		k := key{e.Issue, e.Mode}
		r := row(e.Issue)
		if i, ok := phase[k]; ok && at.Sub(r.Phases[i].To) <= phaseGap {
			r.Phases[i].To = at
		} else {
			r.Phases = append(r.Phases, Span{Mode: e.Mode, From: at, To: at})
			phase[k] = len(r.Phases) - 1
		}
		st := entryState(e)
		if st == "" {
			continue
		}
		if i, ok := act[k]; ok {
			r.Activity[i].To = at
		}
		if st == string(api.AgentEnded) {
			delete(act, k)
			continue
		}
		r.Activity = append(r.Activity, Span{Mode: e.Mode, State: st, From: at, To: at})
		act[k] = len(r.Activity) - 1
	}
	// What runs now reaches the right edge; a failed session gets a mark.
	for k, s := range live {
		issue, mode, _ := strings.Cut(k, "\x00")
		ended := s.State.Ended()
		if ended && s.State != api.StateFailed {
			continue
		}
		r := row(issue)
		pk := key{issue, mode}
		if ended {
			if i, ok := act[pk]; ok {
				r.Activity[i].To = to
			}
			r.Activity = append(r.Activity, Span{Mode: mode, State: string(api.StateFailed), From: to, To: to})
			continue
		}
		since := from
		if s.Agent != nil && s.Agent.Since.After(from) {
			since = s.Agent.Since
		}
		if i, ok := phase[pk]; ok {
			r.Phases[i].To, r.Phases[i].Live = to, true
		} else {
			r.Phases = append(r.Phases, Span{Mode: mode, From: since, To: to, Live: true})
		}
		now := string(s.State)
		if s.Agent != nil {
			now = string(s.Agent.State)
		}
		if i, ok := act[pk]; ok && r.Activity[i].State == now {
			r.Activity[i].To, r.Activity[i].Live = to, true
			continue
		}
		if i, ok := act[pk]; ok {
			if since.After(r.Activity[i].To) {
				r.Activity[i].To = since
			}
			since = r.Activity[i].To
		}
		r.Activity = append(r.Activity, Span{Mode: mode, State: now, From: since, To: to, Live: true})
	}
	for _, id := range order {
		r := rows[id]
		slices.SortStableFunc(r.Phases, func(a, b Span) int { return a.From.Compare(b.From) })
		slices.SortStableFunc(r.Activity, func(a, b Span) int { return a.From.Compare(b.From) })
		tl.Issues = append(tl.Issues, *r)
	}
	return tl
}

// historyCap bounds the states the dashboard remembers (the oldest go).
const historyCap = 20000

// history is what the dashboard saw on the helper's session stream since
// it started: each session's agent state (or, without one, the session's
// state) when it changed, as journal entries like the worker's own
// "agent state" lines. The timeline uses it where the journal cannot be
// read; it is lost when the server exits (socket activation restarts it
// on demand), so the journal, which keeps everything, comes first.
type history struct {
	mu      sync.Mutex
	entries []journal.Entry
	last    map[string]string // session name → last state recorded
	since   time.Time         // the first record
}

// record notes session ss as seen at now, if its state changed.
func (h *history) record(ss api.Session, now time.Time) {
	if ss.Team == "" || ss.Issue == "" {
		return
	}
	st := string(ss.State)
	if ss.Agent != nil && !ss.State.Ended() {
		st = string(ss.Agent.State)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		h.last, h.since = map[string]string{}, now
	}
	if h.last[ss.Name] == st {
		return
	}
	_, seen := h.last[ss.Name]
	h.last[ss.Name] = st
	e := journal.Entry{Time: now, Team: ss.Team, Issue: ss.Issue, Mode: ss.Mode, Message: "agent state state=" + st}
	switch {
	case ss.State.Ended() && ss.State != api.StateFailed:
		e.Message = "agent ended"
		if !seen {
			return // ended before this dashboard started: nothing to draw
		}
	case !seen && ss.Agent != nil && ss.Agent.Since.Before(now):
		e.Time = ss.Agent.Since // in that state since
	}
	if len(h.entries) >= historyCap {
		h.entries = slices.Delete(h.entries, 0, len(h.entries)/10)
	}
	h.entries = append(h.entries, e)
}

// team returns the team's recorded entries since from, oldest first, and
// when the recording began.
func (h *history) team(name string, from time.Time) ([]journal.Entry, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []journal.Entry
	for _, e := range h.entries {
		if e.Team == name && !e.Time.Before(from) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b journal.Entry) int { return a.Time.Compare(b.Time) })
	return out, h.since
}

// timeline is GET /api/timeline/{team}[?hours=N].
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.PathValue("team")
	hours := DefaultTimelineHours
	if h := r.URL.Query().Get("hours"); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 1 || n > MaxTimelineHours {
			writeError(w, http.StatusBadRequest, "timeline of team %s: hours %q: want a whole number from 1 to %d", name, h, MaxTimelineHours)
			return
		}
		hours = n
	}
	t, err := s.openTeam(name)
	if err != nil {
		writeError(w, http.StatusNotFound, "timeline: %v", err)
		return
	}
	issues, err := t.Tracker.Issues(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, "timeline of team %s: %v", name, err)
		return
	}
	var sessions []api.Session
	if c, err := s.dialHelper(ctx); err == nil {
		if res, err := c.List(ctx); err == nil {
			sessions = res.Sessions
		}
		c.Close()
	}
	to := time.Now()
	from := to.Add(-time.Duration(hours) * time.Hour)
	entries, err := readTeamJournal(ctx, name, from)
	source, note := "journal", ""
	if err != nil {
		var since time.Time
		entries, since = s.hist.team(name, from)
		source, note = "dashboard", "the journal cannot be read, so this shows what the dashboard saw"
		if !since.IsZero() {
			note += " since it started at " + since.Local().Format(time.DateTime)
		}
		note += " (" + err.Error() + ")"
	}
	tl := BuildTimeline(name, entries, issues, sessions, from, to)
	tl.Source, tl.Note = source, note
	writeJSON(w, http.StatusOK, tl)
}

// readTeamJournal reads the team's journal lines since from (of the last
// timelineLines).
func readTeamJournal(ctx context.Context, teamName string, from time.Time) ([]journal.Entry, error) {
	var out []journal.Entry
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := journal.Read(ctx, journal.Query{Team: teamName, UID: os.Getuid(), Lines: timelineLines}, func(e journal.Entry) error {
		if !e.Time.Before(from) {
			out = append(out, e)
		}
		return nil
	})
	if err == nil && len(out) == 0 {
		if jerr := journal.Check(); jerr != nil {
			err = jerr
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return out, nil
	}
	return out, err
}
