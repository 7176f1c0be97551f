package dashboard

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/service"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/journal"
)

// Kinds of a Need: what the person is asked for.
const (
	NeedQuestion   = "question"   // the agent asks (AskUserQuestion): pick a choice or write an answer
	NeedPermission = "permission" // the agent waits to use a tool: approve or deny
	NeedTurn       = "turn"       // its turn ended without worker-done: reply with its next prompt
	NeedRateLimit  = "rate_limit" // its turn failed at the API: reply (e.g. "continue") when it can go on
	NeedInput      = "input"      // the controller asked in the tracker (user-input-needed) with no agent waiting
	NeedFailed     = "failed"     // systemd gave up on a worker: reset it
)

// Need is one thing that waits for a person.
type Need struct {
	Team   string            `json:"team"`
	Issue  string            `json:"issue"`
	Title  string            `json:"title"`
	Status controller.Status `json:"status"`
	Kind   string            `json:"kind"`
	// Session is the session that waits (or failed); Mode its phase.
	Session string     `json:"session,omitempty"`
	Mode    string     `json:"mode,omitempty"`
	Since   *time.Time `json:"since,omitempty"` // when it began to wait
	// Questions are a question's, with their options (the choices).
	Questions []api.Question `json:"questions,omitempty"`
	// Tool and Command are a permission's: the tool and exactly what it
	// would do.
	Tool    string `json:"tool,omitempty"`
	Command string `json:"command,omitempty"`
	// Message is what the person reads: the agent's last message (turn),
	// the API's error (rate_limit), the controller's comment (input).
	Message string     `json:"message,omitempty"`
	ResetAt *time.Time `json:"reset_at,omitempty"` // rate_limit: when it lifts, if the API said
	// PausedUntil is, for a rate_limit, when the controller prompts the
	// agent to go on by itself (its kind's pause, `legion limits`); nil
	// when its kind is not paused.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// Unit, Cause and Journal are a failed session's: its unit, why
	// systemd gave up, and the last lines about it (JournalSource says
	// where they come from: "journal" or "transcript").
	Unit          string   `json:"unit,omitempty"`
	Cause         string   `json:"cause,omitempty"`
	Journal       []string `json:"journal,omitempty"`
	JournalSource string   `json:"journal_source,omitempty"`
	// Escalated says the controller has asked in the tracker already
	// (user-input-needed); answering here works either way.
	Escalated bool         `json:"escalated"`
	Usage     *agent.Usage `json:"usage,omitempty"`
}

// NeedsResult is GET /api/needs.
type NeedsResult struct {
	Needs []Need `json:"needs"`
	// Errors are the teams whose queue could not be read, each naming
	// the team and why; the other teams' needs are there.
	Errors []string `json:"errors,omitempty"`
}

// openTeams is every team of the configured legion.toml, read again,
// with the trackers the board keeps open (a team whose tracker could not
// be opened is an error naming it).
func (s *Server) openTeams() ([]*team.Team, error) {
	s.boards.mu.Lock()
	defer s.boards.mu.Unlock()
	cfg, err := s.loadConfig()
	if err != nil {
		return nil, err
	}
	out := make([]*team.Team, 0, len(cfg.Teams))
	for _, ct := range cfg.Teams {
		ts := s.boards.teams[ct.Name]
		if ts.t == nil {
			return nil, ts.err
		}
		out = append(out, ts.t)
	}
	return out, nil
}

// openTeam opens the team named name.
func (s *Server) openTeam(name string) (*team.Team, error) {
	ts, err := s.openTeams()
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no team %q in %s", name, cmp.Or(s.opts.ConfigPath, "legion.toml"))
}

// dialHelper connects to the helper's API.
func (s *Server) dialHelper(ctx context.Context) (*api.Client, error) {
	if s.opts.HelperSocket != "" {
		return api.DialPath(ctx, s.opts.HelperSocket)
	}
	return api.Dial(ctx)
}

// listedSessions is a SessionSource over sessions listed once.
type listedSessions []controller.Session

func (l listedSessions) Sessions(context.Context) ([]controller.Session, error) { return l, nil }

// teamNeeds collects team t's state once (its tracker, its sessions as
// listed by c) and returns what waits for a person, issue by issue.
func teamNeeds(ctx context.Context, c *api.Client, t *team.Team) ([]Need, error) {
	sessions, err := service.TeamSessions(ctx, c, t.Name)
	if err != nil {
		return nil, fmt.Errorf("team %s: list its sessions: %w", t.Name, err)
	}
	// Review outcomes are not needed: no GitHub query for the queue.
	st, tracked, err := controller.Collect(ctx, controller.Sources{Tracker: t.Tracker, Sessions: listedSessions(sessions), IdleGrace: t.IdleGrace})
	if err != nil {
		return nil, fmt.Errorf("team %s: %w", t.Name, err)
	}
	pauses, _ := (&controller.Limits{Path: team.LimitsPath(t.StateDir)}).Pauses() // unreadable: no pause shown
	now := time.Now()
	var out []Need
	for _, is := range st.Issues {
		for _, n := range issueNeeds(t.Name, is, lastLegionComment(tracked, is.ID)) {
			if n.Kind == NeedRateLimit {
				kind := cmp.Or(string(t.Agent.ForMode(n.Mode).Kind), string(config.AgentClaude))
				if p := pauses[kind]; p.Paused(now) {
					until := p.Until
					n.PausedUntil = &until
				}
			}
			out = append(out, n)
		}
	}
	return out, nil
}

// resumeLimits is POST /api/limits/{team}/resume: a person ends the
// team's pauses at its agent kinds' limits from the dashboard (as `legion
// limits resume`), and the controller is woken to prompt the paused agents.
func (s *Server) resumeLimits(w http.ResponseWriter, r *http.Request) {
	teamName := r.PathValue("team")
	t, err := s.openTeam(teamName)
	if err != nil {
		writeError(w, http.StatusNotFound, "resume limits: %v", err)
		return
	}
	ended, err := (&controller.Limits{Path: team.LimitsPath(t.StateDir)}).Resume(time.Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "resume limits of team %s: %v", teamName, err)
		return
	}
	if len(ended) > 0 {
		if err := team.Wake(t.StateDir, "resumed from the dashboard"); err != nil {
			s.log.Warn("could not wake the controller", "team", teamName, "err", err)
		}
		s.log.Info("limits resumed from the dashboard", "team", teamName, "kinds", ended)
	}
	writeJSON(w, http.StatusOK, map[string][]string{"resumed": ended})
}

// lastLegionComment is the newest comment of Legion's own on issue id.
func lastLegionComment(tracked []controller.TrackedIssue, id string) string {
	for _, t := range tracked {
		if t.ID != id {
			continue
		}
		for i := len(t.Comments) - 1; i >= 0; i-- {
			if t.Comments[i].Author == controller.AuthorLegion {
				return t.Comments[i].Text
			}
		}
	}
	return ""
}

// issueNeeds is what issue is waits on, as the controller's decision
// table reads the same state (controller.Decide): an agent waiting on a
// human, a turn that ended without worker-done, the controller's own
// escalation, failed sessions. An issue that carries user-feedback-given
// was answered already: only its failed sessions are listed. A Done
// issue's agent is ended by the controller, not asked.
func issueNeeds(teamName string, is controller.Issue, legionComment string) []Need {
	base := Need{Team: teamName, Issue: is.ID, Title: is.Title, Status: is.Status, Escalated: is.HasLabel(controller.LabelInputNeeded)}
	var out []Need
	answered := is.HasLabel(controller.LabelFeedbackGiven)
	if w := is.Worker; w != nil && !answered && is.Status != controller.StatusDone {
		n := base
		n.Session, n.Mode = w.Session, string(w.Mode)
		a := w.Agent
		if a != nil {
			since := a.Since
			n.Since = &since
		}
		switch {
		case a != nil && a.State == api.AgentWaitingPermission:
			n.Kind, n.Tool, n.Command = NeedPermission, a.Tool, cmp.Or(a.Command, string(a.ToolInput))
		case a != nil && a.State == api.AgentAPIError:
			n.Kind, n.Message, n.ResetAt = NeedRateLimit, a.Error, a.ResetAt
		case w.Blocked || a != nil && a.State == api.AgentWaitingAnswer:
			n.Kind = NeedQuestion
			if a != nil && len(a.Questions) > 0 {
				n.Questions = a.Questions
			} else {
				n.Questions = []api.Question{{Question: w.Question}}
			}
		case a != nil && a.State == api.AgentIdle && !is.HasLabel(controller.LabelWorkerDone):
			n.Kind, n.Message = NeedTurn, a.LastMessage
		case is.HasLabel(controller.LabelInputNeeded):
			n.Kind, n.Message = NeedInput, legionComment
		}
		if n.Kind != "" {
			out = append(out, n)
		}
	} else if !answered && is.HasLabel(controller.LabelInputNeeded) {
		n := base
		n.Kind, n.Message = NeedInput, legionComment
		out = append(out, n)
	}
	for _, f := range is.Failed {
		n := base
		n.Kind, n.Session, n.Mode, n.Unit, n.Cause = NeedFailed, f.Session, string(f.Mode), f.Unit, f.Cause
		out = append(out, n)
	}
	return out
}

// needs is GET /api/needs[?team=NAME]: one queue across the configured
// teams (or one team's), each with the issue's token use so far.
func (s *Server) needs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	teams, err := s.openTeams()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "needs: %v", err)
		return
	}
	c, err := s.dialHelper(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, "needs: the helper does not answer: %v", err)
		return
	}
	defer c.Close()
	home, _ := os.UserHomeDir()
	res := NeedsResult{Needs: []Need{}}
	only := r.URL.Query().Get("team")
	for _, t := range teams {
		if only != "" && t.Name != only {
			continue
		}
		ns, err := teamNeeds(ctx, c, t)
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
			continue
		}
		for i := range ns {
			if u, err := team.IssueUsage(t, home, ns[i].Issue); err == nil {
				ns[i].Usage = &u
			}
			if ns[i].Kind == NeedFailed {
				ns[i].Journal, ns[i].JournalSource = failedExcerpt(ctx, c, t.Name, ns[i])
			}
		}
		res.Needs = append(res.Needs, ns...)
	}
	writeJSON(w, http.StatusOK, res)
}

// excerptLines is how many lines a failed session's excerpt shows, taken
// from at most the transcript's last excerptBytes.
const (
	excerptLines = 20
	excerptBytes = 64 << 10
)

// failedExcerpt returns the last lines about a failed session: its unit's
// and the lines about it in the journal, or, where the journal cannot be
// read (no journald, a volatile journal), the end of its transcript (the
// worker's own lines are in it too).
func failedExcerpt(ctx context.Context, c *api.Client, teamName string, n Need) ([]string, string) {
	var lines []string
	err := journal.Read(ctx, journal.Query{Team: teamName, Issue: n.Issue, UID: os.Getuid(), Lines: 500}, func(e journal.Entry) error {
		if e.Unit == n.Unit || e.About == n.Unit {
			lines = append(lines, e.Time.Format(time.TimeOnly)+" "+e.Message)
		}
		return nil
	})
	if err == nil && len(lines) > 0 {
		return lines[max(0, len(lines)-excerptLines):], "journal"
	}
	var b bytes.Buffer
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Logs(lctx, api.LogsArgs{Name: n.Session, Tail: excerptBytes}, &b); err != nil && b.Len() == 0 {
		return []string{"no journal or transcript lines: " + err.Error()}, ""
	}
	tr := strings.Split(strings.TrimRight(stripANSI(b.String()), "\n"), "\n")
	return tr[max(0, len(tr)-excerptLines):], "transcript"
}

// stripANSI drops terminal escape sequences and carriage returns, so a
// transcript excerpt reads as text.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == 0x1b && i+1 < len(s) && s[i+1] == '[':
			i += 2
			for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
				i++
			}
		case c == 0x1b && i+1 < len(s) && s[i+1] == ']':
			for i < len(s) && s[i] != 0x07 && !(s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\') {
				i++
			}
		case c == '\r':
		case c < 0x20 && c != '\n' && c != '\t':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// AnswerRequest is the body of POST /api/needs/{team}/{id}/answer.
type AnswerRequest struct {
	// Kind is the need answered: question, permission, turn (also a
	// rate_limit's or input's reply) or failed.
	Kind     string `json:"kind"`
	Choice   string `json:"choice,omitempty"`   // question: the option picked
	Text     string `json:"text,omitempty"`     // question: a free answer (wins over Choice); permission: why; turn: the reply
	Decision string `json:"decision,omitempty"` // permission: approve or deny
	// Session picks one failed session of the issue (it may have more);
	// "" is the first.
	Session string `json:"session,omitempty"`
}

// AnswerResult says what an answer did.
type AnswerResult struct {
	// Comment is the comment posted on the issue, as the tracker shows
	// it, by Author; Labels the labels added. A reset posts nothing.
	Comment string   `json:"comment,omitempty"`
	Author  string   `json:"author,omitempty"`
	Labels  []string `json:"labels,omitempty"`
	// Reset is the failed session after its reset.
	Reset *api.Session `json:"reset,omitempty"`
}

// errNoLongerWaits is a conflict: the need answered is gone.
var errNoLongerWaits = errors.New("no longer waits")

// answer is POST /api/needs/{team}/{id}/answer: it does what a person
// answering in the tracker does, through the team's tracker: a comment
// (by the dashboard's user) with the answer, then the label
// user-feedback-given, which the controller (woken at once by the write)
// relays to the agent; for a permission the comment starts with approve
// or deny, as the controller reads it (controller.PermissionDecision). A
// failed session is reset through the helper (sessions.reset, what
// `systemctl --user reset-failed UNIT` does), and the controller starts
// it again. The need must still stand: 409 when it is gone (answered
// elsewhere, or the agent moved on).
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	teamName, id := r.PathValue("team"), r.PathValue("id")
	var req AnswerRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "answer %s: %v", id, err)
		return
	}
	text, err := req.comment()
	if err != nil {
		writeError(w, http.StatusBadRequest, "answer %s: %v", id, err)
		return
	}
	t, err := s.openTeam(teamName)
	if err != nil {
		writeError(w, http.StatusNotFound, "answer %s: %v", id, err)
		return
	}
	c, err := s.dialHelper(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, "answer %s: the helper does not answer: %v", id, err)
		return
	}
	defer c.Close()
	ns, err := teamNeeds(ctx, c, t)
	if err != nil {
		writeError(w, http.StatusBadGateway, "answer %s: %v", id, err)
		return
	}
	n, err := findNeed(ns, id, req)
	if err != nil {
		writeError(w, http.StatusConflict, "answer %s of team %s: %v", id, teamName, err)
		return
	}
	if n.Kind == NeedFailed {
		ss, err := c.Reset(ctx, n.Session)
		if err != nil {
			writeError(w, http.StatusBadGateway, "answer %s: reset session %s: %v", id, n.Session, err)
			return
		}
		s.log.Info("failed session reset from the dashboard", "team", teamName, "issue", id, "session", n.Session)
		s.Publish(Event{Type: "needs", Team: teamName})
		writeJSON(w, http.StatusOK, AnswerResult{Reset: &ss})
		return
	}
	author := dashboardUser()
	if err := commentAs(ctx, t, id, author, text); err != nil {
		writeError(w, http.StatusBadGateway, "answer %s: comment: %v", id, err)
		return
	}
	if err := t.Tracker.AddLabel(ctx, id, controller.LabelFeedbackGiven); err != nil {
		writeError(w, http.StatusBadGateway, "answer %s: the comment is posted, but label %s failed (add it in the tracker): %v", id, controller.LabelFeedbackGiven, err)
		return
	}
	s.log.Info("answered from the dashboard", "team", teamName, "issue", id, "kind", n.Kind, "by", author)
	s.Publish(Event{Type: "needs", Team: teamName})
	s.Publish(Event{Type: "board", Team: teamName})
	writeJSON(w, http.StatusOK, AnswerResult{Comment: text, Author: author, Labels: []string{controller.LabelFeedbackGiven}})
}

// comment is the tracker comment that answers req, as a person would
// write it; "" for a reset.
func (req AnswerRequest) comment() (string, error) {
	text := strings.TrimSpace(req.Text)
	switch req.Kind {
	case NeedQuestion:
		ans := cmp.Or(text, strings.TrimSpace(req.Choice))
		if ans == "" {
			return "", errors.New("a question's answer needs a choice or a text")
		}
		return ans, nil
	case NeedPermission:
		switch req.Decision {
		case "approve":
			return strings.TrimSpace("approve " + text), nil
		case "deny":
			if text == "" {
				return "deny", nil
			}
			return "deny: " + text, nil
		}
		return "", fmt.Errorf("a permission's decision %q: want approve or deny", req.Decision)
	case NeedTurn, NeedRateLimit, NeedInput:
		if text == "" {
			return "", errors.New("a reply needs a text (the agent's next prompt)")
		}
		return text, nil
	case NeedFailed:
		return "", nil
	}
	return "", fmt.Errorf("kind %q: want question, permission, turn or failed", req.Kind)
}

// findNeed finds the need of issue id that req answers: one of its kind
// (a turn's reply also answers a rate limit or the controller's
// question), and for a failed one the session named, if any.
func findNeed(ns []Need, id string, req AnswerRequest) (Need, error) {
	var now []string
	for _, n := range ns {
		if !strings.EqualFold(n.Issue, id) {
			continue
		}
		now = append(now, n.Kind)
		fits := n.Kind == req.Kind || req.Kind == NeedTurn && (n.Kind == NeedRateLimit || n.Kind == NeedInput) ||
			req.Kind == NeedRateLimit && n.Kind == NeedTurn
		if fits && (req.Kind != NeedFailed || req.Session == "" || req.Session == n.Session) {
			return n, nil
		}
	}
	if len(now) == 0 {
		return Need{}, fmt.Errorf("it %w for a %s: nothing of it waits for a person now", errNoLongerWaits, req.Kind)
	}
	slices.Sort(now)
	return Need{}, fmt.Errorf("it %w for a %s: it waits for %s", errNoLongerWaits, req.Kind, strings.Join(slices.Compact(now), ", "))
}

// commentAs posts text on issue id as author, as `legion issue comment`
// does: the local tracker records the author; another tracker records
// its API key's user.
func commentAs(ctx context.Context, t *team.Team, id, author, text string) error {
	if s, ok := t.Tracker.(*local.Store); ok {
		return s.CommentAs(ctx, id, author, text)
	}
	return t.Tracker.Comment(ctx, id, text)
}

// dashboardUser is who answers from the dashboard: the user the server
// runs as (the dashboard is a single user's), as `legion issue comment`
// names them.
func dashboardUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "user"
}
