package service

import (
	"context"
	"log/slog"

	"github.com/legion-dev/legion/activation/api"
)

// followSessions wakes the loop whenever one of the team's sessions
// changes (starts, exits, fails, waits on a human, runs again), so the
// controller reacts at once instead of at the next interval. It follows
// the helper's push stream, sessions.watch, and subscribes again whenever
// the stream breaks (the helper restarted, or this follower fell behind);
// a new stream's snapshot wakes the loop too, since changes may have been
// missed in between. It returns when ctx ends.
func followSessions(ctx context.Context, team string, wake chan<- struct{}, log *slog.Logger) {
	api.FollowSessions(ctx, api.WatchArgs{Team: team}, func(ev api.SessionEvent) error {
		select {
		case wake <- struct{}{}:
		default: // a wake is pending already
		}
		return nil
	}, func(err error) {
		log.Debug("session events: the stream broke; subscribing again", "err", err)
	})
}
