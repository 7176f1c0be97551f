package agent

import (
	"os/exec"
	"path/filepath"

	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/envlist"
)

// Checker is a kind with a check of its own for `legion doctor`: what its
// agents need besides their program's version (which the doctor checks
// for every kind with a pinned CLI): credentials, a runtime, a config
// file Legion copies. It reads the environment the user manager gives
// workers, never the shell's, and never shows a key.
type Checker interface {
	// CheckName names the check, e.g. "codex credentials"; the doctor
	// adds " of team NAME".
	CheckName() string
	// Check checks what the team's agents of this kind need.
	Check(e CheckEnv) Check
}

// CheckEnv is what a kind's check reads.
type CheckEnv struct {
	// Team is the team whose agents are checked.
	Team config.Team
	// Modes are the modes in which Team runs this kind (agent.kind and
	// agent.kind_by_mode).
	Modes []string
	// Env is the user manager's environment (KEY=VALUE), which workers
	// get.
	Env []string
	// EnvironmentDir is the environment.d(5) directory of the user's own
	// settings, where a fix puts a variable for the manager.
	EnvironmentDir string
}

// Getenv is key's value in e.Env; "" when unset.
func (e CheckEnv) Getenv(key string) string {
	v, _ := envlist.Lookup(e.Env, key)
	return v
}

// LookPath is prog's path in the manager's PATH ([LookIn]), or "" when
// it is not there.
func (e CheckEnv) LookPath(prog string) string { return LookIn(prog, e.Getenv("PATH")) }

// LookIn finds prog (a name without '/') in the directories of a PATH
// value as execvp does, absolute directories only (a worker's cwd is its
// worktree: "." means nothing fixed); "" when no directory has it.
func LookIn(prog, path string) string {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(dir, prog)); err == nil {
			return p
		}
	}
	return ""
}

// Check is what a kind's check found.
type Check struct {
	Status CheckStatus
	Detail string // what was found
	Fix    string // what to do; set when Status is not CheckOK
}

// CheckStatus is a check's verdict, spelled as `legion doctor` prints it.
type CheckStatus string

// Check verdicts.
const (
	CheckOK   CheckStatus = "ok"
	CheckWarn CheckStatus = "warn"
	CheckFail CheckStatus = "fail"
)
