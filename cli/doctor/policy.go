package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/instructions"
)

// modes are the phases a worker runs in, in order: the keys of
// agent.kind_by_mode and agent.permissions_by_mode.
var modes = config.WorkerModes()

// policyCheckName names the permission-policy check of a team.
func policyCheckName(team string) string { return "permissions of team " + team }

// PolicyUse is a permission policy some modes of a team run under, with
// the kind that runs them, in a check's JSON.
type PolicyUse struct {
	Policy config.PermissionPolicy `json:"policy"`
	Kind   config.AgentKind        `json:"kind"`
	Modes  []string                `json:"modes"`
	// Unasked is what the policy lets that kind's agent do without asking
	// a person, in one line.
	Unasked string `json:"unasked"`
}

// sandboxStatus says whether the policy "sandbox" holds on this machine;
// a variable for tests.
var sandboxStatus = agent.SandboxStatus

// unasked says in one line what policy p lets an agent of kind k do
// without asking a person, as package agent sets p up for k (see
// agent.permissions in config's schema).
func unasked(p config.PermissionPolicy, k config.AgentKind) string {
	if k == config.AgentCustom {
		if p == config.PermissionsSandbox && sandboxStatus().Holds {
			return "Legion sets no policy for a custom agent: its program asks what it asks, confined by Landlock as under sandbox"
		}
		return "Legion sets no policy for a custom agent: its program asks what it asks"
	}
	switch {
	case p == config.PermissionsBypass:
		return "everything, unconfined: any command with your rights, any file, the network"
	case p == config.PermissionsSandbox:
		st := sandboxStatus()
		if !st.Holds {
			return "what allowlist allows, since the sandbox does not hold here: " + st.Why
		}
		return "everything, with the agent's prompts off, confined by Landlock: writes only to the worktree, " +
			"the git objects and refs, the agent's state and caches, /tmp; secrets and Legion's state hidden " +
			"(the finisher runs as allowlist; " + st.Why + ")"
	case k == config.AgentCodex && (p == config.PermissionsAllowlist || p == config.PermissionsAsk):
		return "what Codex's own workspace-write sandbox allows (commands that write only in the worktree and the repository's git directory, with the network) and Legion's own commands for its issue, " +
			"anything else waits for a person (agent.allow is not used)"
	case p == config.PermissionsAllowlist && k == config.AgentGemini:
		return "Legion's own commands, git, file edits in the worktree (agent.allow is not used), " +
			"anything else waits for a person"
	case p == config.PermissionsAllowlist:
		return "Legion's own commands, git, file edits in the worktree and agent.allow, anything else waits for a person"
	case p == config.PermissionsAsk:
		return "only legion issue, every other call waits for a person"
	}
	return fmt.Sprintf("unknown to this legion doctor (%q)", p)
}

// policies groups the modes of t by the policy and kind they run with,
// in mode order.
func policies(t config.Team) []PolicyUse {
	var out []PolicyUse
	for _, m := range modes {
		p, k := t.Agent.Policy(m), t.Agent.ForMode(m).Kind
		if k == "" {
			k = config.AgentClaude
		}
		i := slices.IndexFunc(out, func(u PolicyUse) bool { return u.Policy == p && u.Kind == k })
		if i < 0 {
			out = append(out, PolicyUse{Policy: p, Kind: k, Unasked: unasked(p, k)})
			i = len(out) - 1
		}
		out[i].Modes = append(out[i].Modes, m)
	}
	return out
}

// checkPolicy says which permission policy the agents of team t run in
// each mode (agent.permissions, agent.permissions_by_mode), with which
// kind (agent.kind, agent.kind_by_mode), and what each lets the agent do
// without asking. It is information: always OK.
func checkPolicy(t config.Team) Check {
	uses := policies(t)
	kinds := map[config.AgentKind]bool{}
	for _, u := range uses {
		kinds[u.Kind] = true
	}
	parts := make([]string, 0, len(uses))
	for _, u := range uses {
		where := "every mode"
		if len(u.Modes) < len(modes) {
			where = strings.Join(u.Modes, ", ")
		}
		if len(kinds) > 1 {
			where += " (" + string(u.Kind) + ")"
		}
		parts = append(parts, fmt.Sprintf("%s in %s: %s", u.Policy, where, u.Unasked))
	}
	return Check{Name: policyCheckName(t.Name), Status: OK, Detail: strings.Join(parts, "; "), Team: t.Name, Policies: uses}
}

// checkInstructions loads the team's own instruction templates
// (agent.instructions_dir), if it names a directory, as the controller
// will: a template that does not parse or lost a command its phase must
// run fails, naming the file and the command.
func checkInstructions(configPath string, t config.Team) (Check, bool) {
	dir := t.Agent.InstructionsDir
	if dir == "" {
		return Check{}, false
	}
	c := Check{Name: "instructions of team " + t.Name, Team: t.Name}
	s, err := instructions.Load(dir)
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		c.Fix = fmt.Sprintf("mend the file (legion instructions show %s MODE prints the built-in text to start from), or remove agent.instructions_dir from team %s in %s", t.Name, t.Name, configPath)
		return c, true
	}
	var own []string
	for _, m := range append(slices.Clone(instructions.Modes), instructions.ModeController) {
		if src := s.Source(m); !strings.HasPrefix(src, "built-in") {
			own = append(own, m)
		}
	}
	c.Status = OK
	c.Detail = fmt.Sprintf("%s: your own for %s, built-in for the rest", dir, orNone(own))
	return c, true
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no phase"
	}
	return strings.Join(s, ", ")
}
