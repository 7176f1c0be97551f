package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Watch subscribes to session events (sessions.watch) on c's connection
// and calls fn with each: the snapshot first, then every change, in
// order. It returns when ctx ends (ctx.Err()), when fn returns an error
// (that error, wrapped), or when the stream breaks: the helper stopped
// (ErrUnavailable, or a transport error), or c fell behind (ErrLagged).
// The connection is unusable after; FollowSessions dials again.
func (c *Client) Watch(ctx context.Context, args WatchArgs, fn func(SessionEvent) error) error {
	onEvent := func(raw json.RawMessage) error {
		var ev SessionEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("decode session event: %w", err)
		}
		if err := fn(ev); err != nil {
			return &handlerError{err}
		}
		return nil
	}
	resp, fds, err := c.retry(ctx, CmdSessionsWatch, args, onEvent)
	closeAll(fds)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s: the helper ended the stream with %s", CmdSessionsWatch, resp.Result)
}

// handlerError is an error of Watch's fn, which ends FollowSessions too.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// followBackoff bounds the wait between two subscriptions of
// FollowSessions.
const followBackoff = time.Second

// FollowSessions is Watch that lasts: whenever the stream breaks (the
// helper was stopped, restarted or killed, or this follower fell behind)
// it dials the helper again and subscribes anew. Every new stream starts
// with a snapshot, which replaces all that fn knew. onBreak, when not
// nil, is told why each stream broke. FollowSessions returns only when
// ctx ends (nil) or fn fails (fn's error).
func FollowSessions(ctx context.Context, args WatchArgs, fn func(SessionEvent) error, onBreak func(error)) error {
	wait := 10 * time.Millisecond
	for {
		c, err := Dial(ctx)
		if err == nil {
			err = c.Watch(ctx, args, func(ev SessionEvent) error {
				wait = 10 * time.Millisecond // a stream that delivers is a fresh start
				return fn(ev)
			})
			c.Close()
		}
		if ctx.Err() != nil {
			return nil
		}
		if he := (*handlerError)(nil); errors.As(err, &he) {
			return he.err
		}
		if onBreak != nil {
			onBreak(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(wait*2, followBackoff)
	}
}

// TeamStop stops a team's worker units (legion-<short>-*.service); with
// args.IfStopping only when its controller unit has a stop job pending.
func (c *Client) TeamStop(ctx context.Context, args TeamStopArgs) (TeamStopResult, error) {
	var r TeamStopResult
	err := c.Call(ctx, CmdTeamStop, args, &r)
	return r, err
}
