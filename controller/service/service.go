// Package service runs a team's controller as the main process of
// legion@<team>.service: the auto kind's collect → decide → apply loop fed
// by the helper and woken by the helper's session events (sessions.watch),
// by others' writes to its local tracker (inotify on the store's
// directory, so an answer a person gives is relayed at once; Linear is
// read at the interval) and by the team's wake file (team.WakeFile, which
// the dashboard replaces on a GitHub webhook delivery), its watchdog fed
// from the loop's heartbeat, and, on `systemctl --user stop`, the stop of
// the team's workers.
//
// It reaches systemd only through the helper: it links no D-Bus client
// and no units.Manager, so it cannot open a connection to the user
// manager of its own; unit names come from units/unitname
// (internal/layout asserts it for controller/...).
//
// It must never stop workers on a crash, a watchdog restart or a restart
// job: workers are their own units and outlive the controller.
//
// It plans the team's workers itself (controller/team) and reaches the
// helper through its client, package activation/api; it never links the
// helper's server, package activation, nor the worker daemon, package
// ptyworker: it talks to workers through ptyworker/proto, and the
// controller of kind agent, which hosts a worker, is package
// controller/agenthost (internal/layout asserts both).
package service

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/controller/team"
)

// DefaultInterval is how often the auto controller ticks when no unit event
// wakes it sooner.
const DefaultInterval = 10 * time.Second

// Options configure Run.
type Options struct {
	Team     *team.Team
	Worker   config.Worker // the [worker] settings its workers are launched with
	Interval time.Duration // DefaultInterval when zero
	Log      *slog.Logger
	// Notifier, when not nil, is told what waits for a person after
	// every tick, and sends while Run runs (package controller/notify).
	Notifier *notify.Notifier
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
	sources, disp, own := tickParts(o)
	watched := make(chan struct{})
	// Ends when fctx does, or at once for a tracker that is not local
	// (Linear is read at the interval).
	go func() {
		defer close(watched)
		if own != nil {
			followTracker(fctx, own.path, wake, own, o.Log)
		}
	}()
	// Ends when fctx does. Every team follows its wake file, which the
	// dashboard replaces on a GitHub webhook delivery (team.WakeFile says
	// why a file): the interval stays the fallback.
	wakeFollowed := make(chan struct{})
	go func() {
		defer close(wakeFollowed)
		followWake(fctx, team.WakePath(o.Team.StateDir), o.Team.Tracker, wake, o.Log)
	}()
	defer func() {
		stopFollowing()
		<-followed
		<-watched
		<-wakeFollowed
	}()
	// Ends when fctx does: at the end of Run.
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		if o.Notifier != nil {
			_ = o.Notifier.Run(fctx) // returns nil when fctx ends
		}
	}()
	defer func() { stopFollowing(); <-notified }()
	ready := false
	err := controller.Loop(ctx, controller.LoopOptions{
		Sources:     sources,
		Dispatcher:  disp,
		Interval:    o.Interval,
		Wake:        wake,
		TickTimeout: tickTimeout(),
		Log:         o.Log,
		Heartbeat: func(r controller.TickResult) {
			if o.Notifier != nil && r.Err == nil {
				if err := o.Notifier.Observe(r.Waits, time.Now()); err != nil {
					o.Log.Warn("notify: record the waits", "err", err)
				}
			}
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
	return StopWorkersIfStopping(cleanup, o.Team.Name, o.Team.ShortID(), o.Log)
}

// tickParts are what each of Run's ticks (controller.Tick) collects from
// and dispatches through: the team's sources with its sessions read from
// the helper, the room learnt from its agents, and, for a local tracker,
// its writes recorded (own) so that following the store's directory does
// not wake the loop for them.
func tickParts(o Options) (controller.Sources, *helperDispatcher, *ownWrites) {
	sources := o.Team.Sources(&helperSessions{team: o.Team.Name})
	sources.Room = o.Team.Room(true, o.Log)
	sources.Dispatched.Log = o.Log
	var own *ownWrites
	if s, ok := o.Team.Tracker.(*local.Store); ok {
		own = &ownWrites{path: s.Path()}
		sources.Tracker = ownTracker{Store: s, own: own}
	}
	return sources, &helperDispatcher{team: o.Team, worker: o.Worker, log: o.Log}, own
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

// StopWorkersIfStopping stops the team's worker units when the controller
// unit itself has a "stop" job pending: `systemctl --user stop
// legion@<team>`. A restart job, a crash or the watchdog leave them alone.
// Outside systemd (no such unit) nothing is stopped. The helper asks the
// manager and stops them (team.stop).
func StopWorkersIfStopping(ctx context.Context, team, short string, log *slog.Logger) error {
	c, err := api.Dial(ctx)
	if err != nil {
		return fmt.Errorf("stop the workers of team %s if it is stopping: %w", team, err)
	}
	defer c.Close()
	res, err := c.TeamStop(ctx, api.TeamStopArgs{Team: team, Short: short, IfStopping: true})
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
	c, err := api.Dial(ctx)
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
func TeamSessions(ctx context.Context, c *api.Client, team string) ([]controller.Session, error) {
	res, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	return controllerSessions(team, res.Sessions), nil
}

// ControllerSessions are the sessions of team among ss (as the helper
// lists them), as the controller sees them: for a client that has the
// sessions already, e.g. from sessions.watch.
func ControllerSessions(team string, ss []api.Session) []controller.Session {
	return controllerSessions(team, ss)
}

// controllerSessions are the sessions of team among ss, as the controller
// sees them.
func controllerSessions(team string, ss []api.Session) []controller.Session {
	var out []controller.Session
	for _, s := range ss {
		if s.Team != team {
			continue
		}
		cs := controller.Session{
			Name: s.Name, Unit: s.Unit, Issue: s.Issue, Mode: controller.Mode(s.Mode), Session: s.ID,
			State: controller.SessionState(s.State), Question: s.Question, Cause: s.Cause, Agent: s.Agent,
		}
		if s.State == api.StateExited && s.Exit != nil && s.Exit.Code != nil && *s.Exit.Code == 0 {
			cs.Completed = s.Exit.Time
		}
		out = append(out, cs)
	}
	return out
}

// helperDispatcher plans workers and starts them, and relays input,
// through the helper.
type helperDispatcher struct {
	team   *team.Team
	worker config.Worker
	log    *slog.Logger // nil: no log
}

func (d *helperDispatcher) Dispatch(ctx context.Context, issue string, mode controller.Mode) error {
	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = dispatch(ctx, c, d.team, d.worker, issue, mode, d.log)
	return err
}

// Dispatch plans the worker of issue in mode for team t (its worktree, its
// deterministic session, the team's agent argv for a new and a resumed
// run: team.PlanDispatch) and has the helper behind c start it with the
// team's supervision values and w's worker settings. A worker that is
// already live is left alone (the result's Started is false); a live
// session of another team that holds the name is an api.ErrExists.
func Dispatch(ctx context.Context, c *api.Client, t *team.Team, w config.Worker, issue string, mode controller.Mode) (api.SpawnResult, error) {
	return dispatch(ctx, c, t, w, issue, mode, nil)
}

// dispatch is Dispatch, logging to log (when not nil) why a policy
// "sandbox" runs the agent unconfined, with its prompts on.
func dispatch(ctx context.Context, c *api.Client, t *team.Team, w config.Worker, issue string, mode controller.Mode, log *slog.Logger) (api.SpawnResult, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return api.SpawnResult{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	d, err := t.PlanDispatch(ctx, issue, mode, home)
	if err != nil {
		return api.SpawnResult{}, err
	}
	if d.PolicyNote != "" && log != nil {
		log.Warn("the sandbox policy runs this agent as allowlist", "issue", issue, "mode", string(mode), "why", d.PolicyNote)
	}
	res, err := c.Spawn(ctx, t.DispatchLaunch(d, w))
	if err != nil {
		return api.SpawnResult{}, fmt.Errorf("dispatch %s in mode %s: %w", issue, mode, err)
	}
	return res, nil
}

func (d *helperDispatcher) Respond(ctx context.Context, session, text, permission, by string) error {
	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Respond(ctx, api.RespondArgs{Name: session, Text: text, Decision: permission, By: by})
	return err
}

func (d *helperDispatcher) End(ctx context.Context, session, reason string) error {
	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.End(ctx, session, reason)
	return err
}

// SessionOf names the session and unit of issue's worker in mode, for the
// controller's log (controller.SessionNamer).
func (d *helperDispatcher) SessionOf(issue string, mode controller.Mode) (string, string) {
	id, unit, err := d.team.SessionOf(issue, mode)
	if err != nil {
		return "", ""
	}
	return id.String(), unit
}

// NewDispatcher returns the Dispatcher that plans in this process and
// starts workers through the helper.
func NewDispatcher(t *team.Team, w config.Worker) controller.Dispatcher {
	return &helperDispatcher{team: t, worker: w}
}
