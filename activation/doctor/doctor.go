// Package doctor holds the checks of `legion doctor`: is everything Legion
// needs on this machine there and working? Each check looks at one thing
// (the systemd user manager, lingering, the session bus, whether the kernel
// enforces memory and CPU limits for it, tmux, git, the journal (can the
// user read their own lines?), the
// config, each team's agent binary as workers will find it (in the user
// manager's PATH), a Codex team's credentials, a team running the Gemini
// CLI in any mode its program, node and key (present, never read), the
// installed unit files, the helper's socket, the pty-worker program,
// whether the dashboard listens only on a loopback address) and reports
// ok, warn or fail, and with a problem what to do
// about it.
//
// The checks only look: they never write a file, change a unit or the
// manager's environment, start or stop anything, or read a secret. The one side effect is the socket
// check's connection, which (as any client's would) starts legion.service
// through socket activation.
package doctor

import (
	"cmp"
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker"
	"github.com/legion-dev/legion/units"
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
	// FindWorker locates the program worker units run; default: the one
	// beside the legion that the installed legion.service runs (else Bin),
	// as that legion finds it (ptyworker.FindBinaryFor).
	FindWorker func() (string, error)
	// Version is legion's own version; when set, a worker that reports
	// another one is a warning (one was upgraded without the other).
	Version string
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
	checks := []Check{
		cfgCheck,
		withTimeout(ctx, o.Timeout, checkManager),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkLinger(ctx, o) }),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkBus(ctx, o.RuntimeDir) }),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkUnits(ctx, o, cfg) }),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkSocket(ctx, o.RuntimeDir) }),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkWorker(ctx, o.FindWorker, o.Version) }),
		withTimeout(ctx, o.Timeout, func(ctx context.Context) Check { return checkLimits(ctx, cfg) }),
		checkTool(CheckGit, "git", "Legion gives every issue a git worktree of the team's workspace"),
		checkTool(CheckTmux, "tmux", "`legion tmux TEAM` shows a team's agents in tmux windows"),
		checkJournal(),
		checkWeb(cfg),
	}
	if cfg != nil && len(cfg.Teams) > 0 {
		ectx, cancel := context.WithTimeout(ctx, o.Timeout)
		w := readWorkerEnv(ectx)
		cancel()
		for _, t := range cfg.Teams {
			checks = append(checks, checkAgent(o.ConfigPath, t, w))
			if t.Agent.Kind == config.AgentCodex {
				checks = append(checks, checkCodexKey(o.ConfigPath, t, w))
			}
			if len(geminiModes(t)) > 0 {
				checks = append(checks, checkGemini(o.ConfigPath, t, w))
			}
			if runs, _ := runsOpencode(t); runs {
				checks = append(checks, checkOpencode(o.ConfigPath, t, w))
			}
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
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.FindWorker == nil {
		unitDir, bin := o.UnitDir, o.Bin
		o.FindWorker = func() (string, error) { return ptyworker.FindBinaryFor(installedLegion(unitDir, bin)) }
	}
	return o
}

// withTimeout runs check with its own deadline.
func withTimeout(ctx context.Context, d time.Duration, check func(context.Context) Check) Check {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return check(ctx)
}
