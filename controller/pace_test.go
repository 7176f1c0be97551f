package controller

import (
	"testing"
	"time"
)

// TestPace: the interval widens before the budget runs out, keeping a
// tenth of it for writes, and never narrows below the configured one.
func TestPace(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	hour := now.Add(time.Hour)
	for _, c := range []struct {
		name string
		b    Budget
		want time.Duration
	}{
		{"plenty", Budget{Limit: 5000, Remaining: 5000, Reset: hour, TickCost: 3}, 10 * time.Second},
		{"free ticks", Budget{Limit: 5000, Remaining: 100, Reset: hour, TickCost: 0}, 10 * time.Second},
		// 360 ticks an hour at 16 points: 5,760 > 4,500 spare.
		{"spread", Budget{Limit: 5000, Remaining: 5000, Reset: hour, TickCost: 16}, time.Hour / time.Duration(4500/16)},
		{"spent", Budget{Limit: 5000, Remaining: 400, Reset: hour, TickCost: 3}, time.Hour},
		{"reset soon", Budget{Limit: 5000, Remaining: 0, Reset: now.Add(5 * time.Second), TickCost: 3}, 10 * time.Second},
	} {
		if got := Pace(10*time.Second, c.b, now); got != c.want {
			t.Errorf("%s: Pace = %s; want %s", c.name, got, c.want)
		}
	}
}
