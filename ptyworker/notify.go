package ptyworker

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/legion-dev/legion/ptyworker/claude"
)

// Watchdog verdicts, in HealthResult.Watchdog.
const (
	WatchFresh     = "fresh"     // the session file changed within stale_after
	WatchGrace     = "grace"     // within startup_grace of the start
	WatchWaiting   = "waiting"   // the agent waits on a human
	WatchStale     = "stale"     // none of the above: the watchdog is not fed
	WatchUnwatched = "unwatched" // no session file: fed while the agent runs
)

// defaultTick is the STATUS refresh interval when systemd set no watchdog.
const defaultTick = 5 * time.Second

// claudeLiveness and claudeQuestion are the default probes.
func claudeLiveness(sessionFile string) (time.Time, error) { return claude.Liveness(sessionFile) }

func claudeQuestion(sessionFile string) (string, bool, error) {
	q, waiting, err := claude.PendingQuestion(sessionFile)
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
func tickInterval(s *Spec, override time.Duration) time.Duration {
	if override > 0 {
		return override
	}
	d := defaultTick
	if wd, err := daemon.SdWatchdogEnabled(false); err == nil && wd > 0 {
		d = wd / 2
	}
	if s.SessionFile != "" {
		if q := time.Duration(s.StaleAfter) / 4; q < d {
			d = q
		}
	}
	return max(d, 50*time.Millisecond)
}

// verdict is one liveness evaluation.
type verdict struct {
	kind     string    // Watch*
	activity time.Time // newest sign of life
	age      time.Duration
	question string
}

// evaluate decides whether the watchdog may be fed at now. The newest sign
// of life is the session files' newest mtime, but never earlier than the
// start of this run (a resumed session's old file does not count against
// it); without a session file it is the last output.
func (w *worker) evaluate(now time.Time, started time.Time) verdict {
	s := w.spec
	act := w.activity(started)
	if s.SessionFile == "" {
		return verdict{kind: WatchUnwatched, activity: act, age: now.Sub(act)}
	}
	v := verdict{activity: act, age: now.Sub(act)}
	switch {
	case v.age <= time.Duration(s.StaleAfter):
		v.kind = WatchFresh
	case now.Sub(started) <= time.Duration(s.StartupGrace):
		v.kind = WatchGrace
	default:
		q, waiting, err := w.opts.PendingQuestion(s.SessionFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.logOnce("question", "cannot check the session file for a pending question", "file", s.SessionFile, "err", err)
		}
		if waiting {
			v.kind, v.question = WatchWaiting, q
		} else {
			v.kind = WatchStale
		}
	}
	return v
}

// activity is the newest sign of life of the run that started at started,
// read now: the session files' newest mtime, or without a session file the
// last output, and never earlier than started. It costs a stat and two
// directory reads (package claude's Liveness) or an atomic load; the info
// method calls it so a listing shows the activity of the moment, not of the
// last tick.
func (w *worker) activity(started time.Time) time.Time {
	s := w.spec
	if s.SessionFile == "" {
		if act := w.out.lastOutput(); !act.IsZero() {
			return act
		}
		return started
	}
	act := started
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

// statusLine is the STATUS= text: phase, issue, state and activity age.
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
	switch {
	case state != StateRunning:
		b.WriteString(state)
	case v.kind == WatchWaiting:
		b.WriteString("waiting on a human")
		if v.question != "" {
			q := strings.Join(strings.Fields(v.question), " ")
			if len(q) > 80 {
				// On a character's first byte: systemd drops a STATUS=
				// that is not valid UTF-8 whole.
				cut := 77
				for cut > 0 && !utf8.RuneStart(q[cut]) {
					cut--
				}
				q = q[:cut] + "..."
			}
			b.WriteString(": " + q)
		}
	case v.kind == WatchStale:
		fmt.Fprintf(&b, "stale, no activity for %s", roundAge(v.age))
	default:
		fmt.Fprintf(&b, "running, last activity %s ago", roundAge(v.age))
	}
	return b.String()
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
		w.watchTick(time.Now())
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}

func (w *worker) watchTick(now time.Time) {
	w.mu.Lock()
	state, started, triggered := w.state, w.startedAt, w.triggered
	w.mu.Unlock()
	v := w.evaluate(now, started)
	w.setLiveness(v)

	status := "STATUS=" + w.statusLine(state, v)
	var msg string
	switch {
	case state != StateRunning:
		msg = "WATCHDOG=1\n" + status // exiting: keep systemd from killing the cleanup
	case v.kind != WatchStale:
		msg = "WATCHDOG=1\n" + status
	case !triggered:
		reason := fmt.Sprintf("watchdog: stale for %ds", int64(v.age.Round(time.Second)/time.Second))
		w.mu.Lock()
		w.triggered = true
		w.stopReason = reason
		w.mu.Unlock()
		w.log.Warn("agent is stale; asking systemd to restart the session", "age", roundAge(v.age), "session_file", w.spec.SessionFile)
		if err := w.tr.mark(fmt.Sprintf("run %d %s; WATCHDOG=trigger sent", w.run, reason), 5*time.Second); err != nil {
			w.log.Error("transcript marker", "err", err)
		}
		msg = "WATCHDOG=trigger\n" + status
	default:
		msg = status
	}
	if err := w.opts.Notify(msg); err != nil {
		w.logOnce("notify", "sd_notify failed", "err", err)
	}
}
