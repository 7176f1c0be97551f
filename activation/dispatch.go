package activation

import (
	"context"
	"os"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/team"
)

// DispatchArgs are the args of dispatch: start (or resume) the worker of
// one issue in one mode for a configured team.
type DispatchArgs struct {
	// Config is the legion.toml to read the team from (the caller's);
	// empty means the helper's default path.
	Config string `json:"config,omitempty"`
	Team   string `json:"team"`
	Issue  string `json:"issue"`
	Mode   string `json:"mode"` // plan, implement, review, retro, finish
}

// DispatchResult is the result of dispatch.
type DispatchResult struct {
	SpawnResult
	// Started is false when the worker was already live: dispatch is
	// idempotent.
	Started bool `json:"started"`
}

// TeamFromConfig is what the helper needs of a configured team.
func TeamFromConfig(t config.Team, w config.Worker) Team {
	return Team{
		Name: t.Name, ID: t.ID,
		Cooldown:           t.RestartCooldown,
		StartLimitBurst:    uint32(max(t.StartLimitBurst, 0)),
		StartLimitInterval: t.StartLimitInterval,
		StartupGrace:       w.StartupGrace,
		RingSize:           w.RingSize,
	}
}

// cmdDispatch plans the worker with package controller/team (worktree,
// deterministic session, the team's agent argv for a new and a resumed
// session) and starts it like spawn does. The session is named
// <issue>-<mode>; a live one is left alone.
func (h *Helper) cmdDispatch(ctx context.Context, _ *clientConn, req Request) (any, *os.File, error) {
	var a DispatchArgs
	if err := DecodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	path := a.Config
	if path == "" {
		p, err := config.DefaultPath()
		if err != nil {
			return nil, nil, apiErr(CodeBadRequest, "dispatch: %v", err)
		}
		path = p
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, apiErr(CodeBadRequest, "dispatch: %v", err)
	}
	ct, ok := cfg.Team(a.Team)
	if !ok {
		return nil, nil, apiErr(CodeBadRequest, "dispatch: team %q is not in %s", a.Team, cfg.Path)
	}
	tm, err := team.Open(ct, cfg.Path, h.opts.StateDir)
	if err != nil {
		return nil, nil, apiErr(CodeBadRequest, "dispatch: %v", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, nil, err
	}
	d, err := tm.PlanDispatch(ctx, a.Issue, a.Mode, home)
	if err != nil {
		return nil, nil, apiErr(CodeBadRequest, "%v", err)
	}
	if err := ValidateName(d.Name); err != nil {
		return nil, nil, apiErr(CodeBadRequest, "dispatch: %v", err)
	}
	res, started, err := h.launch(ctx, TeamFromConfig(ct, cfg.Worker), launch{
		op: "dispatch", name: d.Name, id: d.SessionID.String(), unit: d.Unit,
		issue: d.Issue, mode: d.Mode, role: "worker", cwd: d.Cwd, env: d.Env,
		argvNew: d.ArgvNew, argvRes: d.ArgvResume,
		watch: d.SessionFile, staleAfter: d.StaleAfter, cooldown: d.Cooldown,
		reuseLive: true,
	})
	if err != nil {
		return nil, nil, err
	}
	return DispatchResult{SpawnResult: res, Started: started}, nil, nil
}
