package custom

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
)

// Kind is any terminal program (agent.kind = "custom"), run as the
// team's agent.new says, with nothing prepared: no settings, no hooks, no
// session file. Its worker knows it is alive only from its output, cannot
// tell working from waiting, relays a person's text as typed keys and
// detects no completion: the program must exit by itself when its phase
// is done (0 for success; anything else is a failure that systemd
// restarts). Without a session file it is never resumed: agent.resume is
// unused.
type Kind struct {
	Config config.Agent // the team's agent table
}

// Name is "custom".
func (*Kind) Name() string { return string(config.AgentCustom) }

// SessionID is the same deterministic id as Claude's (UUIDv5 of the team
// and "<issue>:<mode>"), for a template that passes {session_id}.
func (*Kind) SessionID(team uuid.UUID, issue, mode string) uuid.UUID {
	return claudecode.SessionID(team, issue, mode)
}

// SessionFile is "": Legion watches no file of a custom agent.
func (*Kind) SessionFile(home, cwd string, id uuid.UUID) string { return "" }

// Plan expands agent.new; there is no resume argv.
func (c *Kind) Plan(s agent.Session) (agent.Launch, error) {
	argv, err := config.Expand(c.Config.New, s.Vars)
	if err != nil {
		return agent.Launch{}, fmt.Errorf("agent.new: %w", err)
	}
	return agent.Launch{Agent: c.Name(), ArgvNew: argv}, nil
}

// Prepare does nothing but, under the policy "sandbox", draw the agent's
// sandbox: a custom agent is run as it is.
func (c *Kind) Prepare(ctx context.Context, s agent.Session, l agent.Launch) (agent.Launch, error) {
	agent.ApplyPolicy(c.Config, s, config.AgentCustom, &l)
	return l, nil
}

// New is the kind for the team's agent table a.
func New(a config.Agent) agent.Kind { return &Kind{Config: a} }
