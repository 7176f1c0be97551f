// Package agenthost runs a team's controller of kind "agent" (controller =
// "agent" in legion.toml) as the main process of legion@<team>.service:
// the team's controller agent, planned and prepared by the team's agent
// kind, hosted in the pty-worker runtime (package ptyworker) in this very
// process, one pass after another, resuming its one session.
//
// It owns the controller agent's spec and its passes. It is apart from
// package service (the auto kind's loop) because it links the worker
// daemon: service, and the dashboard that reads sessions through it, talk
// to workers only through package ptyworker/proto (internal/layout's
// rules assert it).
//
// Like package service it must never stop workers on a crash, a watchdog
// restart or a restart job (service.StopWorkersIfStopping), and it links
// no D-Bus client and no units.Manager.
package agenthost

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/notify"
	"github.com/legion-dev/legion/controller/service"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/ptyworker"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/unitname"
)

// Options configure Run, the controller of kind "agent".
type Options struct {
	Team   *team.Team
	Worker config.Worker // ring size, startup grace
	// Home is where the agent's ~/.claude lives; RuntimeDir and StateDir
	// are $XDG_RUNTIME_DIR/legion and $XDG_STATE_HOME/legion.
	Home, RuntimeDir, StateDir string
	Version                    string
	Log                        *slog.Logger // nil: discard
	// Notifier, when not nil, is told every WaitsEvery what waits for a
	// person (the issues the agent escalated, failed workers).
	Notifier   *notify.Notifier
	WaitsEvery time.Duration // 0: DefaultWaitsEvery
}

// DefaultWaitsEvery is how often the host looks for waits to announce.
const DefaultWaitsEvery = 15 * time.Second

// Spec is the pty-worker spec of a team's controller agent: its
// deterministic session (UUIDv5 of the team and "controller") in the
// team's workspace, planned and prepared by the team's agent kind (for
// Claude Code: its settings file with the hooks, the dialog answers) and
// watched like any worker. A Claude controller agent's pass ends when its
// turn does (EndWhenIdle): the interactive CLI never exits by itself. Its
// registry and transcript live under StateDir/controllers/<short>, apart
// from the helper's sessions, since legion@<team> and not the helper owns
// it.
func Spec(ctx context.Context, o Options) (*proto.Spec, error) {
	t := o.Team
	kind, err := kinds.For(t.Agent)
	if err != nil {
		return nil, fmt.Errorf("controller agent of team %s: %w", t.Name, err)
	}
	id := claudecode.ControllerSessionID(t.ID)
	env := []string{"LEGION_TEAM=" + t.Name, "LEGION_MODE=controller"} // the worker sets LEGION_SESSION
	if t.ConfigPath != "" {
		env = append(env, config.EnvConfig+"="+t.ConfigPath)
	}
	prompt, err := t.ControllerInstructions(kind.Name(), env)
	if err != nil {
		return nil, fmt.Errorf("controller agent of team %s: %w", t.Name, err)
	}
	as := agent.Session{
		ID: id, Mode: "controller",
		Vars: config.Vars{SessionID: id.String(), Prompt: prompt, Mode: "controller", Workspace: t.Workspace},
		Cwd:  t.Workspace, Repo: t.Workspace, Home: o.Home,
		Dir:    filepath.Join(t.StateDir, "agents", "controller"),
		Legion: t.Legion, Env: env,
	}
	l, err := kind.Plan(as)
	if err != nil {
		return nil, fmt.Errorf("controller agent of team %s: %w", t.Name, err)
	}
	if l, err = kind.Prepare(ctx, as, l); err != nil {
		return nil, fmt.Errorf("controller agent of team %s: %w", t.Name, err)
	}
	unit, err := unitname.ControllerUnit(t.Name)
	if err != nil {
		return nil, err
	}
	token, err := proto.NewToken()
	if err != nil {
		return nil, err
	}
	s := &proto.Spec{
		Version: proto.SpecVersion, SessionID: id.String(), Name: "controller", Team: t.Name, TeamShort: t.ShortID(),
		Mode: "controller", Role: "controller", Cwd: t.Workspace, Env: append(env, l.Env...),
		ArgvNew: l.ArgvNew, ArgvResume: l.ArgvResume,
		Agent: l.Agent, EndWhenIdle: l.Agent == proto.AgentClaude,
		SessionFile: l.SessionFile,
		StaleAfter:  proto.Duration(t.StaleAfter),
		RingSize:    o.Worker.RingSize,
		Token:       token, DaemonInstanceID: "legion@" + t.ShortID(), Unit: unit,
		Paths: proto.Paths{RuntimeDir: o.RuntimeDir, StateDir: filepath.Join(o.StateDir, "controllers", t.ShortID())},
	}
	if l.SessionFile != "" {
		s.StartupGrace = proto.Duration(o.Worker.StartupGrace)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("controller agent of team %s: %w", t.Name, err)
	}
	return s, nil
}

// Run hosts the team's controller agent in the pty-worker runtime, as
// the main process of legion@<team>: the worker sends READY=1 and feeds the
// unit's watchdog only while the agent's session file is fresh, so systemd
// restarts a stale controller agent, which then resumes its session. When
// the agent ends a pass (a Claude agent: its turn ended, and its worker
// ended it; another kind: by exiting 0), the next pass starts after the
// team's cooldown, resuming the same session; a failing agent ends Run with
// an error, for systemd to restart. When ctx ends (SIGTERM), the team's
// workers are stopped if and only if systemd is stopping legion@<team>.
func Run(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Notifier != nil {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = o.Notifier.Run(wctx) }()
		go watchWaits(wctx, o)
	}
	for ctx.Err() == nil {
		// Planned afresh for every pass: a pass that was ended as
		// completed is never run again with its token.
		spec, err := Spec(ctx, o)
		if err != nil {
			return err
		}
		err = ptyworker.Run(ctx, spec, ptyworker.Options{Logger: o.Log, Version: o.Version})
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(o.Team.RestartCooldown):
		}
	}
	cleanup, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return service.StopWorkersIfStopping(cleanup, o.Team.Name, o.Team.ShortID(), o.Log)
}

// watchWaits tells o.Notifier what waits for a person, every
// o.WaitsEvery until ctx ends: the controller agent escalates by itself
// (user-input-needed and its comment), so the host reads the tracker and
// the sessions as the auto controller does, and announces the same waits.
func watchWaits(ctx context.Context, o Options) {
	every := cmp.Or(o.WaitsEvery, DefaultWaitsEvery)
	src := controller.Sources{Tracker: o.Team.Tracker, Sessions: service.NewSessionSource(o.Team.Name), IdleGrace: o.Team.IdleGrace}
	for {
		st, tracked, err := controller.Collect(ctx, src)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			o.Log.Warn("notify: the tracker or the sessions cannot be read; waits are announced when they can", "err", err)
		default:
			if err := o.Notifier.Observe(controller.Waits(st, tracked), time.Now()); err != nil {
				o.Log.Warn("notify: the waits could not be recorded", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
