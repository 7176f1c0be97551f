package controller

import "time"

// Budget is what is left of a tracker's API budget for the current
// window, as its last answer said.
type Budget struct {
	Limit, Remaining int       // points (or requests) per window, and left of them
	Reset            time.Time // when Remaining is Limit again
	TickCost         int       // what the last tick's board cost
}

// Budgeter is a Tracker that knows its API budget (GitHub's GraphQL
// rateLimit). ok is false until it has heard.
type Budgeter interface {
	Budget() (b Budget, ok bool)
}

// Pace is the time until the next tick: interval, or longer when ticks
// every interval would spend b before it resets. A tenth of the limit is
// kept for the writes (labels, comments, the agents' tracker commands),
// and the rest spread evenly over what is left of the window: the interval
// widens before the budget runs out, not after it did.
func Pace(interval time.Duration, b Budget, now time.Time) time.Duration {
	window := b.Reset.Sub(now)
	if b.TickCost <= 0 || b.Limit <= 0 || window <= interval {
		return interval
	}
	spare := b.Remaining - b.Limit/10
	if spare < b.TickCost {
		return window // nothing left for a tick: wait for the reset
	}
	ticks := spare / b.TickCost
	if need := int(window / interval); need <= ticks {
		return interval
	}
	return window / time.Duration(ticks)
}
