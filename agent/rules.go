package agent

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
)

// PermissionHookTimeout is the timeout of the PermissionRequest hook: the
// worker holds that hook's call until a person allows or denies the tool,
// which may take a night. The other hooks keep Claude Code's default; the
// worker answers them at once.
const PermissionHookTimeout = 24 * time.Hour

// OwnCommands are the groups of Legion's own commands (api.OwnIssue,
// api.OwnState, api.OwnWorktreeFinish) whose permission requests the
// worker of an agent under policy allows at once, for the session's own
// team and issue, in whatever form the model writes them (a variable
// such as $LEGION_ISSUE defeats a CLI's own rules, which read text):
// under allowlist all three, as [AllowRules]; under ask Legion's reports
// (legion issue); under bypass none, since nothing asks.
func OwnCommands(policy config.PermissionPolicy) []string {
	switch policy {
	case config.PermissionsAllowlist, "":
		return []string{api.OwnIssue, api.OwnState, api.OwnWorktreeFinish}
	case config.PermissionsAsk:
		return []string{api.OwnIssue}
	}
	return nil
}

// AllowRules are the permission rules, in Claude Code's syntax, that let
// an agent of policy in the worktree cwd act without asking:
//
//   - allowlist: Legion's own commands of the worker skill (legion issue,
//     legion state, legion worktree finish), by name and by legion's path;
//     git, any subcommand (a rule matches the command, not the directory it
//     acts on); Read, Edit and Write below cwd (as "//" + the absolute path,
//     the physical one too when cwd has symlinks); then allow, the team's
//     agent.allow;
//   - ask: legion issue only, so the agent can report; every other tool
//     waits for a person;
//   - bypass: none (nothing is asked).
func AllowRules(policy config.PermissionPolicy, legion, cwd string, allow []string) ([]string, error) {
	legionCmds := func(subs ...string) []string {
		var r []string
		for _, sub := range subs {
			r = append(r, "Bash(legion "+sub+":*)")
			if legion != "" && legion != "legion" {
				r = append(r, "Bash("+legion+" "+sub+":*)")
			}
		}
		return r
	}
	switch policy {
	case config.PermissionsBypass:
		return nil, nil
	case config.PermissionsAsk:
		return legionCmds("issue"), nil
	case config.PermissionsAllowlist, "":
	default:
		return nil, fmt.Errorf("unknown permission policy %q", policy)
	}
	rules := legionCmds("issue", "state", "worktree finish")
	rules = append(rules, "Bash(git:*)")
	dirs := []string{filepath.Clean(cwd)}
	if p := Physical(cwd); p != dirs[0] {
		dirs = append(dirs, p)
	}
	for _, tool := range []string{"Read", "Edit", "Write"} {
		for _, d := range dirs {
			rules = append(rules, tool+"(/"+d+"/**)")
		}
	}
	for _, r := range allow {
		if !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	return rules, nil
}
