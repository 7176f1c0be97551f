package activation

import (
	"context"
	"os"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
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
// <issue>-<mode>; a live one of the team is left alone, and a live one of
// another team that holds the name is an exists error (names are unique
// across teams).
func (h *Helper) cmdDispatch(ctx context.Context, _ *clientConn, req Request) (any, *os.File, error) {
	var a DispatchArgs
	if err := DecodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	tm, cfg, err := h.openTeam("dispatch", a.Config, a.Team)
	if err != nil {
		return nil, nil, err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, nil, err
	}
	d, err := tm.PlanDispatch(ctx, a.Issue, controller.Mode(a.Mode), home)
	if err != nil {
		return nil, nil, apiErr(CodeBadRequest, "%v", err)
	}
	if err := ValidateName(d.Name); err != nil {
		return nil, nil, apiErr(CodeBadRequest, "dispatch: %v", err)
	}
	res, started, err := h.launch(ctx, TeamFromConfig(tm.Team, cfg.Worker), launch{
		op: "dispatch", name: d.Name, id: d.WorkerID.String(), agentSession: d.SessionID.String(), unit: d.Unit,
		issue: d.Issue, mode: string(d.Mode), role: "worker", cwd: d.Cwd, env: d.Env,
		argvNew: d.ArgvNew, argvRes: d.ArgvResume,
		watch: d.SessionFile, staleAfter: d.StaleAfter, cooldown: d.Cooldown,
		reuseLive: true,
	})
	if err != nil {
		return nil, nil, err
	}
	return DispatchResult{SpawnResult: res, Started: started}, nil, nil
}

// StateArgs are the args of state: the team's state with the suggested
// action per issue, as `legion state --json` prints it.
type StateArgs struct {
	Config string `json:"config,omitempty"` // as in DispatchArgs
	Team   string `json:"team"`
}

// openTeam loads the config at path (the default path when empty) and
// assembles the named team.
func (h *Helper) openTeam(cmd, path, name string) (*team.Team, config.Config, error) {
	if path == "" {
		p, err := config.DefaultPath()
		if err != nil {
			return nil, config.Config{}, apiErr(CodeBadRequest, "%s: %v", cmd, err)
		}
		path = p
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, config.Config{}, apiErr(CodeBadRequest, "%s: %v", cmd, err)
	}
	ct, ok := cfg.Team(name)
	if !ok {
		return nil, config.Config{}, apiErr(CodeBadRequest, "%s: team %q is not in %s", cmd, name, cfg.Path)
	}
	tm, err := team.Open(ct, cfg.Path, h.opts.StateDir)
	if err != nil {
		return nil, config.Config{}, apiErr(CodeBadRequest, "%s: %v", cmd, err)
	}
	return tm, *cfg, nil
}

// cmdState collects the team's state with the helper's own view of the
// sessions and returns it with the suggested actions (controller.Report).
func (h *Helper) cmdState(ctx context.Context, _ *clientConn, req Request) (any, *os.File, error) {
	var a StateArgs
	if err := DecodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	tm, _, err := h.openTeam("state", a.Config, a.Team)
	if err != nil {
		return nil, nil, err
	}
	st, _, err := controller.Collect(ctx, tm.Sources(helperSessions{h: h, team: tm.Name}))
	if err != nil {
		return nil, nil, err
	}
	return controller.Suggest(st), nil, nil
}

// helperSessions is the helper's own session table as a
// controller.SessionSource.
type helperSessions struct {
	h    *Helper
	team string
}

func (s helperSessions) Sessions(ctx context.Context) ([]controller.Session, error) {
	all := s.h.sessions.all()
	s.h.sessions.refresh(ctx, all)
	views := make([]Session, len(all))
	for i, ss := range all {
		views[i] = ss.view()
	}
	return ControllerSessions(s.team, views), nil
}

// ControllerSessions are the sessions of team among ss, as the controller
// sees them.
func ControllerSessions(team string, ss []Session) []controller.Session {
	var out []controller.Session
	for _, s := range ss {
		if s.Team != team {
			continue
		}
		out = append(out, controller.Session{
			Name: s.Name, Unit: s.Unit, Issue: s.Issue, Mode: controller.Mode(s.Mode), Session: s.ID,
			State: controller.SessionState(s.State), Question: s.Question, Cause: s.Cause,
		})
	}
	return out
}

// State returns a team's state with the suggested action per issue.
func (c *Client) State(ctx context.Context, args StateArgs) (controller.Report, error) {
	var r controller.Report
	err := c.Call(ctx, CmdState, args, &r)
	return r, err
}
