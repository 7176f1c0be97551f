package ptyworker

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// The watchdog rules, by the spec's agent kind. The watchdog is fed
// unless the verdict is stale; a stale agent gets one WATCHDOG=trigger,
// and systemd restarts the session (resumed from its session file).
//
// Kind claude, once a hook event came in this run, by the agent's state:
// fed while it idles at its prompt (with no background subagents left),
// waits on a human (waiting_permission, waiting_answer, api_error) or is
// ending. While it starts or works (or idles with subagents still
// running) it is fed only while its newest sign of life is within
// stale_after: the newest hook event, or a write of its session file or
// a subagent's file. Its screen is not a sign of life: Claude Code's
// spinner redraws while an API stream hangs. Within startup_grace of the
// start a starting agent is fed anyway.
//
// Kind claude before any hook event, and any kind with a session file:
// the session files' rule: fed while their newest write is within
// stale_after, within startup_grace of the start, or while the file
// shows a question waiting for an answer (WatchWaiting).
//
// Kind custom (or none) without a session file: with stale_after, fed
// while the agent's newest output is within stale_after (or within
// startup_grace of the start); without, fed while it runs.

// defaultTick is the STATUS refresh interval when systemd set no watchdog.
const defaultTick = 5 * time.Second

// claudeLiveness and claudeQuestion are the default probes.
func claudeLiveness(sessionFile string) (time.Time, error) { return claudecode.Liveness(sessionFile) }

func claudeQuestion(sessionFile string) (string, bool, error) {
	q, waiting, err := claudecode.PendingQuestion(sessionFile)
	if err != nil || !waiting {
		return "", waiting, err
	}
	return q.Text(), true, nil
}

// sdNotify sends state to systemd; without NOTIFY_SOCKET it does nothing.
func sdNotify(state string) error {
	_, err := daemon.SdNotify(false, state)
	return err
}

// tickInterval is how often the worker checks liveness and notifies: half
// the watchdog interval systemd gave (WATCHDOG_USEC), else defaultTick, and
// never slower than a quarter of stale_after so staleness is seen in time.
func tickInterval(s *proto.Spec, override time.Duration) time.Duration {
	if override > 0 {
		return override
	}
	d := defaultTick
	if wd, err := daemon.SdWatchdogEnabled(false); err == nil && wd > 0 {
		d = wd / 2
	}
	if q := time.Duration(s.StaleAfter) / 4; q > 0 && q < d {
		d = q
	}
	return max(d, 50*time.Millisecond)
}

// verdict is one liveness evaluation.
type verdict struct {
	kind     string    // Watch*
	activity time.Time // newest sign of life
	age      time.Duration
	question string // WatchWaiting: what the agent waits for
}

// evaluate decides by the rules above whether the watchdog may be fed at
// now, for the run that started at started.
func (w *worker) evaluate(now time.Time, started time.Time) verdict {
	s := w.spec
	act := w.activity(started)
	v := verdict{activity: act, age: now.Sub(act)}
	fresh := v.age <= time.Duration(s.StaleAfter)
	inGrace := now.Sub(started) <= time.Duration(s.StartupGrace)
	w.mu.Lock()
	a := w.agent.state()
	w.mu.Unlock()
	switch {
	case s.Agent == proto.AgentClaude && a != nil:
		switch {
		case a.State == api.AgentIdle && a.BackgroundTasks == 0, a.State == api.AgentEnded:
			v.kind = proto.WatchIdle
		case a.State.WaitsOnHuman():
			v.kind, v.question = proto.WatchWaiting, proto.WaitText(a)
		case s.StaleAfter == 0:
			v.kind = proto.WatchUnwatched
		case fresh:
			v.kind = proto.WatchFresh
		case a.State == api.AgentStarting && inGrace:
			v.kind = proto.WatchGrace
		default:
			v.kind = proto.WatchStale
		}
	case s.SessionFile != "":
		switch {
		case fresh:
			v.kind = proto.WatchFresh
		case inGrace:
			v.kind = proto.WatchGrace
		default:
			q, waiting, err := w.opts.PendingQuestion(s.SessionFile)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				w.logOnce("question", "cannot check the session file for a pending question", "file", s.SessionFile, "err", err)
			}
			if waiting {
				v.kind, v.question = proto.WatchWaiting, q
			} else {
				v.kind = proto.WatchStale
			}
		}
	case s.Agent != proto.AgentClaude && s.StaleAfter > 0:
		switch {
		case fresh:
			v.kind = proto.WatchFresh
		case inGrace:
			v.kind = proto.WatchGrace
		default:
			v.kind = proto.WatchStale
		}
	default:
		v.kind = proto.WatchUnwatched
	}
	return v
}

// activity is the newest sign of life of the run that started at started,
// read now, and never earlier than started: the newest hook event (kind
// claude), the session files' newest mtime when there is a session file,
// else (kinds other than claude) the last output. It costs a stat and two
// directory reads (package claude's Liveness) or an atomic load; the info
// method calls it so a listing shows the activity of the moment, not of
// the last tick.
func (w *worker) activity(started time.Time) time.Time {
	s := w.spec
	act := started
	if s.Agent == proto.AgentClaude {
		w.mu.Lock()
		if w.lastHook.After(act) {
			act = w.lastHook
		}
		w.mu.Unlock()
	}
	if s.SessionFile == "" {
		if out := w.out.lastOutput(); s.Agent != proto.AgentClaude && out.After(act) {
			act = out
		}
		return act
	}
	newest, err := w.opts.Liveness(s.SessionFile)
	switch {
	case err == nil:
		if newest.After(act) {
			act = newest
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		w.logOnce("liveness", "cannot read the session file's liveness", "file", s.SessionFile, "err", err)
	}
	return act
}

// statusLine is the STATUS= text: phase, issue, and the session's state:
// the agent's own (kind claude, from its hooks) or its activity.
func (w *worker) statusLine(state string, v verdict) string {
	var b strings.Builder
	if w.spec.Mode != "" {
		b.WriteString(w.spec.Mode)
		b.WriteByte(' ')
	}
	if w.spec.Issue != "" {
		b.WriteString(w.spec.Issue)
	} else {
		b.WriteString(w.spec.Name)
	}
	b.WriteString(": ")
	w.mu.Lock()
	a := w.agent.state()
	w.mu.Unlock()
	switch {
	case state != proto.StateRunning:
		b.WriteString(state)
	case a != nil && v.kind == proto.WatchStale:
		fmt.Fprintf(&b, "stale, %s, no sign of life since %s", clipStatus(proto.DescribeAgent(a)), statusClock(v.activity))
	case a != nil:
		b.WriteString(clipStatus(proto.DescribeAgent(a)))
	case v.kind == proto.WatchWaiting:
		b.WriteString("waiting on a human")
		if v.question != "" {
			b.WriteString(": " + clipStatus(v.question))
		}
	case v.kind == proto.WatchStale:
		fmt.Fprintf(&b, "stale, no activity since %s", statusClock(v.activity))
	default:
		fmt.Fprintf(&b, "running, last activity at %s", statusClock(v.activity))
	}
	return b.String()
}

// statusClock is when t was, for STATUS=: a time of day (with the date
// when not today). STATUS= says when, not how long ago, so that it stays
// the same while nothing happens: every change of it is a D-Bus signal
// from the manager to each follower of the unit (the helper refreshes
// the session on it), and 1,000 idle workers would send one each per
// tick.
func statusClock(t time.Time) string {
	t = t.Local()
	if t.Format(time.DateOnly) != time.Now().Format(time.DateOnly) {
		return t.Format(time.DateTime)
	}
	return t.Format(time.TimeOnly)
}

// clipStatus makes text one line of at most 80 bytes, cut on a
// character's first byte: systemd drops a STATUS= that is not valid UTF-8
// whole.
func clipStatus(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= 80 {
		return s
	}
	cut := 77
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func roundAge(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

// watchLoop checks liveness on every tick, feeds the watchdog only while
// the agent is alive by the rules above, triggers it once when stale, and
// refreshes STATUS=. It exits when stop is closed.
func (w *worker) watchLoop(stop <-chan struct{}) {
	t := time.NewTicker(w.tick)
	defer t.Stop()
	for {
		w.check(time.Now(), false)
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}

// check evaluates liveness at now, tells watchers when the verdict
// changed (always, with force: the agent's state changed), and notifies
// systemd: WATCHDOG=1 when fed, one WATCHDOG=trigger when stale, and
// STATUS=. The tick and the hook path call it.
func (w *worker) check(now time.Time, force bool) {
	w.mu.Lock()
	state, started, ending := w.state, w.startedAt, w.ending
	w.mu.Unlock()
	v := w.evaluate(now, started)
	w.setLiveness(v, force)

	status := "STATUS=" + w.statusLine(state, v)
	var msg string
	switch {
	case state != proto.StateRunning || ending:
		msg = "WATCHDOG=1\n" + status // exiting: keep systemd from killing the cleanup
	case v.kind != proto.WatchStale:
		msg = "WATCHDOG=1\n" + status
	default:
		reason := fmt.Sprintf("watchdog: stale for %ds", int64(v.age.Round(time.Second)/time.Second))
		w.mu.Lock()
		first := !w.triggered
		if first {
			w.triggered = true
			w.stopReason = reason
		}
		w.mu.Unlock()
		msg = status
		if first {
			w.log.Warn("agent is stale; asking systemd to restart the session", "age", roundAge(v.age), "session_file", w.spec.SessionFile)
			if err := w.tr.mark(fmt.Sprintf("run %d %s; WATCHDOG=trigger sent", w.run, reason), 5*time.Second); err != nil {
				w.log.Error("transcript marker", "err", err)
			}
			msg = "WATCHDOG=trigger\n" + status
			if w.spec.SelfWatchdog {
				close(w.staleCh)
			}
		}
	}
	if err := w.opts.Notify(msg); err != nil {
		w.logOnce("notify", "sd_notify failed", "err", err)
	}
}
