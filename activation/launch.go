package activation

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units/unitname"
)

// checkLaunch checks every field of a spawn request and returns the launch
// it describes, with the unit name derived from the team, the issue (or
// the name, for a session without an issue) and the mode. A bad field is a
// bad_request error naming the field and what it should be. No field gets
// a default: supervision values come from the caller's legion.toml.
func checkLaunch(a api.SpawnArgs) (launch, error) {
	bad := func(field, format string, args ...any) error {
		return api.Errorf(api.CodeBadRequest, "spawn: field %s: %s", field, fmt.Sprintf(format, args...))
	}
	l := launch{
		name: a.Name, id: a.ID, agentSession: a.AgentSession, team: a.Team, issue: a.Issue, mode: a.Mode, role: a.Role,
		cwd: a.Cwd, env: a.Env, envFiles: a.EnvFiles, argvNew: a.Argv, argvRes: a.ArgvResume, prepare: a.Prepare, kubeFiles: a.KubeFiles,
		watch: a.Watch, resumeMarker: a.ResumeMarker, staleAfter: time.Duration(a.StaleAfter), agent: a.Agent, ownCommands: a.OwnCommands, dialogMarkers: a.DialogMarkers, legion: a.Legion, sandbox: a.Sandbox,
		startLimitInterval: time.Duration(a.StartLimitInterval), ringSize: a.RingSize,
		reuseLive: a.Reuse, instructions: a.Instructions, maxLive: a.MaxLive,
	}
	if a.Team == "" || strings.ContainsFunc(a.Team, isCtl) {
		return launch{}, bad("team", "%q: want the team's name (printable, not empty)", a.Team)
	}
	id, err := uuid.Parse(a.TeamID)
	if err != nil || len(a.TeamID) != 36 || id == uuid.Nil {
		return launch{}, bad("team_id", "%q: want the team's UUID (its id in legion.toml)", a.TeamID)
	}
	l.teamID = id
	if err := api.ValidateName(a.Name); err != nil {
		return launch{}, bad("name", "%v", err)
	}
	if u, err := uuid.Parse(a.ID); err != nil || len(a.ID) != 36 || u == uuid.Nil {
		return launch{}, bad("id", "%q: want the session's UUID", a.ID)
	}
	if a.AgentSession != "" {
		if u, err := uuid.Parse(a.AgentSession); err != nil || len(a.AgentSession) != 36 || u == uuid.Nil {
			return launch{}, bad("agent_session", "%q: want the agent conversation's UUID, or nothing for id's", a.AgentSession)
		}
	}
	if strings.ContainsFunc(a.Issue, isCtl) {
		return launch{}, bad("issue", "%q holds control characters", a.Issue)
	}
	if a.Role != roleWorker && a.Role != roleCommand {
		return launch{}, bad("role", "%q: want %q or %q", a.Role, roleWorker, roleCommand)
	}
	part := a.Issue
	if part == "" {
		part = a.Name
	}
	if a.Mode == "" {
		return launch{}, bad("mode", "empty: want the session's mode (plan, implement, ..., or spawn)")
	}
	if l.unit, err = unitname.WorkerUnit(l.teamShort(), part, a.Mode); err != nil {
		return launch{}, bad("mode", "unit name for %s in mode %q: %v", part, a.Mode, err)
	}
	if !filepath.IsAbs(a.Cwd) {
		return launch{}, bad("cwd", "%q is not an absolute path", a.Cwd)
	}
	if t := a.Kubernetes; t != nil {
		// The paths are the pod's: nothing to look at here.
		switch {
		case t.Namespace == "":
			return launch{}, bad("kubernetes.namespace", "empty: want the team's namespace")
		case t.Image == "":
			return launch{}, bad("kubernetes.image", "empty: want the worker image")
		case t.Storage == "":
			return launch{}, bad("kubernetes.storage", "empty: want the size of the issue's volume, e.g. \"10Gi\"")
		case a.Sandbox != nil:
			return launch{}, bad("sandbox", "not on Kubernetes: the pod's security context confines the agent")
		}
	} else if fi, err := os.Stat(a.Cwd); err != nil || !fi.IsDir() {
		return launch{}, bad("cwd", "%s is not a directory", a.Cwd)
	}
	if err := checkArgv(a.Argv); err != nil {
		return launch{}, bad("argv", "%v", err)
	}
	if len(a.ArgvResume) > 0 {
		if a.Watch == "" {
			return launch{}, bad("argv_resume", "needs watch (the session file whose existence picks it)")
		}
		if err := checkArgv(a.ArgvResume); err != nil {
			return launch{}, bad("argv_resume", "%v", err)
		}
	}
	if len(a.Prepare) > proto.MaxPrepare {
		return launch{}, bad("prepare", "%d commands: want at most %d", len(a.Prepare), proto.MaxPrepare)
	}
	for i, argv := range a.Prepare {
		if err := checkArgv(argv); err != nil {
			return launch{}, bad(fmt.Sprintf("prepare[%d]", i), "%v", err)
		}
	}
	if len(a.KubeFiles) > 0 {
		if a.Kubernetes == nil {
			return launch{}, bad("kube_files", "not on this engine: files of a session's spec Secret are for a session on Kubernetes (the team's engine \"kubernetes\"); a session on this machine reads its files where they are")
		}
		size := 0
		for _, name := range slices.Sorted(maps.Keys(a.KubeFiles)) {
			if err := wire.CheckFileName(name); err != nil {
				return launch{}, bad(fmt.Sprintf("kube_files[%q]", name), "%v", err)
			}
			size += len(a.KubeFiles[name])
		}
		if size > api.MaxKubeFiles {
			return launch{}, bad("kube_files", "%d bytes in all: want at most %d (a Secret holds 1 MiB, the spec included)", size, api.MaxKubeFiles)
		}
	}
	for i, kv := range a.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return launch{}, bad("env", "entry %d %q is not KEY=VALUE", i, kv)
		}
	}
	if err := proto.CheckEnvFiles(a.EnvFiles); err != nil {
		return launch{}, bad("env_files", "%v", err)
	}
	switch {
	case a.Agent != "" && a.Agent != proto.AgentClaude && a.Agent != proto.AgentCustom:
		return launch{}, bad("agent", "%q: want %q, %q, or nothing (custom)", a.Agent, proto.AgentClaude, proto.AgentCustom)
	case a.Watch != "" && !filepath.IsAbs(a.Watch):
		return launch{}, bad("watch", "%q is not an absolute path", a.Watch)
	case a.Watch != "" && a.StaleAfter <= 0:
		return launch{}, bad("stale_after", "want a positive duration with watch")
	case a.StaleAfter < 0:
		return launch{}, bad("stale_after", "want a positive duration (without watch: no hook event (claude) or no output (custom) for this long is stale), or nothing")
	case a.Watch != "" && a.StartupGrace == nil:
		return launch{}, bad("startup_grace", "missing: want a duration with watch (worker.startup_grace in legion.toml)")
	case a.Watch == "" && a.StartupGrace != nil:
		return launch{}, bad("startup_grace", "needs watch (the grace is for its first write)")
	}
	if a.StartupGrace != nil {
		l.startupGrace = time.Duration(*a.StartupGrace)
	}
	if a.Cooldown == nil {
		return launch{}, bad("cooldown", "missing: want a duration such as \"30s\" (the team's restart_cooldown in legion.toml; \"0s\" restarts at once)")
	}
	l.cooldown = time.Duration(*a.Cooldown)
	if a.StartLimitBurst < 1 || int64(a.StartLimitBurst) > int64(^uint32(0)) {
		return launch{}, bad("start_limit_burst", "%d: want a count of at least 1 (the team's start_limit_burst)", a.StartLimitBurst)
	}
	l.startLimitBurst = uint32(a.StartLimitBurst)
	if a.StartLimitInterval <= 0 {
		return launch{}, bad("start_limit_interval", "%s: want a positive duration (the team's start_limit_interval)", time.Duration(a.StartLimitInterval))
	}
	if a.RingSize < proto.MinRingSize || a.RingSize > proto.MaxRingSize {
		return launch{}, bad("ring_size", "%d: want %d to %d bytes (worker.ring_size)", a.RingSize, proto.MinRingSize, proto.MaxRingSize)
	}
	return l, nil
}

// checkArgv checks a command: a program, absolute or a bare name looked
// up in the worker's PATH (never relative to a directory), and arguments
// without NUL bytes.
func checkArgv(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return fmt.Errorf("empty: want the program and its arguments")
	}
	if strings.Contains(argv[0], "/") && !filepath.IsAbs(argv[0]) {
		return fmt.Errorf("program %q is a relative path: want an absolute path or a name found in PATH", argv[0])
	}
	for i, s := range argv {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("argument %d holds a NUL byte", i)
		}
	}
	return nil
}

func isCtl(r rune) bool { return r < 0x20 || r == 0x7f }
