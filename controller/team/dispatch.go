package team

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/instructions"
	"github.com/legion-dev/legion/controller/workspace"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/unitname"
)

// Dispatch is everything needed to start one issue's worker: the helper
// turns it into a pty-worker spec and a transient unit.
type Dispatch struct {
	Name      string    // session name, "<issue>-<mode>"
	Unit      string    // legion-<short>-<issue>-<mode>.service
	SessionID uuid.UUID // the agent's deterministic session: its LEGION_SESSION, set by the worker
	// WorkerID names the worker's own files (spec, registry, socket,
	// transcript) and the agent's prepared ones (its settings): the
	// session id of the real mode (UUIDv5 of the team and
	// "<issue>:<mode>"), so the retro's worker never shares the
	// implementer's files although it resumes the implementer's agent
	// session.
	WorkerID uuid.UUID
	Issue    string
	Mode     controller.Mode
	Agent    string // the agent's kind (agent.kind): the worker's api.SpawnArgs.Agent
	// OwnCommands are the groups of Legion's own commands the worker
	// allows without a person (agent.OwnCommands of the phase's policy),
	// for a worker that sees the agent's permission requests.
	OwnCommands []string
	// DialogMarkers are the agent's approval dialogs no hook answers
	// (agent.Launch's).
	DialogMarkers []string
	// Legion is the legion program the agent's hooks run (Team.Legion).
	Legion string
	Cwd    string // the issue's worktree
	// Env is LEGION_* for the agent (but LEGION_SESSION and the worker's
	// hook socket) and what its kind adds; no secrets.
	Env []string
	// ArgvNew and ArgvResume are the team's agent.new and agent.resume,
	// expanded, with the arguments the kind adds (claude: --settings FILE
	// --permission-mode MODE); ArgvResume is nil for a kind that never
	// resumes.
	ArgvNew, ArgvResume []string
	// SessionFile is watched for liveness and its existence picks resume;
	// "" for a kind without one (custom).
	SessionFile string
	// ResumeMarker is what SessionFile must hold to be resumed (agent.Launch's).
	ResumeMarker string
	// Sandbox confines the agent (the policy "sandbox" where it holds);
	// PolicyNote says why that policy runs it unconfined, as allowlist.
	Sandbox    *api.Sandbox
	PolicyNote string
	// Instructions are what the agent is told: its prompt, the phase's
	// instructions rendered for the issue (package instructions).
	Instructions string

	StaleAfter         time.Duration
	Cooldown           time.Duration
	StartLimitBurst    int
	StartLimitInterval time.Duration

	// Kubernetes is where the worker runs for a team on a cluster (nil:
	// under systemd here); Prepare is what its pod runs before the agent
	// (the clone and the worktree) and PodConfig the pod's legion.toml
	// (see cluster.go), AgentPrepare the kind's plan for the pod's
	// `legion agent prepare` (agent.PodPrepare; nil for a custom agent).
	Kubernetes   *api.KubeTarget
	Prepare      [][]string
	PodConfig    []byte
	AgentPrepare []byte
	// EnvFiles are the agent's variables read in its pod from keys of the
	// team's Secret (kubernetes.secret_env), by their files there.
	EnvFiles map[string]string
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

// Instructions are the phase's instructions for the worker of issue in
// mode, rendered for this team (package instructions): what the agent is
// told, as its prompt, new or resumed. wt is the issue's worktree, env the
// agent's planned environment (its PATH decides how it runs legion).
func (t *Team) Instructions(ctx context.Context, issue string, mode controller.Mode, wt workspace.Worktree, kind string, env agent.Session) (string, error) {
	return t.instructions(ctx, issue, mode, wt, kind, t.legionCommand(env))
}

// instructions are Instructions with legion the command that runs Legion.
func (t *Team) instructions(ctx context.Context, issue string, mode controller.Mode, wt workspace.Worktree, kind, legion string) (string, error) {
	set, err := t.instructionSet()
	if err != nil {
		return "", err
	}
	base, err := t.Worktrees.DefaultBranch(ctx)
	if err != nil {
		return "", err
	}
	return set.Render(instructions.Data{
		Team: t.Name, Issue: issue, Mode: string(mode),
		Branch: wt.Branch, Worktree: wt.Path, Base: base,
		Review: string(t.Review), AskTool: kind == string(config.AgentClaude),
		Legion: legion,
	})
}

// ControllerInstructions are what the team's controller agent is told
// (instructions.ModeController); env is its planned environment.
func (t *Team) ControllerInstructions(kind string, env []string) (string, error) {
	set, err := t.instructionSet()
	if err != nil {
		return "", err
	}
	return set.Render(instructions.Data{
		Team: t.Name, Mode: instructions.ModeController, Worktree: t.Workspace,
		Review: string(t.Review), AskTool: kind == string(config.AgentClaude),
		Legion: t.legionCommand(agent.Session{Env: env, LookupEnv: t.LookupEnv}),
	})
}

// instructionSet is the team's instruction templates: the built-in ones
// and those of its agent.instructions_dir, loaded once.
func (t *Team) instructionSet() (*instructions.Set, error) {
	t.instrOnce.Do(func() {
		t.instr, t.instrErr = instructions.Load(t.Agent.InstructionsDir)
		if t.instrErr != nil {
			t.instrErr = fmt.Errorf("team %s: %w", t.Name, t.instrErr)
		}
	})
	return t.instr, t.instrErr
}

// systemBinDirs are the directories every shell's PATH holds, a login
// shell's too (Debian's /etc/profile sets PATH anew, and Codex runs its
// commands in a login shell: codex FACTS X30).
var systemBinDirs = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// legionCommand is how the agent of s runs Legion in its instructions:
// "legion" when that name finds t.Legion in the agent's PATH in one of
// systemBinDirs (where `make install` puts it), else t.Legion's absolute
// path (a binary from `go install` or a build tree is seldom in the user
// manager's PATH, and a login shell may drop what it adds).
func (t *Team) legionCommand(s agent.Session) string {
	if t.Legion == "" {
		return "legion"
	}
	path, _ := s.Getenv("PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if !slices.Contains(systemBinDirs, filepath.Clean(dir)) {
			if _, err := os.Stat(filepath.Join(dir, "legion")); err == nil {
				break // a legion the agent's own shell may not find
			}
			continue
		}
		p := filepath.Join(dir, "legion")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			if same(p, t.Legion) {
				return "legion"
			}
			break // the first legion in PATH is another binary
		}
	}
	return t.Legion
}

// same reports whether a and b name the same file.
func same(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

func checkMode(mode controller.Mode) error {
	switch mode {
	case controller.ModePlan, controller.ModeImplement, controller.ModeReview, controller.ModeRetro, controller.ModeFinish:
		return nil
	}
	return fmt.Errorf("mode %q: want plan, implement, review, retro or finish", mode)
}

// planLaunch renders the phase's instructions for the agent of s (legion
// is how it runs Legion), makes them its prompt, and has kind plan the
// launch.
func (t *Team) planLaunch(ctx context.Context, issue string, mode controller.Mode, wt workspace.Worktree, kind agent.Kind, s *agent.Session, legion string) (agent.Launch, string, error) {
	prompt, err := t.instructions(ctx, issue, mode, wt, kind.Name(), legion)
	if err != nil {
		return agent.Launch{}, "", fmt.Errorf("dispatch %s: %w", issue, err)
	}
	s.Vars.Prompt = prompt
	l, err := kind.Plan(*s)
	if err != nil {
		return agent.Launch{}, "", fmt.Errorf("dispatch %s: team %s: %w", issue, t.Name, err)
	}
	return l, prompt, nil
}

// SessionOf names the worker of issue in mode without preparing anything:
// the agent's deterministic session (a retro's is its implementer's, see
// SessionMode) and the worker's unit. They are what PlanDispatch plans, and
// the controller's log lines about the issue carry them (LEGION_SESSION,
// LEGION_UNIT: see internal/journal).
func (t *Team) SessionOf(issue string, mode controller.Mode) (uuid.UUID, string, error) {
	unit, err := unitname.WorkerUnit(t.ShortID(), issue, string(mode))
	if err != nil {
		return uuid.UUID{}, "", err
	}
	kind, err := kinds.For(t.Agent)
	if err != nil {
		return uuid.UUID{}, "", fmt.Errorf("team %s: %w", t.Name, err)
	}
	return kind.SessionID(t.ID, issue, string(SessionMode(mode))), unit, nil
}

// PlanDispatch prepares the worker of issue in mode: it makes sure the
// issue's worktree exists, has the team's agent kind (agent.kind) plan the
// launch (session, argv, session file) and prepare the agent's environment
// (for claude: the session's settings file with its hooks and permission
// rules, under StateDir/agents/<worker id>, and the dialog answers in
// home's ~/.claude.json). home is the agent's home directory (where
// ~/.claude lives). A claude team needs t.Legion, the binary its hooks run.
func (t *Team) PlanDispatch(ctx context.Context, issue string, mode controller.Mode, home string) (Dispatch, error) {
	if err := checkMode(mode); err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	id, unit, err := t.SessionOf(issue, mode)
	if err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	am := t.Agent.ForMode(string(mode))
	kind, err := kinds.For(am)
	if err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: team %s: %w", issue, t.Name, err)
	}
	workerID := kind.SessionID(t.ID, issue, string(mode))
	if t.onCluster() {
		return t.planOnCluster(ctx, issue, mode, id, unit, workerID, am, kind)
	}
	wt, err := t.Worktrees.Ensure(ctx, issue)
	if err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: %w", issue, err)
	}
	// legion.toml's agent.env and agent.env_by_kind first, so that
	// Legion's own variables and the kind's (l.Env) come after and win.
	env := append(am.Environment(),
		"LEGION_TEAM="+t.Name, "LEGION_ISSUE="+issue, "LEGION_MODE="+string(mode))
	env = append(env, wt.Env()...)
	if t.ConfigPath != "" {
		env = append(env, config.EnvConfig+"="+t.ConfigPath)
	}
	if t.Legion != "" {
		// The program the worker runs the agent's tracker commands with.
		env = append(env, proto.EnvLegionBin+"="+t.Legion)
	}
	s := agent.Session{
		ID: id, Mode: string(mode),
		Vars: config.Vars{SessionID: id.String(), Issue: issue, Mode: string(mode), Workspace: wt.Path},
		Cwd:  wt.Path, Repo: t.Workspace, Home: home,
		Dir:    filepath.Join(t.StateDir, "agents", workerID.String()),
		Legion: t.Legion, Env: env, LookupEnv: t.LookupEnv,
		Secrets: []string{t.Linear.CredentialsFile, t.GitHub.CredentialsFile},
	}
	l, prompt, err := t.planLaunch(ctx, issue, mode, wt, kind, &s, t.legionCommand(s))
	if err != nil {
		return Dispatch{}, err
	}
	if l, err = kind.Prepare(ctx, s, l); err != nil {
		return Dispatch{}, fmt.Errorf("dispatch %s: team %s: %w", issue, t.Name, err)
	}
	var own []string
	if l.Agent == string(config.AgentClaude) { // the worker reads its hooks
		policy := am.Policy(string(mode))
		if policy == config.PermissionsSandbox && l.Sandbox == nil {
			// The sandbox does not hold for this agent (l.PolicyNote says
			// why): it runs as under allowlist, and so do its own commands.
			policy = config.PermissionsAllowlist
		}
		own = agent.OwnCommands(policy)
	}
	return Dispatch{
		Name: issue + "-" + string(mode), Unit: unit, SessionID: id, WorkerID: workerID,
		Issue: issue, Mode: mode, Agent: l.Agent, OwnCommands: own, DialogMarkers: l.DialogMarkers, Legion: t.Legion,
		Cwd: wt.Path, Env: append(env, l.Env...), ArgvNew: l.ArgvNew, ArgvResume: l.ArgvResume,
		SessionFile:        l.SessionFile,
		ResumeMarker:       l.ResumeMarker,
		Sandbox:            l.Sandbox,
		PolicyNote:         l.PolicyNote,
		Instructions:       prompt,
		StaleAfter:         t.StaleAfter,
		Cooldown:           t.RestartCooldown,
		StartLimitBurst:    t.StartLimitBurst,
		StartLimitInterval: t.StartLimitInterval,
	}, nil
}
