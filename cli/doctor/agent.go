package doctor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/envlist"
	"github.com/legion-dev/legion/units"
)

// agentCheckName names the agent check of a team.
func agentCheckName(team string) string { return "agent of team " + team }

// workerEnv is what a worker unit's process gets: the user manager's
// environment (`systemctl --user show-environment`), read once per Run.
type workerEnv struct {
	env []string
	err error // the manager's environment could not be read
}

// readWorkerEnv reads the manager's environment.
func readWorkerEnv(ctx context.Context) workerEnv {
	m, err := units.Connect(ctx)
	if err != nil {
		return workerEnv{err: err}
	}
	defer m.Close()
	env, err := m.Environment(ctx)
	return workerEnv{env: env, err: err}
}

// get returns the value of key in the manager's environment.
func (w workerEnv) get(key string) string {
	v, _ := envlist.Lookup(w.env, key)
	return v
}

// environmentDir is the environment.d(5) directory of the user's own
// settings, as the manager's environment generator finds it.
func (w workerEnv) environmentDir() string {
	if d := w.get("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "environment.d")
	}
	if h := w.get("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".config", "environment.d")
	}
	return "~/.config/environment.d"
}

// checkAgent: can the team's workers start its agent? The program (argv[0]
// of agent.new and agent.resume) must be an executable file, or a name
// found in the PATH of the user manager's environment: a worker unit gets
// that environment, and the pty-worker looks the agent up in it. The
// shell's PATH does not count (it often has ~/.local/bin, where Claude
// Code's installer puts claude; the manager's seldom has). When the shell
// finds a program the manager does not, the fix names its directory.
func checkAgent(configPath string, t config.Team, w workerEnv) Check {
	c := Check{Name: agentCheckName(t.Name)}
	var progs []string
	for _, argv := range [][]string{t.Agent.New, t.Agent.Resume} {
		if len(argv) > 0 && !slices.Contains(progs, argv[0]) {
			progs = append(progs, argv[0])
		}
	}
	if len(progs) == 0 {
		c.Status, c.Detail = Fail, "no agent command configured"
		c.Fix = fmt.Sprintf("set teams.%s.agent.new and agent.resume in %s", tomlKey(t.Name), configPath)
		return c
	}
	managerPath := w.get("PATH")
	var found, problems []string
	var missing []string   // names the workers will not find
	shellHas := []string{} // where this shell finds them, for each missing one it finds
	status := OK
	for _, prog := range progs {
		switch {
		case strings.ContainsAny(prog, "{}"):
			problems = append(problems, fmt.Sprintf("%q is filled in per session (a placeholder); cannot check it", prog))
			status = worse(status, Warn)
		case strings.Contains(prog, "/"):
			path, err := exec.LookPath(prog)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s is not an executable file", prog))
				status = Fail
				continue
			}
			found = append(found, path)
		case w.err != nil:
			path, err := exec.LookPath(prog)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s not found in this shell's PATH (%s), and the user manager's environment, which workers get, cannot be read: %v",
					prog, os.Getenv("PATH"), w.err))
				status = Fail
				continue
			}
			problems = append(problems, fmt.Sprintf("%s is %s in this shell's PATH, but the user manager's environment, which workers get, cannot be read: %v",
				prog, path, w.err))
			status = worse(status, Warn)
		default:
			if path := agent.LookIn(prog, managerPath); path != "" {
				found = append(found, path)
				continue
			}
			missing = append(missing, prog)
			status = Fail
			if path, err := exec.LookPath(prog); err == nil && filepath.IsAbs(path) {
				shellHas = append(shellHas, path)
				problems = append(problems, fmt.Sprintf("%s not found in the user manager's PATH (%s), which workers get; this shell finds %s",
					prog, managerPath, path))
			} else {
				problems = append(problems, fmt.Sprintf("%s not found in the user manager's PATH (%s), which workers get, nor in this shell's", prog, managerPath))
			}
		}
	}
	c.Status = status
	if status == OK {
		c.Detail = strings.Join(found, ", ")
		if len(found) > 0 && !slices.ContainsFunc(progs, func(p string) bool { return strings.Contains(p, "/") }) {
			c.Detail += " (in the user manager's PATH, which workers get)"
		}
		return c
	}
	c.Detail = strings.Join(problems, "; ")
	key := "teams." + tomlKey(t.Name)
	switch {
	case len(missing) > 0 && len(shellHas) == len(missing):
		var dirs []string
		for _, p := range shellHas {
			if d := filepath.Dir(p); !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
		c.Fix = pathFix(configPath, key, shellHas[0], strings.Join(dirs, ":"), managerPath, w.environmentDir())
	case len(missing) > 0:
		c.Fix = "install the agent; then " + pathFix(configPath, key, "/ABSOLUTE/PATH/OF/"+missing[0], "DIR", managerPath, w.environmentDir())
	case status == Fail:
		c.Fix = fmt.Sprintf("install the agent, or set %s.agent.new and agent.resume in %s to a command that exists", key, configPath)
	case w.err != nil:
		c.Fix = fmt.Sprintf("see the check %q; or start %s.agent.new and agent.resume in %s with an absolute path, which works whatever PATH is", CheckManager, key, configPath)
	default:
		c.Fix = fmt.Sprintf("make sure the placeholder gives an executable file for every issue, or use an absolute path in %s.agent.new and agent.resume of %s", key, configPath)
	}
	return c
}

// pathFix says the three ways to let workers find an agent program at
// prog in dir: an absolute argv[0], the manager's PATH for now, or an
// environment.d file for good. Each is exactly what works: set-environment
// applies to every unit started afterwards until the manager stops; an
// environment.d file is read at the manager's start and at daemon-reload
// (no re-login or daemon-reexec needed), but a PATH set with
// set-environment overrides it until unset.
func pathFix(configPath, key, prog, dir, managerPath, envDir string) string {
	newPath := dir
	if managerPath != "" {
		newPath += ":" + managerPath
	}
	return fmt.Sprintf("one of: start %[1]s.agent.new and agent.resume in %[2]s with %[3]s (an absolute path works whatever PATH is); "+
		"or `systemctl --user set-environment PATH=%[4]s` (for the units started from then on, until the user manager stops); "+
		"or, to last, put the line `PATH=%[5]s:${PATH}` in %[6]s, then `systemctl --user daemon-reload` "+
		"(the manager reads environment.d when it starts and at every daemon-reload; no re-login or daemon-reexec needed; "+
		"a PATH set with set-environment overrides the file until `systemctl --user unset-environment PATH`)",
		key, configPath, prog, newPath, dir, filepath.Join(envDir, "60-legion-path.conf"))
}
