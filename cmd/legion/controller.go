package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation"
	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/agenthost"
	"github.com/legion-dev/legion/controller/service"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/internal/journal"
	"github.com/legion-dev/legion/units/unitname"
)

// startOwnHelper runs a helper in this process for a controller with no
// user manager (--with-helper): no systemd, target t followed from its
// start, listening on the socket the controller dials. It returns once
// the helper is ready (READY=1); stop ends it and waits for it. A helper
// that ends before stop calls died: with the cause, so the controller
// ends too (and its pod starts again) instead of ticking without it.
func startOwnHelper(parent context.Context, t api.KubeTarget, log *slog.Logger, died context.CancelCauseFunc) (stop func(), err error) {
	ready := make(chan struct{})
	var once sync.Once
	h, err := activation.New(activation.Options{
		Logger: log.With("component", "helper"), NoSystemd: true, KubeTargets: []api.KubeTarget{t},
		Notify: func(state string) {
			if strings.HasPrefix(state, "READY=1") {
				once.Do(func() { close(ready) })
			}
		},
	})
	if err != nil {
		return nil, err
	}
	// Not ended by the signal that ends the controller: the controller
	// still asks it (team.stop) on its way out; stop ends it after.
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	done := make(chan error, 1)
	// Ends when ctx is cancelled, by stop.
	go func() { done <- h.Run(ctx) }()
	select {
	case <-ready:
	case <-parent.Done(): // stopped before the helper was ready
		cancel()
		<-done
		return nil, parent.Err()
	case err := <-done:
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("the controller's own helper (--with-helper): %w", err)
	}
	ended := make(chan struct{})
	var runErr error
	// Ends when Run does: by stop, or when the helper dies.
	go func() {
		defer close(ended)
		runErr = <-done
		if ctx.Err() == nil {
			why := runErr
			if why == nil {
				why = errors.New("it returned before it was stopped")
			}
			died(fmt.Errorf("the controller's own helper (--with-helper) ended: %w", why))
		}
	}()
	return func() {
		cancel()
		<-ended
		if runErr != nil {
			log.Error("the controller's own helper ended", "err", runErr)
		}
	}, nil
}

func newControllerCmd(g *globals) *cobra.Command {
	var (
		interval   string
		withHelper bool
	)
	cmd := &cobra.Command{
		Use:   "controller TEAM",
		Short: "Run a team's controller (what legion@TEAM.service runs)",
		Long: `Run the team's controller in the foreground: collect the team's state, decide
per issue which agent phase runs next, and dispatch workers through the helper,
on an interval and whenever the helper reports that one of the team's sessions
changed (its sessions.watch stream: started, exited, failed, waiting). It tells
systemd READY=1 after its first tick and feeds its watchdog after every tick.
A tick may take half the watchdog interval (WatchdogSec=, 60s by default),
two minutes without one: a tracker or helper that does not answer by then
fails the tick, and the next tick tries again.

TEAM may be given escaped, as systemd passes %i: legion@.service runs
"legion controller %i". On SIGTERM from "systemctl --user stop legion@TEAM" it
stops the team's workers first; a crash, a watchdog restart or a restart job
leaves them running.

With engine = "kubernetes", each phase runs as a Job on the team's cluster:
its pod clones kubernetes.repository onto the issue's volume before the agent
starts (legion worktree clone, legion worktree ensure), with a legion.toml of
its own (the team's tracker, its key from kubernetes.secret), and the finisher
merges and pushes there. It needs a Linear or GitHub tracker (the pods cannot
reach the local tracker's files) and agent.kind = "custom" for now (README:
Kubernetes).

With controller = "agent" in the team's config, the controller is an agent
(the team's agent argv, prompted with the controller's instructions) hosted in
the pty-worker runtime: its session file feeds this unit's watchdog, so
systemd restarts a stale controller agent, which resumes its session.

With --with-helper (the controller's pod on a cluster, which has no user
manager: contrib/kubernetes runs legion-kube lead -- legion controller TEAM
--with-helper), a helper runs in this process, listening on
$XDG_RUNTIME_DIR/legion/legion.sock: it talks to the team's cluster with the
pod's service account, follows the team's namespace before the first tick,
and refuses sessions on this machine. It needs engine = "kubernetes".`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			ctx := cmd.Context()
			cfg, err := config.Load(g.configPath)
			if err != nil {
				return err
			}
			name := args[0]
			t, ok := cfg.Team(name)
			if !ok {
				if un, err := unitname.Unescape(name); err == nil {
					t, ok = cfg.Team(un)
				}
			}
			if !ok {
				return fmt.Errorf("team %q is not in %s (see `legion team list`)", name, cfg.Path)
			}
			if err := team.CheckCluster(t); err != nil {
				return err
			}
			d, err := config.ParseDuration(interval)
			if err != nil {
				return usageError{fmt.Errorf("--interval: %w", err)}
			}
			state, err := config.StateDir()
			if err != nil {
				return err
			}
			tm, err := team.Open(t, cfg.Path, state)
			if err != nil {
				return err
			}
			if tm.Legion, err = os.Executable(); err != nil {
				return fmt.Errorf("find the legion executable, which agents' hooks run: %w", err)
			}
			log := journal.NewLogger(journal.IdentLegion, cfg.Helper.LogLevel).With("team", t.Name)
			if withHelper {
				kt := t.KubeTarget()
				if kt == nil {
					return usageError{fmt.Errorf("--with-helper: team %q has engine %q in %s; want engine = \"kubernetes\" (a helper without systemd starts sessions only on a cluster)", t.Name, t.Engine, cfg.Path)}
				}
				var died context.CancelCauseFunc
				ctx, died = context.WithCancelCause(ctx)
				defer died(nil)
				stop, err := startOwnHelper(ctx, *kt, log, died)
				if err != nil {
					return err
				}
				defer func() {
					stop()
					if c := context.Cause(ctx); err == nil && c != nil && !errors.Is(c, context.Canceled) {
						err = c
					}
				}()
			}
			n, err := newNotifier(tm, cfg, log)
			if err != nil {
				return err
			}
			if t.Controller == config.ControllerAgent {
				home, err := os.UserHomeDir()
				if err != nil {
					return err
				}
				runtime, err := config.RuntimeDir()
				if err != nil {
					return err
				}
				return agenthost.Run(ctx, agenthost.Options{
					Team: tm, Worker: cfg.Worker, Home: home, RuntimeDir: runtime, StateDir: state,
					Version: version, Log: log, Notifier: n,
				})
			}
			return service.Run(ctx, service.Options{Team: tm, Worker: cfg.Worker, Interval: d, Log: log, Notifier: n})
		},
	}
	cmd.Flags().BoolVar(&withHelper, "with-helper", false, "run a helper of its own, without systemd, for the team's sessions on its cluster (the controller's pod)")
	cmd.Flags().StringVar(&interval, "interval", service.DefaultInterval.String(), "time between ticks when no session event comes sooner")
	return cmd
}
