package team

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/ptyworker/claude"
	"github.com/legion-dev/legion/units/unitname"
)

// Dispatch is everything needed to start one issue's worker: the helper
// turns it into a pty-worker spec and a transient unit.
type Dispatch struct {
	Name      string    // session name, "<issue>-<mode>"
	Unit      string    // legion-<short>-<issue>-<mode>.service
	SessionID uuid.UUID // the agent's deterministic session: its LEGION_SESSION, set by the worker
	// WorkerID names the worker's own files (spec, registry, socket,
	// transcript): UUIDv5 of the team and "<issue>:<mode>" with the real
	// mode, so the retro's worker never shares the implementer's files
	// although it resumes the implementer's agent session.
	WorkerID    uuid.UUID
	Issue       string
	Mode        controller.Mode
	Cwd         string   // the issue's worktree
	Env         []string // LEGION_* for the agent (but LEGION_SESSION); no secrets
	ArgvNew     []string // the team's agent.new, expanded
	ArgvResume  []string // the team's agent.resume, expanded
	SessionFile string   // watched for liveness; its existence picks resume

	StaleAfter         time.Duration
	Cooldown           time.Duration
	StartLimitBurst    int
	StartLimitInterval time.Duration
}

// SessionMode is the mode whose session a phase runs in: the retro is the
// implementer's own session resumed (it remembers the work); every other
// phase has its own.
func SessionMode(mode controller.Mode) controller.Mode {
	if mode == controller.ModeRetro {
		return controller.ModeImplement
	}
	return mode
}

// Prompt is what a worker agent is told to do.
func Prompt(issue string, mode controller.Mode) string {
	return fmt.Sprintf("Use legion-worker skill in %s mode for issue %s", mode, issue)
}

func checkMode(mode controller.Mode) error {
	switch mode {
	case controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeRetro, controller.ModeFinish:
		return nil
	}
	return fmt.Errorf("mode %q: want plan, implement, review, retro or finish", mode)
}

// PlanDispatch prepares the worker of issue in mode: it makes sure the
// issue's worktree exists and expands the team's agent argv. home is the
// agent's home directory (where ~/.claude lives).
func (t *Team) PlanDispatch(ctx context.Context, issue string, mode controller.Mode, home string) (Dispatch, error) {
	if err := checkMode(mode); err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	unit, err := unitname.WorkerUnit(t.ShortID(), issue, string(mode))
	if err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	wt, err := t.Worktrees.Ensure(ctx, issue)
	if err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	id := claude.SessionID(t.ID, issue, string(SessionMode(mode)))
	vars := config.Vars{SessionID: id.String(), Prompt: Prompt(issue, mode), Issue: issue, Mode: string(mode), Workspace: wt.Path}
	argvNew, err := config.Expand(t.Agent.New, vars)
	if err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: agent.new of team %s: %w", issue, t.Name, err)
	}
	argvResume, err := config.Expand(t.Agent.Resume, vars)
	if err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: agent.resume of team %s: %w", issue, t.Name, err)
	}
	env := append([]string{
		"LEGION_TEAM=" + t.Name, "LEGION_ISSUE=" + issue, "LEGION_MODE=" + string(mode),
	}, wt.Env()...)
	if t.ConfigPath != "" {
		env = append(env, config.EnvConfig+"="+t.ConfigPath)
	}
	return Dispatch{
		Name: issue + "-" + string(mode), Unit: unit, SessionID: id, WorkerID: claude.SessionID(t.ID, issue, string(mode)),
		Issue: issue, Mode: mode,
		Cwd: wt.Path, Env: env, ArgvNew: argvNew, ArgvResume: argvResume,
		SessionFile:        claude.SessionFile(home, wt.Path, id),
		StaleAfter:         t.StaleAfter,
		Cooldown:           t.RestartCooldown,
		StartLimitBurst:    t.StartLimitBurst,
		StartLimitInterval: t.StartLimitInterval,
	}, nil
}
