package tmuxview

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/legion-dev/legion/activation/api"
)

// FollowOptions configure Follow, the follower behind `legion tmux TEAM`
// (its --follow window).
type FollowOptions struct {
	Team string       // team whose live sessions get windows
	View View         // the tmux session (legion-<short>) and server
	Bin  string       // the legion binary each window runs `attach` with
	Log  *slog.Logger // nil: discard
}

// SessionWindows are the windows the view of team should have: one per live
// session (not ended: exited, failed or lost) of the team, named <issue>-<mode> (the
// session name for `legion spawn` sessions), coloured by mode, running
// `BIN attach <session>`.
func SessionWindows(team, bin string, sessions []api.Session) []Window {
	var out []Window
	for _, s := range sessions {
		if s.Team != team || s.State.Ended() {
			continue
		}
		name := s.Name
		if s.Issue != "" && s.Mode != "" {
			name = s.Issue + "-" + s.Mode
		}
		out = append(out, Window{Name: name, Role: s.Mode, Argv: []string{bin, "attach", s.Name}})
	}
	return out
}

// errViewClosed ends Follow's stream when its tmux session is gone.
var errViewClosed = errors.New("tmux session closed")

// Follow keeps the view in step with the team's sessions as the
// helper pushes them (sessions.watch, followed across helper restarts):
// at every event it adds the windows of sessions that went live and kills
// those of sessions that ended. It returns nil when ctx ends or the view's
// tmux session was closed (closing it is how a person ends the view). It
// runs in the view's own first window (`legion tmux --follow`), never in
// the helper, so the tmux server is never a child of the helper and
// outlives its restarts. A sync that fails is logged; the next event
// syncs again.
func Follow(ctx context.Context, o FollowOptions) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	sessions := map[string]api.Session{}
	err := api.FollowSessions(ctx, api.WatchArgs{Team: o.Team}, func(ev api.SessionEvent) error {
		if ev.Type == api.EventSnapshot {
			clear(sessions)
			for _, s := range ev.Sessions {
				sessions[s.Name] = s
			}
		} else if ev.Session != nil {
			sessions[ev.Session.Name] = *ev.Session
		}
		exists, err := o.View.Exists(ctx)
		switch {
		case err != nil:
			o.Log.Warn("tmux view check failed", "view", o.View.Session, "err", err)
			return nil
		case !exists:
			return errViewClosed
		}
		ss := slices.SortedFunc(maps.Values(sessions), func(a, b api.Session) int { return strings.Compare(a.Name, b.Name) })
		if err := o.View.Sync(ctx, SessionWindows(o.Team, o.Bin, ss)); err != nil && ctx.Err() == nil {
			o.Log.Warn("tmux view sync failed", "view", o.View.Session, "err", err)
		}
		return nil
	}, func(err error) {
		o.Log.Debug("session events: the stream broke; subscribing again", "err", err)
	})
	if errors.Is(err, errViewClosed) {
		o.Log.Info("tmux view closed", "view", o.View.Session, "team", o.Team)
		return nil
	}
	return err
}
