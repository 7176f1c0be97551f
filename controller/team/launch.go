package team

import (
	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
)

// Launch is what every launch of a session of team t shares: the team's
// name and UUID and its supervision policy (restart cooldown, start limit,
// the worker's startup grace and scrollback from w), as legion.toml says
// with its defaults applied. The helper has no defaults of its own, so
// these values are the ones systemd gets: restart_cooldown = "0s" is
// RestartSec=0. The caller fills in the session.
func Launch(t config.Team, w config.Worker) api.SpawnArgs {
	return api.SpawnArgs{
		Team: t.Name, TeamID: t.ID.String(),
		Cooldown:           new(api.Duration(t.RestartCooldown)),
		StartLimitBurst:    t.StartLimitBurst,
		StartLimitInterval: api.Duration(t.StartLimitInterval),
		RingSize:           w.RingSize,
	}
}

// DispatchLaunch is the helper's spawn request for the worker d that
// PlanDispatch planned, with w's worker settings: a worker that is left
// alone when it already runs (Reuse), so dispatching is idempotent. The
// worker is told the agent's kind and the team's stale_after; a session
// file, when the kind has one, is watched with w's startup grace (a custom
// agent, which has none, is judged by its output).
func (t *Team) DispatchLaunch(d Dispatch, w config.Worker) api.SpawnArgs {
	a := Launch(t.Team, w)
	a.Name, a.ID, a.Issue, a.Mode, a.Role = d.Name, d.WorkerID.String(), d.Issue, string(d.Mode), "worker"
	a.AgentSession = d.SessionID.String()
	a.Agent, a.Sandbox, a.Instructions, a.OwnCommands, a.DialogMarkers, a.Legion = d.Agent, d.Sandbox, d.Instructions, d.OwnCommands, d.DialogMarkers, d.Legion
	a.Cwd, a.Env, a.Argv, a.ArgvResume = d.Cwd, d.Env, d.ArgvNew, d.ArgvResume
	a.StaleAfter = api.Duration(d.StaleAfter) // without a session file: judged by its output
	if d.SessionFile != "" {
		a.Watch, a.ResumeMarker = d.SessionFile, d.ResumeMarker
		a.StartupGrace = new(api.Duration(w.StartupGrace))
	}
	if d.Kubernetes != nil {
		a.Kubernetes, a.Prepare, a.EnvFiles = d.Kubernetes, d.Prepare, d.EnvFiles
		a.KubeFiles = map[string][]byte{PodConfigName: d.PodConfig}
		if d.AgentPrepare != nil {
			a.KubeFiles[agent.PodPrepareFile] = d.AgentPrepare
		}
	}
	a.Reuse = true
	a.MaxLive = t.MachineSessionLimit // the helper holds the machine's cap exactly
	return a
}
