package custom

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
)

// TestCustom: a custom agent runs agent.new as given, with Legion's
// deterministic session id, and Prepare writes nothing.
func TestCustom(t *testing.T) {
	k := New(config.Agent{Kind: config.AgentCustom, New: []string{"my-agent", "--id", "{session_id}", "{prompt}"}, Permissions: config.PermissionsAllowlist})
	s := agenttest.Session(t, k, "implement")
	l := agenttest.Prepared(t, k, s)
	want := agent.Launch{Agent: "custom", ArgvNew: []string{"my-agent", "--id", s.ID.String(), "do it"}}
	if diff := cmp.Diff(want, l); diff != "" {
		t.Errorf("custom launch (-want +got):\n%s", diff)
	}
	if s.ID != claudecode.SessionID(agenttest.TeamID, "DEMO-1", "implement") {
		t.Errorf("custom SessionID = %v; want Legion's deterministic id", s.ID)
	}
	for _, p := range []string{s.Dir, s.Home + "/.claude.json"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("custom Prepare wrote %s; want nothing", p)
		}
	}
}
