package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent/claude/anthropictest"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/units"
	"github.com/legion-dev/legion/units/hostprobe"
	"github.com/legion-dev/legion/units/sandbox"
	"github.com/legion-dev/legion/units/unitname"
)

// controllerInterval is the demo controller's tick (unit events wake it
// sooner).
const controllerInterval = "2s"

// setUp makes the temp dir, picks the manager, writes the workspace, config
// and script, adds the issues, installs the units and starts the
// controller.
func (d *run) setUp(ctx context.Context) error {
	tmp, err := os.MkdirTemp("", "legion-demo-")
	if err != nil {
		return fmt.Errorf("demo: make temp dir: %w", err)
	}
	d.tmp = tmp
	if err := d.pickManager(ctx); err != nil {
		return err
	}
	ws := filepath.Join(tmp, "workspace")
	if err := makeWorkspace(ctx, ws); err != nil {
		return err
	}
	cfgPath := filepath.Join(tmp, "legion.toml")
	if d.sb != nil {
		// The default path, so every process of the sandbox finds it.
		cfgPath = filepath.Join(d.sb.Home, ".config", "legion", "legion.toml")
	}
	script := filepath.Join(tmp, "agent-script")
	if err := os.WriteFile(script, []byte(Script(d.o.Bin)), 0o600); err != nil {
		return fmt.Errorf("demo: write agent script: %w", err)
	}
	agent := []string{"/usr/bin/env", "LEGION_SCRIPT_FILE=" + script, d.o.Bin, "scripted-agent"}
	if d.o.Agent == AgentClaude {
		d.api = anthropictest.Start()
		agent = claudeArgv(d.o.ClaudeCode, d.api.URL)
	}
	if err := writeConfig(cfgPath, d.team, ws, agent); err != nil {
		return err
	}
	if err := os.Setenv(config.EnvConfig, cfgPath); err != nil {
		return err
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	t, _ := cfg.Team(d.team)
	d.short = t.ShortID()
	if d.state, err = config.StateDir(); err != nil {
		return err
	}
	if d.sb == nil {
		d.left = recordLeftovers(d.state, d.workerHome(ctx))
	}
	tm, err := team.Open(t, cfgPath, d.state)
	if err != nil {
		return err
	}
	d.worktrees = tm.Worktrees.Dir
	if d.store, err = tm.Local(); err != nil {
		return err
	}
	for _, title := range Issues {
		is, err := d.store.Add(ctx, title)
		if err != nil {
			return fmt.Errorf("demo: add issue: %w", err)
		}
		d.issues = append(d.issues, is.ID)
	}
	if d.api != nil {
		scriptClaude(d.api, tm, d.o.Bin, d.issues)
	}
	fmt.Fprintf(d.o.Out, "team %s: workspace %s, %d issues in Todo\n", d.team, ws, len(Issues))
	if d.o.Web {
		if err := d.serveWeb(cfgPath); err != nil {
			return err
		}
	}
	if err := d.install(ctx, t, cfgPath); err != nil {
		return err
	}
	what := "scripted agent"
	if d.api != nil {
		what = "Claude Code " + ClaudeCodeVersion + " against a local fake of the Anthropic API at " + d.api.URL
	}
	fmt.Fprintf(d.o.Out, "started %s (wip_limit 2, %s)\n\n", d.controllerUnit(), what)
	return nil
}

// workerHome is HOME of the user manager's environment, which workers
// get (the scripted agent writes its session files below it), else this
// process's.
func (d *run) workerHome(ctx context.Context) string {
	if env, err := d.mgr.Environment(ctx); err == nil {
		for _, kv := range slices.Backward(env) {
			if v, ok := strings.CutPrefix(kv, "HOME="); ok && filepath.IsAbs(v) {
				return v
			}
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return home
}

// pickManager connects to the user's manager or starts a private one, and
// points this process's environment at it.
func (d *run) pickManager(ctx context.Context) error {
	if !d.o.Sandbox {
		m, err := units.Connect(ctx)
		if err == nil {
			d.mgr = m
			return d.useUserManager(ctx)
		}
		if !errors.Is(err, units.ErrNoManager) {
			return fmt.Errorf("demo: %w", err)
		}
		d.o.Log.Info("demo: no user manager", "err", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("demo: no systemd user manager is reachable, and starting a private one needs root.\n" +
			"Either run it where your user manager runs (a login session; `loginctl enable-linger $USER` keeps one without), " +
			"or run it as root (`sudo make demo`): it then starts a private manager for the demo")
	}
	fmt.Fprintln(d.o.Out, "no systemd user manager here: starting a private one for the demo (units/sandbox)")
	sb, err := sandbox.Start(ctx, sandbox.Options{Name: "legion-demo"})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d.sb = sb
	for _, kv := range sb.Vars() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	m, err := units.Connect(ctx)
	if err != nil {
		return fmt.Errorf("demo: connect to the private manager: %w", err)
	}
	d.mgr = m
	d.team = "demo"
	d.unitDir = filepath.Join(sb.Home, ".config", "systemd", "user")
	return nil
}

// useUserManager checks the user's manager runs no Legion unit, and picks
// the runtime unit dir and a fresh team name.
func (d *run) useUserManager(ctx context.Context) error {
	loaded, err := d.mgr.List(ctx, "legion@*.service", "legion-*.service", unitname.SocketUnit, unitname.HelperUnit)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	for _, u := range loaded {
		if u.Exists() {
			return fmt.Errorf("demo: your user manager already has Legion's %s loaded (%s); the demo would share its helper and its cleanup would stop it. Run `legion uninstall` first, or run the demo as root with --sandbox (a private manager)", u.Name, u.ActiveState)
		}
	}
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return errors.New("demo: XDG_RUNTIME_DIR is not set though a user manager answered")
	}
	d.unitDir = filepath.Join(rt, "systemd", "user")
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	d.team = "demo-" + hex.EncodeToString(b[:])
	fmt.Fprintf(d.o.Out, "using your systemd user manager: team %s, units in %s (removed at the end)\n", d.team, d.unitDir)
	return nil
}

// install writes the units and the demo drop-in, and starts the socket and
// the controller.
func (d *run) install(ctx context.Context, t config.Team, cfgPath string) error {
	tu := units.TeamUnits{
		Name: t.Name, ShortID: t.ShortID(), RestartCooldown: t.RestartCooldown,
		StartLimitInterval: t.StartLimitInterval, StartLimitBurst: uint32(t.StartLimitBurst),
	}
	d.started = true
	// As legion install does: what this user manager cannot apply is left
	// out, and said.
	rep := hostprobe.Probe(ctx, hostprobe.Options{Bin: d.o.Bin})
	for _, n := range rep.Notes(units.Keys([]units.TeamUnits{tu})) {
		fmt.Fprintf(d.o.Out, "note: %s\n", n)
	}
	if d.sb != nil {
		if _, err := units.Install(ctx, units.InstallOptions{UnitDir: d.unitDir, Bin: d.o.Bin, Defaults: units.RestartPolicy(config.DefaultTeam().Supervision()), Teams: []units.TeamUnits{tu}, Manager: d.mgr, Unsupported: rep.Unsupported()}); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	} else {
		// Not Install: it enables legion.socket, a link in the user's
		// persistent configuration. Write the files, reload, start.
		files, err := units.Generate(units.GenerateOptions{Bin: d.o.Bin, Defaults: units.RestartPolicy(config.DefaultTeam().Supervision()), Teams: []units.TeamUnits{tu}, Unsupported: rep.Unsupported()})
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		for _, f := range files {
			if err := writeUnitFile(d.unitDir, f); err != nil {
				return err
			}
		}
	}
	unit := d.controllerUnit()
	if err := writeUnitFile(d.unitDir, dropIn(unit, d.o.Bin, cfgPath)); err != nil {
		return err
	}
	if err := d.mgr.Reload(ctx); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if d.sb == nil {
		if err := d.mgr.Start(ctx, unitname.SocketUnit); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	if err := d.mgr.Start(ctx, unit); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

// dropIn makes the controller tick often and read the demo's config: a
// drop-in for unit, rendered by units like every unit Legion writes.
func dropIn(unit, bin, cfgPath string) units.File {
	u := units.Unit{Name: unit, Options: []units.Option{
		units.Environment([]string{config.EnvConfig + "=" + cfgPath}),
		units.FileOnly("Service", "ExecStart", "", true), // empty: drop the unit's own ExecStart=
		units.ExecWithSpecifiers("ExecStart", []string{bin, "controller", "--interval", controllerInterval}, "%i"),
	}}
	return units.File{Path: unit + ".d/60-demo.conf", Data: u.File()}
}

// writeUnitFile writes f under dir (0700 dirs), refusing to replace a file
// Legion did not write.
func writeUnitFile(dir string, f units.File) error {
	p := filepath.Join(dir, f.Path)
	if old, err := os.ReadFile(p); err == nil && !bytes.HasPrefix(old, []byte(units.Header+"\n")) {
		return fmt.Errorf("demo: %s exists and was not written by legion; move it away", p)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("demo: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := os.WriteFile(p, f.Data, 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

// makeWorkspace makes a git repository with one commit on main.
func makeWorkspace(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("demo: workspace: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# Legion demo workspace\n"), 0o644); err != nil {
		return fmt.Errorf("demo: workspace: %w", err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "user.name", "Legion demo"},
		{"config", "user.email", "demo@legion.invalid"},
		{"add", "README.md"},
		{"commit", "-q", "-m", "Start the demo workspace"},
	} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("demo: workspace: git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// writeConfig writes the demo's legion.toml: one local team, wip_limit 2,
// the agent argv agent (before its session flags).
func writeConfig(path, name, ws string, agent []string) error {
	env := agent
	cfg := map[string]any{
		"helper": map[string]any{"idle_exit": "0s"},
		"teams": map[string]any{
			name: map[string]any{
				"id":               uuid.NewString(),
				"workspace":        ws,
				"issue_prefix":     "DEMO",
				"wip_limit":        2,
				"restart_cooldown": "1s",
				"agent": map[string]any{
					"new":    append(append([]string(nil), env...), "--session-id", "{session_id}", "{prompt}"),
					"resume": append(append([]string(nil), env...), "--resume", "{session_id}", "{prompt}"),
				},
			},
		},
	}
	var b bytes.Buffer
	b.WriteString("# legion demo: a throwaway team; removed when the demo ends.\n")
	if err := toml.NewEncoder(&b).Encode(cfg); err != nil {
		return fmt.Errorf("demo: encode config: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("demo: write config: %w", err)
	}
	return nil
}

// Script is the scripted agent's script for the demo: each mode does its
// phase's work and labels the issue. The finisher moves the issue to Done
// before `worktree finish`, because finishing removes the worktree the
// agent's commands run in.
func Script(bin string) string {
	q := func(s string) string { return "'" + s + "'" }
	b := q(bin)
	return strings.Join([]string{
		"# legion demo agent: one branch per mode (LEGION_MODE, which the worker sets)",
		"if-env LEGION_MODE=plan say Planning $LEGION_ISSUE",
		"if-env LEGION_MODE=plan work 1s",
		"if-env LEGION_MODE=plan run " + b + " issue label $LEGION_TEAM $LEGION_ISSUE worker-done",
		"if-env LEGION_MODE=implement say Implementing $LEGION_ISSUE",
		"if-env LEGION_MODE=implement work 1s",
		"if-env LEGION_MODE=implement run touch $LEGION_ISSUE.txt",
		"if-env LEGION_MODE=implement run git add $LEGION_ISSUE.txt",
		"if-env LEGION_MODE=implement run git commit -q -m 'Implement $LEGION_ISSUE'",
		"if-env LEGION_MODE=implement run " + b + " issue label $LEGION_TEAM $LEGION_ISSUE worker-done",
		"if-env LEGION_MODE=review say Reviewing $LEGION_ISSUE",
		"if-env LEGION_MODE=review work 1s",
		"if-env LEGION_MODE=review run " + b + " issue label $LEGION_TEAM $LEGION_ISSUE worker-approved",
		"if-env LEGION_MODE=review run " + b + " issue label $LEGION_TEAM $LEGION_ISSUE worker-done",
		"if-env LEGION_MODE=retro say Looking back on $LEGION_ISSUE",
		"if-env LEGION_MODE=retro work 1s",
		"if-env LEGION_MODE=retro run " + b + " issue label $LEGION_TEAM $LEGION_ISSUE worker-done",
		"if-env LEGION_MODE=finish say Finishing $LEGION_ISSUE",
		"if-env LEGION_MODE=finish work 1s",
		"if-env LEGION_MODE=finish run " + b + " issue move $LEGION_TEAM $LEGION_ISSUE Done",
		"if-env LEGION_MODE=finish run " + b + " worktree finish $LEGION_TEAM $LEGION_ISSUE",
		"",
	}, "\n")
}

// cleanup undoes setUp: stops and uninstalls the units, stops the
// sandbox, removes the temp dir (kept with --keep) and, with the user's
// manager, the team's state dirs and the other files of its sessions
// (leftovers).
func (d *run) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	if d.stopWeb != nil {
		if err := d.stopWeb(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.mgr != nil && d.started {
		// The controller first: on stop it stops the team's workers.
		if err := d.mgr.Stop(ctx, d.controllerUnit()); err != nil && !errors.Is(err, units.ErrNoSuchUnit) {
			errs = append(errs, fmt.Errorf("demo: stop %s: %w", d.controllerUnit(), err))
		}
		if _, err := units.Uninstall(ctx, units.UninstallOptions{UnitDir: d.unitDir, Manager: d.mgr}); err != nil {
			errs = append(errs, fmt.Errorf("demo: %w", err))
		}
	}
	if d.mgr != nil {
		d.mgr.Close()
	}
	if d.api != nil {
		d.api.Close()
	}
	if d.sb != nil {
		if err := d.sb.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("demo: %w", err))
		}
	} else if d.short != "" && d.state != "" {
		for _, sub := range []string{"teams", "worktrees"} {
			if err := os.RemoveAll(filepath.Join(d.state, sub, d.short)); err != nil {
				errs = append(errs, fmt.Errorf("demo: %w", err))
			}
		}
		if d.left != nil {
			if err := d.left.remove(d.team, d.worktrees, d.issues); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if d.tmp != "" && !d.o.Keep {
		if err := os.RemoveAll(d.tmp); err != nil {
			errs = append(errs, fmt.Errorf("demo: %w", err))
		}
	}
	return errors.Join(errs...)
}
