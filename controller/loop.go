package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/legion-dev/legion/activation/api"
)

// LoopOptions configure Loop, the auto controller.
type LoopOptions struct {
	Sources    Sources
	Dispatcher Dispatcher
	// Interval between ticks when nothing happens; Wake makes a tick happen
	// sooner (unit state changes, for one).
	Interval time.Duration
	Wake     <-chan struct{}
	// TickTimeout bounds one tick (DefaultTickTimeout when zero): a tracker
	// or helper that hangs fails the tick, which the next one retries. Keep
	// it under the watchdog interval, which only completed ticks feed.
	TickTimeout time.Duration
	// Heartbeat is called after every completed tick, successful or not:
	// the caller feeds systemd's watchdog from it, so a controller stuck in
	// a tick is restarted by systemd.
	Heartbeat func(TickResult)
	Log       *slog.Logger
}

// DefaultTickTimeout bounds a tick when LoopOptions.TickTimeout is zero.
const DefaultTickTimeout = 2 * time.Minute

// TickResult says what one tick did.
type TickResult struct {
	Applied int   // decisions that changed something
	Failed  int   // decisions whose application failed
	Err     error // collection error, if the tick could not decide at all
	// Waits are what waits for a person after the tick (see Wait); with
	// Err set they are unknown, not none.
	Waits []Wait
}

// Tick collects, decides and applies once.
func Tick(ctx context.Context, src Sources, disp Dispatcher, log *slog.Logger) TickResult {
	st, tracked, err := Collect(ctx, src)
	if err != nil {
		return TickResult{Err: err}
	}
	var r TickResult
	var applied []Decision
	for i, d := range Decide(st) {
		if (d.Action == ActionSkip || d.Action == ActionNone) && d.MoveTo == "" && len(d.RemoveLabels) == 0 && len(d.AddLabels) == 0 {
			if st.Issues[i].Dispatched != nil && src.Dispatched != nil && !dispatchLive(st.Issues[i]) {
				// Nothing left of that dispatch to make: it never
				// completed. (One whose worker is live waits for its end:
				// decideIssue.)
				if err := src.Dispatched.Forget(d.Issue); err != nil {
					log.Warn("forget a dispatch record", "issue", d.Issue, "err", err)
				}
			}
			continue
		}
		// Logged before it is applied: the helper's and the worker's
		// lines of a dispatch follow the decision's in the journal.
		ilog := issueLogger(log, disp, d, st.Issues[i]).With("action", string(d.Action))
		ilog.Info("apply", "reason", d.Reason)
		err := Apply(ctx, src, disp, d, st.Issues[i])
		if _, person := errors.AsType[*api.PersonError](err); person || errors.Is(err, api.ErrIssueHeld) {
			// Not a wait that ends by itself: a worker unit the helper
			// cannot reach runs for the issue, or a file of the user's
			// keeps the agent from starting. A person acts.
			ilog.Warn("the dispatch waits for a person: escalated", "err", err)
			d = escalateRefused(d, err)
			err = Apply(ctx, src, disp, d, st.Issues[i])
		}
		if errors.Is(err, api.ErrNoRoom) {
			// Another team's controller took the machine's last slot since
			// this tick's count: the helper holds the cap; waiting for room.
			ilog.Info("waiting for room: the helper refused the start", "err", err)
		} else if errors.Is(err, api.ErrIssueBusy) {
			// The issue's last worker unit has not ended (systemd still
			// stops it, or restarts it): its phase is not over yet.
			ilog.Info("waiting for the issue's last worker to end: the helper refused the start", "err", err)
		} else if err != nil {
			r.Failed++
			ilog.Warn("apply failed", "err", err)
			continue
		}
		r.Applied++
		applied = append(applied, d)
	}
	r.Waits = waits(st, tracked, applied)
	return r
}

// issueLogger scopes log to the issue of decision d: the issue, the mode
// of the worker it starts or acts on, and that worker's session and unit
// when disp names them (SessionNamer), so that the journal's
// LEGION_ISSUE=... match finds the controller's lines with the helper's and
// the worker's (see internal/journal).
func issueLogger(log *slog.Logger, disp Dispatcher, d Decision, is Issue) *slog.Logger {
	args := []any{"issue", d.Issue}
	mode := d.Mode
	if mode == "" && is.Worker != nil {
		mode = is.Worker.Mode
	}
	if mode == "" {
		return log.With(args...)
	}
	args = append(args, "mode", string(mode))
	if n, ok := disp.(SessionNamer); ok {
		if session, unit := n.SessionOf(d.Issue, mode); session != "" {
			args = append(args, "session", session, "unit", unit)
		}
	}
	return log.With(args...)
}

// Loop ticks until ctx ends; it returns nil then. A failing tick is logged
// and retried on the next one: the tracker or the helper being away for a
// while is normal.
func Loop(ctx context.Context, o LoopOptions) error {
	if o.Interval <= 0 {
		return errors.New("controller loop: interval must be positive")
	}
	if o.TickTimeout <= 0 {
		o.TickTimeout = DefaultTickTimeout
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-o.Wake:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		tctx, cancel := context.WithTimeout(ctx, o.TickTimeout)
		r := Tick(tctx, o.Sources, o.Dispatcher, o.Log)
		cancel()
		if r.Err != nil && ctx.Err() == nil {
			o.Log.Warn("tick failed", "err", fmt.Errorf("controller tick: %w", r.Err))
		}
		if o.Heartbeat != nil {
			o.Heartbeat(r)
		}
		next := o.Interval
		if b, ok := o.Sources.Tracker.(Budgeter); ok {
			if bud, ok := b.Budget(); ok {
				next = Pace(o.Interval, bud, time.Now())
				if next > o.Interval {
					o.Log.Info("tracker budget: ticking less often until it resets", "next", next.Round(time.Second),
						"remaining", bud.Remaining, "limit", bud.Limit, "tick_cost", bud.TickCost, "reset", bud.Reset.Format(time.RFC3339))
				}
			}
		}
		t.Reset(next)
	}
}
