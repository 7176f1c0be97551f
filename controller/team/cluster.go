package team

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/workspace"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// A team with engine = "kubernetes" runs each phase in a pod whose only
// lasting storage is the issue's volume (package wire's paths): the pod
// cannot see the team's workspace, its state or its legion.toml here. So
// the controller plans the worker with the pod's paths, and the pod,
// before its agent starts (api.SpawnArgs.Prepare), clones the team's
// repository (kubernetes.repository) onto the volume, or refreshes that
// clone, and makes the issue's worktree in it, with a legion.toml of its
// own (PodConfig, a file of the session's spec Secret) that the agent's
// `legion issue` and `legion worktree finish` read: the same tracker, its
// key read from the team's Secret. The finisher merges into the clone and
// pushes to the repository (workspace.MergeAndPublish).

// Paths in an issue's pod, on the issue's volume.
const (
	// PodRepo is the clone of the team's repository.
	PodRepo = wire.VolumeMount + "/repo"
	// PodConfigName is the pod's legion.toml in the session's spec Secret,
	// mounted at PodConfigPath.
	PodConfigName = "legion.toml"
	PodConfigPath = wire.SpecDir + "/" + PodConfigName
	// PodLinearKey and PodGitHubToken are the keys of the team's Secret
	// (kubernetes.secret) the pod's legion reads the tracker's key from.
	PodLinearKey   = "linear-api-key"
	PodGitHubToken = "github-token"
)

// podStateHome is $XDG_STATE_HOME/legion of the legion in a pod: under
// its HOME, on the issue's volume.
var podStateHome = filepath.Join(wire.HomeDir, ".local", "state", "legion")

// onCluster reports whether t's sessions run on Kubernetes.
func (t *Team) onCluster() bool { return t.Engine == config.EngineKubernetes }

// CheckCluster says what a team on a cluster lacks for its controller to
// dispatch there: the repository its pods clone and a tracker they can
// reach (the local tracker's files are on this machine). Every agent
// kind runs in a pod: its Prepare is run there (agent.PodPrepare), and
// activation's TestKubeKinds and TestKubeClaude run the real CLIs so.
func CheckCluster(t config.Team) error {
	if t.Engine != config.EngineKubernetes {
		return nil
	}
	var errs []error
	if t.Kubernetes.Repository == "" {
		errs = append(errs, fmt.Errorf("team %s: kubernetes.repository is not set: the controller needs the git URL each issue's pod clones and pushes its merge to (README: Kubernetes)", t.Name))
	}
	if t.Tracker == config.TrackerLocal {
		errs = append(errs, fmt.Errorf("team %s: tracker = \"local\" keeps its issues in files on this machine, which the team's pods cannot reach: use tracker = \"linear\" or \"github\" with engine = \"kubernetes\", or engine = \"systemd\"", t.Name))
	}
	return errors.Join(errs...)
}

// podLegion is the legion program in the team's pods.
func (t *Team) podLegion() string { return filepath.Join(t.Kubernetes.BinDir, "legion") }

// podPrepare is what the pod runs before its agent: the clone, then the
// issue's worktree in it.
func (t *Team) podPrepare(issue string) [][]string {
	l := t.podLegion()
	return [][]string{
		{l, "worktree", "clone", t.Kubernetes.Repository, PodRepo},
		{l, "worktree", "ensure", t.Name, issue},
	}
}

// PodConfig is the legion.toml of t's pods, made from the legion.toml at
// configPath: its [defaults] and the team's table, so the pods have the
// same team (id, tracker, review, agent), with the pod's clone as its
// workspace, the tracker's key read from the team's Secret (PodLinearKey,
// PodGitHubToken under wire.SecretsDir), and nothing of this machine's:
// no notifications, no webhook secret, no instruction templates (the
// controller here renders the instructions), no helper or web settings.
func PodConfig(t config.Team, configPath string) ([]byte, error) {
	var doc map[string]any
	if _, err := toml.DecodeFile(configPath, &doc); err != nil {
		return nil, fmt.Errorf("the pods' legion.toml of team %s: read %s: %w", t.Name, configPath, err)
	}
	teams, _ := doc["teams"].(map[string]any)
	src, ok := teams[t.Name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the pods' legion.toml of team %s: %s has no table [teams.%q]", t.Name, configPath, t.Name)
	}
	tab := podTable(src)
	tab["id"] = t.ID.String()
	tab["workspace"] = PodRepo
	key := func(table, k, file string) {
		m, _ := tab[table].(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		m[k] = file
		tab[table] = m
	}
	switch t.Tracker {
	case config.TrackerLinear:
		key("linear", "credentials_file", filepath.Join(wire.SecretsDir, PodLinearKey))
	case config.TrackerGitHub:
		key("github", "credentials_file", filepath.Join(wire.SecretsDir, PodGitHubToken))
	}
	if t.Review == config.ReviewGitHub {
		key("github", "credentials_file", filepath.Join(wire.SecretsDir, PodGitHubToken))
	}
	out := map[string]any{"teams": map[string]any{t.Name: tab}}
	if d, ok := doc["defaults"].(map[string]any); ok {
		out["defaults"] = podTable(d)
	}
	var b bytes.Buffer
	b.WriteString("# The legion.toml of team " + t.Name + "'s pods, made by its controller from " + configPath + ".\n")
	if err := toml.NewEncoder(&b).Encode(out); err != nil {
		return nil, fmt.Errorf("the pods' legion.toml of team %s: %w", t.Name, err)
	}
	return b.Bytes(), nil
}

// podTable is a copy of a team's (or [defaults]') table without what is
// of this machine only: notify.*, github.webhook_secret_file,
// agent.instructions_dir, the tracker's key files (the pod's are set
// apart). Dotted keys decode as nested tables.
func podTable(src map[string]any) map[string]any {
	tab := maps.Clone(src)
	delete(tab, "notify")
	for table, keys := range map[string][]string{
		"github": {"webhook_secret_file", "credentials_file"},
		"linear": {"credentials_file"},
		"agent":  {"instructions_dir"},
	} {
		m, ok := tab[table].(map[string]any)
		if !ok {
			continue
		}
		m = maps.Clone(m)
		for _, k := range keys {
			delete(m, k)
		}
		tab[table] = m
	}
	return tab
}

// planOnCluster is PlanDispatch for a team on a cluster: the worker of
// issue in mode, planned with the pod's paths; nothing is made here.
func (t *Team) planOnCluster(ctx context.Context, issue string, mode controller.Mode, id uuid.UUID, unit string, workerID uuid.UUID, am config.Agent, kind agent.Kind) (Dispatch, error) {
	if err := CheckCluster(t.Team); err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	if t.ConfigPath == "" {
		return Dispatch{}, fmt.Errorf("dispatch %s: team %s: no legion.toml to make the pods' from", issue, t.Name)
	}
	podCfg, err := PodConfig(t.Team, t.ConfigPath)
	if err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	pod := t.Team
	pod.Workspace = PodRepo
	wt := workspace.Worktree{Issue: issue, Path: Worktrees(pod, podStateHome).Path(issue), Branch: workspace.Branch(issue)}
	legion := t.podLegion()
	env := append(am.Environment(),
		"LEGION_TEAM="+t.Name, "LEGION_ISSUE="+issue, "LEGION_MODE="+string(mode))
	env = append(env, wt.Env()...)
	env = append(env, config.EnvConfig+"="+PodConfigPath, proto.EnvLegionBin+"="+legion)
	who, err := t.gitIdentity(ctx, env)
	if err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	env = append(env, who...)
	s := agent.Session{
		ID: id, Mode: string(mode),
		Vars: config.Vars{SessionID: id.String(), Issue: issue, Mode: string(mode), Workspace: wt.Path},
		Cwd:  wt.Path, Repo: PodRepo, Home: wire.HomeDir,
		Dir:    filepath.Join(wire.StateDir, "agents", workerID.String()),
		Legion: legion, Env: env, LookupEnv: t.LookupEnv, Pod: true,
	}
	l, prompt, err := t.planLaunch(ctx, issue, mode, wt, kind, &s, legion)
	if err != nil {
		return Dispatch{}, err
	}
	prepare := t.podPrepare(issue)
	var agentPrepare []byte
	var own []string
	if kind.Name() != string(config.AgentCustom) {
		// The kind's files are made in the pod, by the same Prepare
		// (agent.PodPrepare), after the worktree exists.
		if l, agentPrepare, err = agent.PlanForPod(ctx, kind, am, s, l); err != nil {
			return Dispatch{}, fmt.Errorf("dispatch %s: team %s: %w", issue, t.Name, err)
		}
		prepare = append(prepare, []string{legion, "agent", "prepare", filepath.Join(wire.SpecDir, agent.PodPrepareFile)})
		if l.Agent == string(config.AgentClaude) { // the worker reads its hooks
			policy, _, _ := agent.EffectivePolicy(am, s, config.AgentKind(kind.Name()))
			own = agent.OwnCommands(policy)
		}
	}
	// A custom agent's Prepare would only draw a sandbox, and the pod's
	// security context confines the agent.
	return Dispatch{
		Name: issue + "-" + string(mode), Unit: unit, SessionID: id, WorkerID: workerID,
		Issue: issue, Mode: mode, Agent: l.Agent, OwnCommands: own, DialogMarkers: l.DialogMarkers, Legion: legion,
		Cwd: wt.Path, Env: append(env, l.Env...), ArgvNew: l.ArgvNew, ArgvResume: l.ArgvResume,
		SessionFile:        l.SessionFile,
		ResumeMarker:       l.ResumeMarker,
		PolicyNote:         l.PolicyNote,
		Instructions:       prompt,
		StaleAfter:         t.StaleAfter,
		Cooldown:           t.RestartCooldown,
		StartLimitBurst:    t.StartLimitBurst,
		StartLimitInterval: t.StartLimitInterval,
		Kubernetes:         t.KubeTarget(),
		Prepare:            prepare,
		PodConfig:          podCfg,
		AgentPrepare:       agentPrepare,
		EnvFiles:           t.podEnvFiles(),
	}, nil
}

// podEnvFiles are the agent's variables from keys of the team's Secret
// (kubernetes.secret_env), by the files the pod has them in.
func (t *Team) podEnvFiles() map[string]string {
	if len(t.Kubernetes.SecretEnv) == 0 {
		return nil
	}
	files := make(map[string]string, len(t.Kubernetes.SecretEnv))
	for name, key := range t.Kubernetes.SecretEnv {
		files[name] = filepath.Join(wire.SecretsDir, key)
	}
	return files
}

// gitIdentity is who the pod's commits and merges are by, as git's
// environment: none when env (agent.env) names one already, else the
// user.name and user.email of the team's workspace here, the identity its
// merges have on this machine. The image has no git config of its own,
// and git refuses to commit without one ("unable to auto-detect email
// address").
func (t *Team) gitIdentity(ctx context.Context, env []string) ([]string, error) {
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "GIT_AUTHOR_EMAIL=") }) {
		return nil, nil
	}
	get := func(key string) string {
		out, err := exec.CommandContext(ctx, "git", "-C", t.Workspace, "config", "--get", key).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	name, email := get("user.name"), get("user.email")
	if name == "" || email == "" {
		return nil, fmt.Errorf("team %s: its pods need a git identity for their commits and merges: set user.name and user.email in %s (git config), or GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME and GIT_COMMITTER_EMAIL in agent.env", t.Name, t.Workspace)
	}
	return []string{"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email, "GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email}, nil
}
