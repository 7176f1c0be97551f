package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/cli/doctor"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/contrib"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/hostprobe"
)

// installFlags are the flags of `legion install`.
type installFlags struct {
	dryRun   bool
	skills   bool
	unitDir  string
	bin      string
	enable   []string
	packaged bool
}

func newInstallCmd(g *globals) *cobra.Command {
	var f installFlags
	cmd := &cobra.Command{
		Use:   "install [--dry-run] [--unit-dir DIR] [--bin PATH] [--enable TEAM]...",
		Short: "Install Legion's systemd user units and reload the user manager",
		Long: `Install writes legion.socket, legion.service (the helper), the controller
template legion@.service, and the dashboard's legion-web.socket (web.address:
web.port and $XDG_RUNTIME_DIR/legion/web.sock) and legion-web.service (see
legion web) into the user unit directory, plus for each team in
legion.toml a drop-in for its controller (restart cooldown, start limit), its
slice legion-<short>.slice (resource limits), and a drop-in for all its
workers, legion-<short>-.service.d/50-legion.conf (each agent's memory_max and
cpu_weight, and the workers' sandboxing: [teams.NAME.hardening]); workers
started after install get it. Every unit is hardened (systemd.exec(5)
sandboxing; see legion.toml(5) for the workers' directives). Drop-ins and
slices of teams no longer configured are removed. It then reloads the user manager, enables
and starts legion.socket and legion-web.socket, and enables the controllers of the teams named with
--enable, so they start at login (run loginctl enable-linger to start them
at boot, without a login session, and keep every agent running after you
log out; install says so when lingering is off, or unknown for want of
systemd-logind).

Before writing, install asks the user manager what it can apply: one transient
unit per group of directives (systemd-run --user) looks for the group's effect
from inside. What the manager cannot apply (PrivateUsers= where user
namespaces are denied, as on Ubuntu 24.04) is left out of every unit, named on
stderr with why and the fix, and noted in a comment in each file that lost it;
resource limits the kernel does not enforce here are still written, and named.
After a fix, run install again: it writes them back (legion doctor's unit
files check says so).

Only files that changed are written: running install twice changes nothing.
A file Legion did not write is never overwritten.

ExecStart= lines use the resolved absolute path of this binary unless --bin
is given.`,
		Example: `  legion install --dry-run
  legion install --enable demo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInstall(cmd.Context(), g, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.skills, "skills", false, "also write legion-controller and legion-worker skills, generated from the agents' instructions, into ~/.claude/skills, for agents run by hand")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print every file install would write (---name--- then the text) and change nothing")
	fl.StringVar(&f.unitDir, "unit-dir", "", "unit directory (default $XDG_CONFIG_HOME/systemd/user)")
	fl.StringVar(&f.bin, "bin", "", "absolute path of the legion binary for ExecStart= (default: this binary)")
	fl.StringArrayVar(&f.enable, "enable", nil, "enable the controller of team `TEAM` (repeat for several teams)")
	fl.BoolVar(&f.packaged, "packaged", false, "write only the static units, for packages and make install (no teams, no manager)")
	if err := fl.MarkHidden("packaged"); err != nil {
		panic(err)
	}
	return cmd
}

func runInstall(ctx context.Context, g *globals, f installFlags, stdout, stderr io.Writer) error {
	o := units.InstallOptions{
		Defaults: units.RestartPolicy(config.DefaultTeam().Supervision()),
		UnitDir:  f.unitDir,
		Enable:   f.enable,
		Packaged: f.packaged,
		DryRun:   f.dryRun,
		Out:      stdout,
	}
	if o.UnitDir == "" {
		if f.packaged {
			return usageError{errors.New("install --packaged needs --unit-dir")}
		}
		o.UnitDir = defaultUnitDir()
	}
	bin, err := legionBinary(f.bin)
	if err != nil {
		return err
	}
	o.Bin = bin
	if !f.packaged {
		cfg, err := config.LoadOrEmpty(g.configPath)
		if err != nil {
			return err
		}
		o.Teams = teamUnits(cfg.Teams)
		o.Kubernetes = slices.ContainsFunc(cfg.Teams, func(t config.Team) bool { return t.Engine == config.EngineKubernetes })
		o.Web = &units.WebUnits{Listen: cfg.Web.Listen()}
		if !cfg.Web.Local() {
			fmt.Fprintf(stderr, "warning: legion-web.socket will listen on %s (web.address in %s): other machines can reach the dashboard's login page over plain HTTP; only its token keeps them out (prefer 127.0.0.1 and ssh -L to $XDG_RUNTIME_DIR/%s)\n", cfg.Web.Listen(), cfg.Path, units.WebSocketPath)
		}
		for _, team := range f.enable {
			if !slices.ContainsFunc(cfg.Teams, func(t config.Team) bool { return t.Name == team }) {
				return usageError{fmt.Errorf("--enable %q: no team of that name in %s", team, cfg.Path)}
			}
		}
	}
	if !f.packaged {
		// What this host's user manager can apply decides what is
		// written; each directive left out is named, with its fix.
		rep := hostprobe.Probe(ctx, hostprobe.Options{Bin: bin})
		o.Unsupported = rep.Unsupported()
		for _, n := range rep.Notes(units.Keys(o.Teams)) {
			fmt.Fprintf(stderr, "warning: %s\n", n)
		}
	}
	if !f.dryRun && !f.packaged {
		m, err := units.Connect(ctx)
		if err != nil {
			return err
		}
		defer m.Close()
		o.Manager = m
	}
	res, err := units.Install(ctx, o)
	if err != nil {
		return err
	}
	verb := func(done, would string) string {
		if f.dryRun {
			return would
		}
		return done
	}
	// With --dry-run stdout holds the files; the plan goes to stderr.
	plan := stdout
	if f.dryRun {
		plan = stderr
	}
	for _, p := range res.Written {
		fmt.Fprintf(plan, "%s %s\n", verb("wrote", "would write"), filepath.Join(o.UnitDir, p))
	}
	for _, p := range res.Removed {
		fmt.Fprintf(plan, "%s %s\n", verb("removed", "would remove"), filepath.Join(o.UnitDir, p))
	}
	for _, u := range res.Enabled {
		fmt.Fprintf(plan, "%s %s\n", verb("enabled", "would enable"), u)
	}
	if len(res.Written) == 0 && len(res.Removed) == 0 {
		fmt.Fprintf(plan, "%s: unit files up to date\n", o.UnitDir)
	}
	if res.WebError != nil {
		fmt.Fprintf(stderr, "warning: the dashboard's socket did not start: %v\n", res.WebError)
	}
	if !f.dryRun && !f.packaged {
		lingerNote(ctx, stderr)
	}
	if f.skills {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("install skills: %w", err)
		}
		dir := filepath.Join(home, ".claude", "skills")
		written, err := contrib.InstallSkills(dir, f.dryRun)
		if err != nil {
			return err
		}
		for _, p := range written {
			fmt.Fprintf(plan, "%s %s\n", verb("wrote", "would write"), p)
		}
		if len(written) == 0 {
			fmt.Fprintf(plan, "%s: skills up to date\n", dir)
		}
	}
	return nil
}

// lingerNote says, on w, when lingering is not known to be on: then the
// units just installed stop at logout and teams start only at login.
func lingerNote(ctx context.Context, w io.Writer) {
	c := doctor.Linger(ctx, doctor.Options{})
	if c.Status != doctor.OK {
		fmt.Fprintf(w, "note: lingering: %s\n  fix: %s\n", c.Detail, c.Fix)
	}
}

// teamUnits maps the configured teams to what the unit generators need.
func teamUnits(teams []config.Team) []units.TeamUnits {
	out := make([]units.TeamUnits, 0, len(teams))
	for _, t := range teams {
		out = append(out, units.TeamUnits{
			Name:               t.Name,
			ShortID:            t.ShortID(),
			RestartCooldown:    t.RestartCooldown,
			StartLimitInterval: t.StartLimitInterval,
			StartLimitBurst:    uint32(max(t.StartLimitBurst, 0)),
			MemoryMax:          t.MemoryMax,
			CPUQuotaPercent:    uint(max(t.CPUQuotaPercent, 0)),
			TasksMax:           t.TasksMax,
			AgentMemoryMax:     t.Agent.MemoryMax,
			AgentCPUWeight:     uint64(max(t.Agent.CPUWeight, 0)),
			HardeningRelax:     t.WorkerRelax(),
			HardeningAdd:       t.Hardening.Add,
		})
	}
	return out
}

// defaultUnitDir is $XDG_CONFIG_HOME/systemd/user, where systemd looks for
// a user's own units.
func defaultUnitDir() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "systemd", "user")
}

// legionBinary is the binary ExecStart= runs: --bin as given (it may not
// exist yet, e.g. /usr/bin/legion under DESTDIR), else this very binary,
// symlinks resolved.
func legionBinary(flag string) (string, error) {
	if flag != "" {
		if !filepath.IsAbs(flag) {
			return "", usageError{fmt.Errorf("--bin %q: want an absolute path", flag)}
		}
		return filepath.Clean(flag), nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the legion binary (give --bin): %w", err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("find the legion binary (give --bin): %w", err)
	}
	return exe, nil
}
