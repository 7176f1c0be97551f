package controller

// Usage and rate limits: when an agent's turn fails at the model API's
// limit, Legion pauses its kind's new dispatches until the limit lifts
// (the reset time the agent gives, else an exponential backoff up to the
// provider's window) and then prompts the same conversations to go on,
// oldest first, a few at a time, without a person. A limit that keeps
// coming back after a whole window of waiting is escalated once, with its
// history.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/atomicfile"
)

// Limit backoff: without a reset time the first pause is limitBackoff,
// each next one twice the last, up to the kind's window.
const limitBackoff = time.Minute

// maxHits bounds the hits a Pause keeps: a long episode of many agents
// keeps its newest.
const maxHits = 100

// ResumesPerTick is how many paused conversations of one kind are
// prompted to go on in one tick once its limit lifted: a few at a time,
// so a limit that lifts for all does not bring them all back at once.
const ResumesPerTick = 2

// ResumeGrace is how long after a reset time an agent gave Legion waits
// before it prompts a conversation still stopped at the limit: some CLIs
// try again by themselves at that time (opencode: agent/opencode O28),
// and a prompt on top would be a second one.
const ResumeGrace = 30 * time.Second

// ResumePrompt is what a conversation paused at a limit is told when the
// pause ends.
const ResumePrompt = "The model API's usage limit has lifted: continue where you stopped."

// Pause is one agent kind's wait at its API's limit.
type Pause struct {
	// Until is when the kind may run again: the limit's reset time, or
	// the backoff's end.
	Until time.Time `json:"until"`
	// ResetKnown says Until is the reset time an agent gave.
	ResetKnown bool `json:"reset_known,omitempty"`
	// Hits are when each limit of this episode was seen (the first is when
	// it began); an episode ends once the kind ran a window without one.
	Hits []time.Time `json:"hits"`
	// Pauses counts the episode's pauses: the backoff of the next is
	// twice the last. Limits seen while paused add hits, not pauses.
	Pauses int `json:"pauses"`
	// Waited is how long the episode's pauses added up to.
	Waited time.Duration `json:"waited"`
	// Last is the agent state's Since of the newest hit, so one StopFailure
	// is one hit however many ticks see it.
	Last time.Time `json:"last"`
}

// Paused reports whether the kind waits at now.
func (p *Pause) Paused(now time.Time) bool { return p != nil && now.Before(p.Until) }

// history is the episode's hits as people read them.
func (p *Pause) history() string {
	var b strings.Builder
	for i, h := range p.Hits {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(h.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// rateLimitText matches what an agent says of a rate or usage limit:
// Claude Code's StopFailure error "rate_limit", an HTTP 429, a provider's
// words for it.
var rateLimitText = regexp.MustCompile(`(?i)^rate_limit|\b429\b|rate[ _-]?limit|usage[ _-]?limit|quota|resource_exhausted|too many requests`)

// notALimit matches the error kinds that waiting does not fix, whatever
// their text says (a spent API credit's "Quota exceeded"): the agent's
// StopFailure error first, as the worker reports it.
var notALimit = regexp.MustCompile(`^(billing_error|authentication_failed|invalid_request|server_error|max_output_tokens)\b`)

// rateLimited reports whether w's agent stopped at its API's limit (not at
// another API error: authentication, spent credit, an overloaded server).
func rateLimited(w *Worker) bool {
	return w.agentIn(api.AgentAPIError) && !notALimit.MatchString(w.Agent.Error) &&
		(w.Agent.ResetAt != nil || rateLimitText.MatchString(w.Agent.Error))
}

// Limits are the pauses of a team's agent kinds, kept in a small JSON file
// of its state directory (limits.json) so that a restart of the controller
// keeps waiting and counting. It is read again on every Observe: `legion
// limits resume` ends a pause by writing it. A corrupt one is quarantined.
type Limits struct {
	Path string
	mu   sync.Mutex
}

type limitsFile struct {
	Kinds map[string]*Pause `json:"kinds"`
}

// Observe reads the file, counts the new limits of st's live workers
// (each a hit of its mode's kind: State.KindOf), ends the episodes of
// kinds that ran a window without one, writes the file back when it
// changed, and returns the pauses. windows are the kinds' windows (the
// provider's longest limit, which the backoff never exceeds); problem
// says what went wrong with the file.
func (l *Limits) Observe(st *State, windows map[string]time.Duration) (pauses map[string]*Pause, problem string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var problems []string
	f := limitsFile{}
	switch data, err := os.ReadFile(l.Path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		problems = append(problems, fmt.Sprintf("limits %s: %v", l.Path, err))
	case json.Unmarshal(data, &f) != nil:
		f = limitsFile{}
		q, qerr := atomicfile.Quarantine(l.Path, st.Now)
		problems = append(problems, fmt.Sprintf("limits %s is not Legion's JSON: moved to %s (%v); the pauses start again", l.Path, q, qerr))
	}
	if f.Kinds == nil {
		f.Kinds = map[string]*Pause{}
	}
	before, _ := json.Marshal(f)
	now := st.Now
	limited := map[string]bool{}
	// The oldest first, so that a tick that sees several adds them in order.
	ws := []*Worker{}
	for _, is := range st.Issues {
		if rateLimited(is.Worker) {
			ws = append(ws, is.Worker)
		}
	}
	slices.SortFunc(ws, func(a, b *Worker) int { return a.Agent.Since.Compare(b.Agent.Since) })
	for _, w := range ws {
		kind := st.KindOf[w.Mode]
		limited[kind] = true
		p := f.Kinds[kind]
		if p == nil {
			p = &Pause{}
			f.Kinds[kind] = p
		}
		if !w.Agent.Since.After(p.Last) {
			continue // this limit was counted
		}
		p.Last = w.Agent.Since
		p.Hits = append(p.Hits, w.Agent.Since)
		if len(p.Hits) > maxHits {
			p.Hits = p.Hits[len(p.Hits)-maxHits:] // the history an escalation shows
		}
		if p.Paused(now) {
			// Another agent of the kind stopped at the same limit: one
			// pause holds them all (a later reset time extends it).
			if r := w.Agent.ResetAt; r != nil && r.After(p.Until) {
				p.Waited += r.Sub(p.Until)
				p.Until, p.ResetKnown = *r, true
			}
			continue
		}
		window := cmp.Or(windows[kind], 5*time.Hour)
		if p.Waited >= window {
			// A whole window of waiting, and it came back: no more
			// pausing; Decide escalates the issue.
			p.Until, p.ResetKnown = now, false
			continue
		}
		p.Pauses++
		if r := w.Agent.ResetAt; r != nil && r.After(now) {
			p.Until, p.ResetKnown = *r, true
		} else {
			wait := limitBackoff << min(p.Pauses-1, 20)
			p.Until, p.ResetKnown = now.Add(min(wait, window)), false
		}
		p.Waited += p.Until.Sub(now)
	}
	for kind, p := range f.Kinds {
		window := cmp.Or(windows[kind], 5*time.Hour)
		if !limited[kind] && !p.Paused(now) && now.Sub(p.Until) > window {
			delete(f.Kinds, kind) // a window without a limit: the episode is over
		}
	}
	if after, _ := json.Marshal(f); string(after) != string(before) {
		data, _ := json.MarshalIndent(f, "", "  ")
		if err := atomicfile.WritePrivate(l.Path, append(data, '\n')); err != nil {
			problems = append(problems, fmt.Sprintf("limits %s: %v", l.Path, err))
		}
	}
	return f.Kinds, strings.Join(problems, "; ")
}

// Resume ends the pauses of kinds (all when none is named) at now: a
// person says the limit lifted. It returns the kinds whose pause it ended.
func (l *Limits) Resume(now time.Time, kinds ...string) ([]string, error) {
	var ended []string
	err := l.update(func(f *limitsFile) {
		for _, k := range slices.Sorted(maps.Keys(f.Kinds)) {
			if p := f.Kinds[k]; (len(kinds) == 0 || slices.Contains(kinds, k)) && p.Paused(now) {
				p.Until = now
				ended = append(ended, k)
			}
		}
	})
	return ended, err
}

// Pauses reads the pauses as the controller last wrote them.
func (l *Limits) Pauses() (map[string]*Pause, error) {
	var out map[string]*Pause
	err := l.update(func(f *limitsFile) { out = f.Kinds })
	return out, err
}

// update reads the file, applies change and writes it back when it
// changed anything.
func (l *Limits) update(change func(*limitsFile)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := limitsFile{Kinds: map[string]*Pause{}}
	data, err := os.ReadFile(l.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("limits %s: %w", l.Path, err)
	default:
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("limits %s is not Legion's JSON: %w", l.Path, err)
		}
	}
	before, _ := json.Marshal(f)
	change(&f)
	if after, _ := json.Marshal(f); string(after) == string(before) {
		return nil
	}
	out, _ := json.MarshalIndent(f, "", "  ")
	return atomicfile.WritePrivate(l.Path, append(out, '\n'))
}

// resumable are the issues whose worker, stopped at its kind's limit, is
// prompted to go on this tick: of each kind whose pause is over, the
// ResumesPerTick that stopped first.
func resumable(s State) map[string]bool {
	byKind := map[string][]Issue{}
	for _, is := range s.Issues {
		if w := is.Worker; rateLimited(w) && !is.HasLabel(LabelInputNeeded) && !is.HasLabel(LabelFeedbackGiven) {
			kind := s.KindOf[w.Mode]
			if p := s.Pauses[kind]; p != nil && !p.Paused(s.Now) && (!p.ResetKnown || s.Now.Sub(p.Until) >= ResumeGrace) {
				byKind[kind] = append(byKind[kind], is)
			}
		}
	}
	out := map[string]bool{}
	for _, iss := range byKind {
		slices.SortStableFunc(iss, func(a, b Issue) int { return a.Worker.Agent.Since.Compare(b.Worker.Agent.Since) })
		for _, is := range iss[:min(len(iss), ResumesPerTick)] {
			out[is.ID] = true
		}
	}
	return out
}

// applyLimits turns d, decided for is without limits, into what the
// pauses allow: a worker stopped at its kind's limit waits out the pause
// (no escalation) and is then prompted to go on, when resume says it is
// its turn (a few at a time, oldest first); a limit that came back after
// a whole window of waiting is escalated (once: the escalation's label
// stops the next); a new worker of a paused kind is not started.
func applyLimits(d Decision, is Issue, s State, resume map[string]bool) Decision {
	if len(s.Pauses) == 0 || is.Status == StatusDone {
		return d
	}
	if w := is.Worker; rateLimited(w) && !is.HasLabel(LabelInputNeeded) && !is.HasLabel(LabelFeedbackGiven) {
		kind := s.KindOf[w.Mode]
		p := s.Pauses[kind]
		if p == nil {
			return d
		}
		window := cmp.Or(s.LimitWindows[kind], 5*time.Hour)
		if p.Waited >= window && p.Pauses > 0 && !p.Paused(s.Now) {
			d.Comment += fmt.Sprintf("\n\nLegion waited out %s's limit %d times, %s in all (a whole window, %s), and it came back each time (limits seen: %s). "+
				"It stops waiting by itself; `legion limits resume` lets the paused agents try again.", kind, p.Pauses, p.Waited.Round(time.Minute), window, p.history())
			d.Reason += " (the limit keeps coming back: escalated once)"
			return d
		}
		if p.Paused(s.Now) {
			why := "no reset time given: backing off"
			if p.ResetKnown {
				why = "the reset time the agent gave"
			}
			return Decision{Issue: is.ID, Action: ActionSkip,
				Reason: fmt.Sprintf("paused until %s: %s's usage limit (%s; `legion limits resume` ends it early)", p.Until.Local().Format(time.DateTime), kind, why)}
		}
		if !resume[is.ID] {
			return Decision{Issue: is.ID, Action: ActionSkip,
				Reason: fmt.Sprintf("%s's limit lifted: waiting for its turn to go on (%d conversations a tick, oldest first)", kind, ResumesPerTick)}
		}
		return Decision{Issue: is.ID, Action: ActionResumeAfterLimit, Mode: w.Mode, Input: ResumePrompt, InputBy: "legion",
			Reason: fmt.Sprintf("%s's limit lifted (paused until %s): prompt the %s worker to go on", kind, p.Until.Local().Format(time.DateTime), w.Mode)}
	}
	if startsWorker(d.Action) {
		if p := s.Pauses[s.KindOf[d.Mode]]; p.Paused(s.Now) {
			return Decision{Issue: is.ID, Action: ActionSkip,
				Reason: fmt.Sprintf("paused until %s: %s's usage limit; would %s", p.Until.Local().Format(time.DateTime), s.KindOf[d.Mode], d.Action)}
		}
	}
	return d
}
