package activation

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/tmuxview"
)

// TmuxOptions configure RunTmux, the loop behind `legion tmux TEAM`.
type TmuxOptions struct {
	Team string        // team whose live sessions get windows
	View tmuxview.View // the tmux session (legion-<short>) and server
	Bin  string        // the legion binary each window runs `attach` with
	// Interval is the time between syncs; 2 s when zero.
	Interval time.Duration
	// Once syncs once and returns.
	Once bool
	Log  *slog.Logger
}

// TmuxWindows are the windows the view of team should have: one per live
// session (not exited or failed) of the team, named <issue>-<mode> (the
// session name for `legion spawn` sessions), coloured by mode, running
// `BIN attach <session>`.
func TmuxWindows(team, bin string, sessions []api.Session) []tmuxview.Window {
	var out []tmuxview.Window
	for _, s := range sessions {
		if s.Team != team || s.State == api.StateExited || s.State == api.StateFailed {
			continue
		}
		name := s.Name
		if s.Issue != "" && s.Mode != "" {
			name = s.Issue + "-" + s.Mode
		}
		out = append(out, tmuxview.Window{Name: name, Role: s.Mode, Argv: []string{bin, "attach", s.Name}})
	}
	return out
}

// SyncTmux lists the helper's sessions once and syncs the view with them.
func SyncTmux(ctx context.Context, c *api.Client, o TmuxOptions) error {
	res, err := c.List(ctx)
	if err != nil {
		return fmt.Errorf("tmux view of team %s: %w", o.Team, err)
	}
	return o.View.Sync(ctx, TmuxWindows(o.Team, o.Bin, res.Sessions))
}

// RunTmux keeps the view in step with the team's sessions until ctx ends
// (or after one sync with Once). It runs in the caller's process (the
// foreground `legion tmux`), not in the helper: when it stops, the tmux
// session stays as it was last synced. A sync that fails is logged and
// retried on the next tick; only the first one's error is returned.
func RunTmux(ctx context.Context, o TmuxOptions) error {
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	first := true
	for {
		err := syncOnce(ctx, o)
		if first && err != nil {
			return err
		}
		first = false
		if o.Once {
			return nil
		}
		if err != nil {
			o.Log.Warn("tmux view sync failed", "team", o.Team, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Interval):
		}
	}
}

func syncOnce(ctx context.Context, o TmuxOptions) error {
	c, err := api.Dial(ctx)
	if err != nil {
		return fmt.Errorf("tmux view of team %s: %w", o.Team, err)
	}
	defer c.Close()
	return SyncTmux(ctx, c, o)
}
