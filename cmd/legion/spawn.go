package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/team"
)

// spawnFlags are the flags of `legion spawn`.
type spawnFlags struct {
	team        string
	name        string
	cwd         string
	watch       string
	staleAfter  time.Duration
	cooldown    time.Duration
	cooldownSet bool // --cooldown given (0s means no pause, not the team's)
	env         []string
	prepare     []string // JSON arrays (parsePrepare)
	asJSON      bool
}

func newSpawnCmd(g *globals) *cobra.Command {
	var f spawnFlags
	cmd := &cobra.Command{
		Use:   "spawn [flags] -- CMD [ARGS...]",
		Short: "Run a command as a supervised session that outlives its caller",
		Long: `Spawn runs CMD in a PTY inside a transient systemd unit of its own
(legion-<team>-<name>-spawn.service), through the helper. The session keeps
running when the caller exits; attach to it with legion attach, follow it
with legion sessions logs -f. CMD is run as given: no shell is involved.

With --watch FILE the session is restarted by systemd (after --cooldown)
when FILE has not changed for --stale-after. The restart cooldown, the start
limit, the startup grace and the scrollback are the team's, read from
legion.toml here; the built-in team "adhoc" has those of [defaults]. Prints
the session name, or with --json {name, id, unit}.

Each --prepare '["PROGRAM","ARG",...]' is a command the session's worker
runs before CMD at every start (the first and each restart), in order, in
/ with CMD's environment, for at most 5 minutes each. One that fails keeps
CMD from starting: that start fails with its stderr's tail as the cause,
and systemd tries again after the cooldown, up to the start limit. The
spawn answers once the first start's commands are done. Unlike CMD, a bare
PROGRAM is looked up in the worker's PATH (the user manager's), not this
shell's.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("spawn: no command given (usage: %s)", cmd.UseLine())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.cooldownSet = cmd.Flags().Changed("cooldown")
			return runSpawn(cmd.Context(), cmd.OutOrStdout(), g, f, args)
		},
	}
	// Flags stop at the command: `legion spawn sh -c 'x'` needs no "--".
	cmd.Flags().SetInterspersed(false)
	fl := cmd.Flags()
	fl.StringVar(&f.team, "team", "", "team the session belongs to (default: the built-in team \"adhoc\")")
	fl.StringVar(&f.name, "name", "", "session name (default: the command's name and a random suffix)")
	fl.StringVar(&f.cwd, "cwd", "", "working directory (default: the current one)")
	fl.StringVar(&f.watch, "watch", "", "file whose changes show the session is alive (e.g. the agent's session file)")
	fl.DurationVar(&f.staleAfter, "stale-after", 0, "with --watch: restart the session when FILE is older than this")
	fl.DurationVar(&f.cooldown, "cooldown", 0, "pause before systemd restarts the session; 0s restarts at once (default: the team's restart_cooldown)")
	fl.StringArrayVarP(&f.env, "setenv", "E", nil, "set an environment variable for the command, KEY=VALUE (repeatable)")
	fl.StringArrayVar(&f.prepare, "prepare", nil, "a command to run before CMD at each start, as a JSON array: '[\"make\",\"deps\"]' (repeatable; no shell)")
	fl.BoolVar(&f.asJSON, "json", false, "print {name, id, unit} as JSON")
	return cmd
}

func runSpawn(ctx context.Context, out io.Writer, g *globals, f spawnFlags, argv []string) error {
	if f.name != "" {
		if err := checkName(f.name); err != nil {
			return err
		}
	}
	if f.staleAfter != 0 && f.watch == "" {
		return usageError{fmt.Errorf("spawn: --stale-after needs --watch FILE")}
	}
	if f.watch != "" && f.staleAfter <= 0 {
		return usageError{fmt.Errorf("spawn: --watch needs a positive --stale-after")}
	}
	if f.staleAfter < 0 || f.cooldown < 0 {
		return usageError{fmt.Errorf("spawn: --stale-after and --cooldown must not be negative")}
	}
	cwd := f.cwd
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("spawn: current directory: %w", err)
		}
		cwd = wd
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		return fmt.Errorf("spawn: --cwd: %w", err)
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return usageError{fmt.Errorf("spawn: --cwd %s: not a directory", cwd)}
	}
	watch := f.watch
	if watch != "" {
		if watch, err = filepath.Abs(watch); err != nil {
			return fmt.Errorf("spawn: --watch: %w", err)
		}
	}
	// Resolve the program in the caller's PATH, as systemd-run does: the
	// unit's environment is the user manager's, not this shell's.
	argv = append([]string(nil), argv...)
	if !strings.Contains(argv[0], "/") {
		p, err := exec.LookPath(argv[0])
		if err != nil {
			return fmt.Errorf("spawn: command %q not found in PATH", argv[0])
		}
		argv[0] = p
	}
	if argv[0], err = filepath.Abs(argv[0]); err != nil {
		return fmt.Errorf("spawn: %w", err)
	}
	for _, kv := range f.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return usageError{fmt.Errorf("spawn: --setenv %q: want KEY=VALUE", kv)}
		}
	}

	prepare, err := parsePrepare(f.prepare)
	if err != nil {
		return usageError{fmt.Errorf("spawn: %w", err)}
	}

	cfg, err := config.LoadOrEmpty(g.configPath)
	if err != nil {
		return fmt.Errorf("spawn: %w", err)
	}
	t, err := cfg.SpawnTeam(f.team)
	if err != nil {
		return usageError{fmt.Errorf("spawn: --team: %w", err)}
	}
	a := team.Launch(t, cfg.Worker)
	a.Mode, a.Role = api.ModeSpawn, "command"
	a.Cwd, a.Argv, a.Env, a.Prepare = cwd, argv, f.env, prepare
	if watch != "" {
		a.Watch, a.StaleAfter = watch, api.Duration(f.staleAfter)
		a.StartupGrace = new(api.Duration(cfg.Worker.StartupGrace))
	}
	if f.cooldownSet {
		a.Cooldown = new(api.Duration(f.cooldown))
	}

	c, err := api.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	// A generated name is tried again with another suffix when a session
	// has it already.
	for try := 1; ; try++ {
		a.Name = f.name
		if a.Name == "" {
			a.Name = newSessionName(argv[0])
		}
		a.ID = uuid.NewSHA1(t.ID, []byte(a.Name+":"+api.ModeSpawn)).String()
		res, err := c.Spawn(ctx, a)
		if errors.Is(err, api.ErrExists) && f.name == "" && try < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("spawn %s: %w", argv[0], err)
		}
		if f.asJSON {
			return writeJSON(out, res)
		}
		_, err = fmt.Fprintln(out, res.Name)
		return err
	}
}

// parsePrepare reads --prepare values: each a JSON array of strings, the
// program first (an absolute path, or a name the worker finds in its
// PATH: the helper checks it as it checks CMD).
func parsePrepare(flags []string) ([][]string, error) {
	var out [][]string
	for _, f := range flags {
		var argv []string
		dec := json.NewDecoder(strings.NewReader(f))
		if err := dec.Decode(&argv); err != nil {
			return nil, fmt.Errorf("--prepare %q: want a JSON array of strings such as '[\"git\",\"pull\"]': %v", f, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("--prepare %q: want one JSON array, and nothing after it", f)
		}
		if len(argv) == 0 || argv[0] == "" {
			return nil, fmt.Errorf("--prepare %q: empty: want the program and its arguments", f)
		}
		out = append(out, argv)
	}
	return out, nil
}

// newSessionName makes a session name from a program path: its base name
// (characters outside [A-Za-z0-9_-] dropped, at most 40) and 4 random hex
// digits.
func newSessionName(prog string) string {
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return -1
	}, filepath.Base(prog))
	base = strings.TrimLeft(base, "-")
	if len(base) > 40 {
		base = base[:40]
	}
	if base == "" {
		base = "cmd"
	}
	var b [2]byte
	rand.Read(b[:])
	return base + "-" + hex.EncodeToString(b[:])
}
