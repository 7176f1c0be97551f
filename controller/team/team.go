// Package team assembles one configured team's controller parts from its
// config: the tracker (local or Linear), the review source (labels or
// GitHub), the worktrees, and the paths of its state, among them the wake
// file that makes its controller tick at once (Wake). It only builds;
// it starts nothing and talks to no service until a part is used.
package team

import (
	"cmp"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/capacity"
	"github.com/legion-dev/legion/controller/github"
	"github.com/legion-dev/legion/controller/instructions"
	"github.com/legion-dev/legion/controller/linear"
	"github.com/legion-dev/legion/controller/local"
	"github.com/legion-dev/legion/controller/workspace"
)

// Team is a configured team with its parts.
type Team struct {
	config.Team
	// ConfigPath is the legion.toml the team came from; agents get it as
	// $LEGION_CONFIG so their `legion issue ...` reads the same file.
	ConfigPath string
	// StateDir is $XDG_STATE_HOME/legion/teams/<short>: the local tracker,
	// the controller's heartbeat, the agents' prepared files
	// (agents/<worker id>/settings.json).
	StateDir string
	// Legion is the absolute path of the legion binary that a claude
	// agent's hooks run (`<Legion> hook`) and its allow rules name; the
	// caller sets it (the legion command: its own executable). Open leaves
	// it empty, and PlanDispatch refuses a claude team without it.
	Legion string
	// LookupEnv reads the environment the team's agents inherit: the
	// user manager's (agent.Session.LookupEnv). Nil means this process's,
	// right for the controller, which runs under that manager; `legion
	// dispatch` from a shell sets it to the manager's.
	LookupEnv func(key string) (string, bool)
	Tracker   controller.Tracker
	Reviews   controller.ReviewSource // nil: outcome labels on the issue
	Worktrees *workspace.Manager

	ledger *controller.Ledger // the team's spend today (StateDir/budget.json)
	limits *controller.Limits // its kinds' pauses at their API's limits (StateDir/limits.json)

	instrOnce sync.Once
	instr     *instructions.Set
	instrErr  error
}

// Worktrees is the manager of t's worktrees (one per issue, under
// stateHome/worktrees/<short id>); stateHome is $XDG_STATE_HOME/legion.
func Worktrees(t config.Team, stateHome string) *workspace.Manager {
	return &workspace.Manager{Repo: t.Workspace, Dir: filepath.Join(stateHome, "worktrees", t.ShortID())}
}

// Open builds the parts of t, read from configPath; stateHome is
// $XDG_STATE_HOME/legion.
func Open(t config.Team, configPath, stateHome string) (*Team, error) {
	dir := StateDir(t, stateHome)
	tm := &Team{
		Team:       t,
		ConfigPath: configPath,
		StateDir:   dir,
		Worktrees:  Worktrees(t, stateHome),
		ledger:     &controller.Ledger{Path: filepath.Join(dir, "budget.json")},
		limits:     &controller.Limits{Path: LimitsPath(dir)},
	}
	switch t.Tracker {
	case config.TrackerLocal:
		tm.Tracker = local.Open(filepath.Join(dir, "tracker"), t.IssuePrefix)
	case config.TrackerLinear:
		c, err := linear.New(linear.Options{
			Team:            t.Linear.TeamKey,
			Statuses:        linearStatuses(t.Linear),
			APIKeyEnv:       t.Linear.APIKeyEnv,
			CredentialsFile: t.Linear.CredentialsFile,
			Endpoint:        t.Linear.APIURL,
		})
		if err != nil {
			return nil, fmt.Errorf("team %s: %w", t.Name, err)
		}
		tm.Tracker = c
	case config.TrackerGitHub:
		c, err := gitHub(t)
		if err != nil {
			return nil, err
		}
		o := github.TrackerOptions{
			Label:  t.GitHub.Label,
			Prefix: t.IssuePrefix,
			Statuses: map[controller.Status]string{
				controller.StatusTodo: t.GitHub.StatusTodo, controller.StatusInProgress: t.GitHub.StatusInProgress,
				controller.StatusNeedsReview: t.GitHub.StatusNeedsReview, controller.StatusRetro: t.GitHub.StatusRetro,
			},
		}
		if g := t.GitHub; g.Project != 0 {
			o.Project = &github.ProjectOptions{Number: g.Project, Field: g.ProjectField, Options: map[controller.Status]string{
				controller.StatusTodo: g.ProjectTodo, controller.StatusInProgress: g.ProjectInProgress,
				controller.StatusNeedsReview: g.ProjectNeedsReview, controller.StatusRetro: g.ProjectRetro, controller.StatusDone: g.ProjectDone,
			}}
		}
		tr, err := c.Tracker(o)
		if err != nil {
			return nil, fmt.Errorf("team %s: %w", t.Name, err)
		}
		tm.Tracker = tr
	default:
		return nil, fmt.Errorf("team %s: unknown tracker %q", t.Name, t.Tracker)
	}
	if t.Review == config.ReviewGitHub {
		if tr, ok := tm.Tracker.(*github.Tracker); ok {
			tm.Reviews = tr.Client() // one client: one token read, one rate-limit budget
		} else {
			c, err := gitHub(t)
			if err != nil {
				return nil, err
			}
			tm.Reviews = c
		}
	}
	return tm, nil
}

// gitHub is the client of t's GitHub repository.
func gitHub(t config.Team) (*github.Client, error) {
	owner, repo, ok := strings.Cut(t.GitHub.Repo, "/")
	if !ok {
		return nil, fmt.Errorf("team %s: github repo %q: want owner/name", t.Name, t.GitHub.Repo)
	}
	c, err := github.New(github.Options{
		Owner: owner, Repo: repo,
		BranchPrefix: workspace.BranchPrefix,
		TokenEnv:     t.GitHub.TokenEnv,
		TokenFile:    t.GitHub.CredentialsFile,
		Endpoint:     t.GitHub.APIURL,
		MergeMethod:  t.GitHub.MergeMethod,
	})
	if err != nil {
		return nil, fmt.Errorf("team %s: %w", t.Name, err)
	}
	return c, nil
}

// Local returns the team's local tracker, or an error naming the tracker
// the team uses instead.
func (t *Team) Local() (*local.Store, error) {
	s, ok := t.Tracker.(*local.Store)
	if !ok {
		return nil, fmt.Errorf("team %q uses the %s tracker: manage its issues there; `legion issue` drives the local tracker", t.Name, t.Team.Tracker)
	}
	return s, nil
}

func linearStatuses(l config.Linear) map[controller.Status]string {
	m := map[controller.Status]string{}
	for st, name := range map[controller.Status]string{
		controller.StatusTodo: l.StatusTodo, controller.StatusInProgress: l.StatusInProgress,
		controller.StatusNeedsReview: l.StatusNeedsReview, controller.StatusRetro: l.StatusRetro,
		controller.StatusDone: l.StatusDone,
	} {
		if name != "" {
			m[st] = name
		}
	}
	return m
}

// Sources are the team's state sources for controller.Collect, with live
// sessions from sessions (the helper), its wip_limit and idle_grace, the
// room for its agents as its controller last learnt their size
// (Room(false, nil)), and, when it has a budget, its agents' spend
// (t.Spend) and its day ledger.
func (t *Team) Sources(sessions controller.SessionSource) controller.Sources {
	src := controller.Sources{
		Tracker:   t.Tracker,
		Reviews:   t.Reviews,
		Sessions:  sessions,
		Worktrees: t.Worktrees,
		WIPLimit:  t.WIPLimit,
		IdleGrace: t.IdleGrace,
		Room:      t.Room(false, nil),
		// A dispatch's record until its tracker changes are made
		// (controller.Dispatched).
		Dispatched: &controller.Dispatched{Dir: filepath.Join(t.StateDir, "dispatched")},
	}
	src.KindOf, src.LimitWindows = map[controller.Mode]string{}, map[string]time.Duration{}
	for _, m := range config.WorkerModes() {
		a := t.Agent.ForMode(m)
		kind := cmp.Or(string(a.Kind), string(config.AgentClaude))
		src.KindOf[controller.Mode(m)] = kind
		if k, err := kinds.For(a); err == nil {
			if w, ok := k.(agent.LimitWindower); ok {
				src.LimitWindows[kind] = w.LimitWindow()
			}
		}
	}
	src.Limits = t.limits
	if b := t.Budget; b.Any() {
		src.Budget = &controller.SpendBudget{IssueTokens: b.IssueTokens, IssueUSD: b.IssueUSD, DayTokens: b.DayTokens, DayUSD: b.DayUSD}
		src.Spend, src.Ledger = t, t.ledger
	}
	return src
}

// LimitsPath is where the controller of the team whose state directory is
// dir keeps its agent kinds' pauses at their API's limits; `legion limits
// resume` ends them by writing it.
func LimitsPath(dir string) string { return filepath.Join(dir, "limits.json") }

// Room is the source of the room for the team's agents: its session
// limits, the machine's, and the memory one more agent needs. With learn
// (the team's controller only) it samples the agents' peak memory and
// keeps what it learns in the state directory; log hears what cannot be
// read.
func (t *Team) Room(learn bool, log *slog.Logger) *capacity.Source {
	return capacity.New(capacity.Options{
		Short: t.ShortID(), StateDir: t.StateDir, AgentMemoryMax: t.Agent.MemoryMax,
		SessionLimit: t.SessionLimit, MachineLimit: t.MachineSessionLimit,
		Learn: learn, Log: log,
	})
}
