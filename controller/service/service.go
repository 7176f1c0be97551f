// Package service runs a team's controller as the main process of
// legion@<team>.service: the auto kind's collect → decide → apply loop fed
// by the helper and woken by the helper's session events (sessions.watch),
// its watchdog fed from the loop's heartbeat, and, on `systemctl --user
// stop`, the stop of the team's workers.
//
// It reaches systemd only through the helper: it opens no D-Bus
// connection of its own (package units is used for unit names only;
// `go list -deps` still shows godbus through those names and, until the
// helper's API has a package of its own, through activation).
//
// It must never stop workers on a crash, a watchdog restart or a restart
// job: workers are their own units and outlive the controller.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/legion-dev/legion/activation"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/team"
)

// DefaultInterval is how often the auto controller ticks when no unit event
// wakes it sooner.
const DefaultInterval = 10 * time.Second

// Options configure Run.
type Options struct {
	Team       *team.Team
	ConfigPath string        // the legion.toml the helper reads the team from
	Interval   time.Duration // DefaultInterval when zero
	Log        *slog.Logger
}

// Run runs the auto controller until ctx ends. Then, if systemd is stopping
// legion@<team> for good (a "stop" job, not a restart), it stops the team's
// workers before returning.
func Run(ctx context.Context, o Options) error {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	wake := make(chan struct{}, 1)
	fctx, stopFollowing := context.WithCancel(ctx)
	followed := make(chan struct{})
	// Ends when fctx does: at the end of Run.
	go func() {
		defer close(followed)
		followSessions(fctx, o.Team.Name, wake, o.Log)
	}()
	defer func() {
		stopFollowing()
		<-followed
	}()
	sessions := &helperSessions{team: o.Team.Name}
	disp := &helperDispatcher{config: o.ConfigPath, team: o.Team.Name}
	ready := false
	err := controller.Loop(ctx, controller.LoopOptions{
		Sources:     o.Team.Sources(sessions),
		Dispatcher:  disp,
		Interval:    o.Interval,
		Wake:        wake,
		TickTimeout: tickTimeout(),
		Log:         o.Log,
		Heartbeat: func(r controller.TickResult) {
			state := fmt.Sprintf("STATUS=team %s: %d applied, %d failed in the last tick", o.Team.Name, r.Applied, r.Failed)
			if r.Err != nil {
				state = "STATUS=team " + o.Team.Name + ": " + r.Err.Error()
			}
			msg := "WATCHDOG=1\n" + state
			if !ready {
				msg, ready = "READY=1\n"+msg, true
			}
			if _, err := daemon.SdNotify(false, msg); err != nil {
				o.Log.Warn("sd_notify failed", "err", err)
			}
		},
	})
	if err != nil {
		return err
	}
	cleanup, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return stopWorkersIfStopping(cleanup, o.Team.Name, o.Team.ShortID(), o.Log)
}

// tickTimeout is half the unit's watchdog interval (WatchdogSec=), so a
// tick that hangs on the tracker or the helper fails in time for the
// heartbeat after it to feed the watchdog; without a watchdog it is
// controller.DefaultTickTimeout. The first tick comes before READY=1, so
// this also keeps it within the start timeout.
func tickTimeout() time.Duration {
	if wd, err := daemon.SdWatchdogEnabled(false); err == nil && wd > 0 {
		return wd / 2
	}
	return controller.DefaultTickTimeout
}

// stopWorkersIfStopping stops the team's worker units when the controller
// unit itself has a "stop" job pending: `systemctl --user stop
// legion@<team>`. A restart job, a crash or the watchdog leave them alone.
// Outside systemd (no such unit) nothing is stopped. The helper asks the
// manager and stops them (team.stop).
func stopWorkersIfStopping(ctx context.Context, team, short string, log *slog.Logger) error {
	c, err := activation.Dial(ctx)
	if err != nil {
		return fmt.Errorf("stop the workers of team %s if it is stopping: %w", team, err)
	}
	defer c.Close()
	res, err := c.TeamStop(ctx, activation.TeamStopArgs{Team: team, Short: short, IfStopping: true})
	if err != nil {
		return fmt.Errorf("stop the workers of team %s if it is stopping: %w", team, err)
	}
	if res.Job != "stop" {
		log.Info("leaving the team's workers running", "job", res.Job)
		return nil
	}
	log.Info("stopped the team's workers", "units", res.Stopped)
	return nil
}

// helperSessions reads the team's sessions from the helper, dialling it for
// each tick: the helper may exit when idle, and the socket starts it again.
type helperSessions struct {
	team string
}

func (h *helperSessions) Sessions(ctx context.Context) ([]controller.Session, error) {
	c, err := activation.Dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return TeamSessions(ctx, c, h.team)
}

// NewSessionSource returns the SessionSource that lists team's sessions
// through the helper.
func NewSessionSource(team string) controller.SessionSource {
	return &helperSessions{team: team}
}

// TeamSessions lists the sessions of team through the helper client c.
func TeamSessions(ctx context.Context, c *activation.Client, team string) ([]controller.Session, error) {
	res, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	return activation.ControllerSessions(team, res.Sessions), nil
}

// helperDispatcher starts workers and relays input through the helper.
type helperDispatcher struct {
	config, team string
}

func (d *helperDispatcher) Dispatch(ctx context.Context, issue string, mode controller.Mode) error {
	c, err := activation.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Dispatch(ctx, activation.DispatchArgs{Config: d.config, Team: d.team, Issue: issue, Mode: string(mode)})
	return err
}

func (d *helperDispatcher) Send(ctx context.Context, session, text string) error {
	c, err := activation.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Send(ctx, session, text, false)
	return err
}

// NewDispatcher returns the Dispatcher that goes through the helper.
func NewDispatcher(configPath, teamName string) controller.Dispatcher {
	return &helperDispatcher{config: configPath, team: teamName}
}
