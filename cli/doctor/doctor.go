// Package doctor holds the checks of `legion doctor`: is everything Legion
// needs on this machine there and working? Each check looks at one thing
// (the systemd user manager, lingering, the session bus, which of the
// directives of Legion's units the user manager can apply, whether the kernel
// enforces memory and CPU limits for it, tmux, git, the journal (can the
// user read their own lines?), the config, the installed unit files, the
// helper's socket, the pty-worker program, whether the dashboard listens
// only on a loopback address; per team: its agent binary as workers will
// find it (in the user manager's PATH), the permission policy of each mode
// and what it lets the agent do unasked, what its GitHub token may do on
// its repository (when it uses GitHub), for a team with engine
// "kubernetes" its cluster, worker image and controller Lease (asked of
// legion-kube check), and for every kind the team runs
// in some mode the version of that kind's CLI against the release Legion
// was tested with (package agent/cliversion), Codex's credentials, the
// Gemini CLI's program, node and key, opencode's key (present, never read))
// and reports ok, warn or fail, and with a problem what to do about it.
//
// The checks only look: they never write a file of the user's, change a
// unit or the manager's environment, start or stop anything of Legion's,
// or read a secret, but for a GitHub team's token, which is sent only to
// the team's GitHub endpoint, as the controller sends it, and never
// shown. Their side effects: that one query per GitHub team (one point
// of the token's rate limit); per Kubernetes team, the API server's
// access reviews and reads, and one HEAD of the worker image's manifest
// at its registry; the host probe's transient units
// (units/hostprobe: each runs one check and exits, and is collected);
// the socket check's connection, which (as
// any client's would) starts legion.service through socket activation;
// and each agent CLI's `--version`, which runs with only PATH and a
// temporary HOME that is removed afterwards (some CLIs write into their
// home even then).
package doctor

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/capacity"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/hostprobe"
)

// Status is a check's outcome.
type Status string

// Statuses. Only Fail makes `legion doctor` exit non-zero: Warn is for
// what Legion works without, but not as well (no lingering, no session
// bus).
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Check is the result of one check.
type Check struct {
	Name   string `json:"name"`          // what was checked, e.g. "tmux" or "agent of team demo"
	Status Status `json:"status"`        // OK, Warn or Fail
	Detail string `json:"detail"`        // what was found
	Fix    string `json:"fix,omitempty"` // what to do; set when Status is not OK

	// Team is the team a per-team check is about.
	Team string `json:"team,omitempty"`
	// Policies are the permission policies of the team's modes (the
	// permissions check of a team).
	Policies []PolicyUse `json:"policies,omitempty"`
	// CLI is the agent CLI found and its version (the version check of
	// a kind a team runs).
	CLI *InstalledCLI `json:"cli,omitempty"`
}

// Options say where to look. ConfigPath, UnitDir, Bin and TeamUnits are
// required; the rest default to this process's environment.
type Options struct {
	// ConfigPath is legion.toml.
	ConfigPath string
	// UnitDir is where `legion install` writes, e.g. ~/.config/systemd/user.
	UnitDir string
	// Bin is the legion binary `legion install` would put in ExecStart=.
	Bin string
	// TeamUnits maps the configured teams to what the unit generators
	// take, exactly as `legion install` maps them.
	TeamUnits func([]config.Team) []units.TeamUnits

	// RuntimeDir is XDG_RUNTIME_DIR; default $XDG_RUNTIME_DIR, else
	// /run/user/UID.
	RuntimeDir string
	// User is whose lingering is checked; default the current user.
	User string
	// LingerDir is logind's lingering directory; default
	// /var/lib/systemd/linger.
	LingerDir string
	// SystemBus is the system bus's address, where logind is looked for;
	// default $DBUS_SYSTEM_BUS_ADDRESS, else
	// unix:path=/run/dbus/system_bus_socket.
	SystemBus string
	// Timeout bounds each check that talks to something; default 10s.
	Timeout time.Duration
	// StateHome is $XDG_STATE_HOME/legion (teams' learnt agent sizes);
	// Meminfo is /proc/meminfo. Empty: the system's.
	StateHome, Meminfo string
	// FindWorker locates the program worker units run; default: the one
	// beside the legion that the installed legion.service runs (else Bin),
	// as that legion finds it (proto.FindBinaryFor).
	FindWorker func() (string, error)
	// KubeBinary is legion-kube, which checks a team with engine
	// "kubernetes"; default: the one beside this legion, else in the
	// libexec directory.
	KubeBinary string
	// Version is legion's own version; when set, a worker that reports
	// another one is a warning (one was upgraded without the other).
	Version string
	// Probe finds out what the user manager can apply (units/hostprobe);
	// default hostprobe.Probe with Bin.
	Probe func(context.Context) hostprobe.Report
}

// Names of the checks that are always run (agent checks are named per
// team, see agentCheckName).
const (
	CheckConfig  = "config"
	CheckManager = "systemd user manager"
	CheckLinger  = "lingering"
	CheckBus     = "D-Bus session bus"
	CheckUnits   = "unit files"
	CheckSocket  = "helper socket"
	CheckGit     = "git"
	CheckTmux    = "tmux"
	CheckWorker  = "pty worker"
	CheckJournal = "journal"
	CheckWeb     = "web dashboard"
)

// Run runs every check, in a fixed order, and returns their results. It
// returns when all checks are done; none outlives it.
func Run(ctx context.Context, o Options) []Check {
	o = o.withDefaults()
	cfg, cfgCheck := checkConfig(o.ConfigPath)
	pctx, cancel := context.WithTimeout(ctx, o.Timeout)
	rep := o.Probe(pctx)
	cancel()
	checks := []Check{
		cfgCheck,
		withTimeout(ctx, o.Timeout, checkManager),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkLinger(ctx, o) }),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkBus(ctx, o.RuntimeDir) }),
		checkSandboxing(rep, usedKeys(o, cfg)),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkUnits(ctx, o, cfg, rep) }),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkSocket(ctx, o.RuntimeDir) }),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkWorker(ctx, o.FindWorker, o.Version) }),
		checkLimits(rep, cfg),
		checkTool(CheckGit, "git", "Legion gives every issue a git worktree of the team's workspace"),
		checkTool(CheckTmux, "tmux", "`legion tmux TEAM` shows a team's agents in tmux windows"),
		checkJournal(),
		checkWeb(cfg),
	}
	if cfg != nil && len(cfg.Teams) > 0 {
		ectx, cancel := context.WithTimeout(ctx, o.Timeout)
		w := readWorkerEnv(ectx)
		cancel()
		versions := versionCache{}
		for _, t := range cfg.Teams {
			checks = append(checks, teamChecks(ctx, o, t, w, versions)...)
		}
	}
	return checks
}

// teamChecks are the checks of team t: its agent program, its permission
// policies, its GitHub token's access when it uses GitHub, and for each kind it runs in some mode (agent.kind and
// agent.kind_by_mode) the version of that kind's CLI and the kind's own
// check ([agent.Checker]: Codex's credentials; the Gemini CLI's program,
// node and key; opencode's key), found through the kinds' registry.
func teamChecks(ctx context.Context, o Options, t config.Team, w workerEnv, versions versionCache) []Check {
	checks := []Check{checkAgent(o.ConfigPath, t, w), checkPolicy(t)}
	if c, ok := checkInstructions(o.ConfigPath, t); ok {
		checks = append(checks, c)
	}
	checks = append(checks, checkCapacity(t, o.StateHome, o.Meminfo))
	if t.Notify.Any() {
		checks = append(checks, checkNotify(o.ConfigPath, t, w))
	}
	if t.Engine == config.EngineKubernetes {
		kctx, cancel := context.WithTimeout(ctx, o.Timeout)
		checks = append(checks, checkKube(kctx, o.ConfigPath, o.KubeBinary, t, w)...)
		cancel()
		checks = append(checks, checkClusterDispatch(o.ConfigPath, t))
	}
	if needs, ok := usesGitHub(t); ok {
		checks = append(checks, withTimeout(ctx, o.Timeout, func(ctx context.Context) Check {
			return checkGitHub(ctx, o.ConfigPath, t, w, needs)
		}))
	}
	seen := map[config.AgentKind]bool{}
	for _, u := range kindUses(t) {
		if c, ok := checkCLI(ctx, o, t, u, w, versions); ok {
			checks = append(checks, c)
		}
		if seen[u.kind] {
			continue
		}
		seen[u.kind] = true
		if c, ok := kindCheck(t, u.kind, w); ok {
			checks = append(checks, c)
		}
	}
	return checks
}

// Failed counts the checks that failed.
func Failed(checks []Check) int {
	n := 0
	for _, c := range checks {
		if c.Status == Fail {
			n++
		}
	}
	return n
}

// usedKeys are the keys of the units install would write for cfg (nil
// when the config does not load: all).
func usedKeys(o Options, cfg *config.Config) map[string]bool {
	if cfg == nil {
		return nil
	}
	return units.Keys(o.TeamUnits(cfg.Teams))
}

func (o Options) withDefaults() Options {
	if o.RuntimeDir == "" {
		o.RuntimeDir = os.Getenv("XDG_RUNTIME_DIR")
	}
	if o.RuntimeDir == "" {
		o.RuntimeDir = filepath.Join("/run/user", strconv.Itoa(os.Getuid()))
	}
	if o.User == "" {
		if u, err := user.Current(); err == nil {
			o.User = u.Username
		} else {
			o.User = os.Getenv("USER")
		}
	}
	if o.LingerDir == "" {
		o.LingerDir = "/var/lib/systemd/linger"
	}
	if o.SystemBus == "" {
		o.SystemBus = cmp.Or(os.Getenv("DBUS_SYSTEM_BUS_ADDRESS"), "unix:path=/run/dbus/system_bus_socket")
	}
	if o.StateHome == "" {
		o.StateHome, _ = config.StateDir()
	}
	if o.Meminfo == "" {
		o.Meminfo = capacity.MeminfoPath
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Probe == nil {
		bin := o.Bin
		o.Probe = func(ctx context.Context) hostprobe.Report { return hostprobe.Probe(ctx, hostprobe.Options{Bin: bin}) }
	}
	if o.FindWorker == nil {
		unitDir, bin := o.UnitDir, o.Bin
		o.FindWorker = func() (string, error) { return proto.FindBinaryFor(installedLegion(unitDir, bin)) }
	}
	return o
}

// withTimeout runs check with its own deadline.
func withTimeout(ctx context.Context, d time.Duration, check func(context.Context) Check) Check {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return check(ctx)
}

// kindCheck is kind's own check of team t's agents ([agent.Checker]),
// when the kind has one.
func kindCheck(t config.Team, kind config.AgentKind, w workerEnv) (Check, bool) {
	k, err := kinds.For(config.Agent{Kind: kind})
	if err != nil {
		return Check{}, false // config refuses an unknown kind before this
	}
	ck, ok := k.(agent.Checker)
	if !ok {
		return Check{}, false
	}
	c := Check{Name: kindCheckName(ck, t.Name), Team: t.Name}
	if w.err != nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("the user manager's environment, which workers get, cannot be read: %v", w.err)
		c.Fix = fmt.Sprintf("see the check %q", CheckManager)
		return c, true
	}
	var in []string
	for _, m := range modes {
		if mk := t.Agent.ForMode(m).Kind; mk == kind || mk == "" && kind == config.AgentClaude {
			in = append(in, m)
		}
	}
	r := ck.Check(agent.CheckEnv{Team: t, Modes: in, Env: w.env, EnvironmentDir: w.environmentDir()})
	c.Status, c.Detail, c.Fix = Status(r.Status), r.Detail, r.Fix
	return c, true
}

// kindCheckName names kind check ck of team, e.g. "codex credentials of
// team demo".
func kindCheckName(ck agent.Checker, team string) string { return ck.CheckName() + " of team " + team }
