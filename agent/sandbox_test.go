package agent_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/agenttest"
	"github.com/legion-dev/legion/agent/claude"
	"github.com/legion-dev/legion/agent/kinds"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/ptyworker/confine"
)

// holding makes the sandbox hold (or not) for the test, whatever the
// kernel, and puts the test's temp dirs outside /tmp (which agents may
// write) when it holds.
func holding(t *testing.T, holds bool) {
	t.Helper()
	old := *agent.ProbeSandbox
	*agent.ProbeSandbox = func() confine.Status { return confine.Status{ABI: 7, Holds: holds, Why: "test"} }
	t.Cleanup(func() { *agent.ProbeSandbox = old })
	agenttest.OutsideTmp(t)
}

// TestSandboxPolicyPerKind: under the policy "sandbox" every kind is
// prepared as under bypass (its own prompts off) and gets a sandbox;
// where it does not hold, as under allowlist, with the reason.
func TestSandboxPolicyPerKind(t *testing.T) {
	bypassArg := map[config.AgentKind]string{
		config.AgentClaude:   "--permission-mode bypassPermissions",
		config.AgentCodex:    "--dangerously-bypass-approvals-and-sandbox",
		config.AgentGemini:   "--approval-mode yolo",
		config.AgentOpencode: "--auto",
	}
	for kind, arg := range bypassArg {
		for _, holds := range []bool{true, false} {
			t.Run(string(kind)+map[bool]string{true: "/holds", false: "/does_not_hold"}[holds], func(t *testing.T) {
				holding(t, holds)
				a := config.Agent{Kind: kind, Permissions: config.PermissionsSandbox}
				if n, r, ok := config.KindArgv(kind); ok {
					a.New, a.Resume = n, r
				} else {
					a.New, a.Resume = []string{"claude", "--session-id", "{session_id}", "{prompt}"}, []string{"claude", "--resume", "{session_id}"}
				}
				k, err := kinds.For(a)
				if err != nil {
					t.Fatal(err)
				}
				s := agenttest.Session(t, k, "implement")
				l := agenttest.Prepared(t, k, s)
				argv := strings.Join(l.ArgvNew, " ")
				if holds {
					if !strings.Contains(argv, arg) || l.Sandbox == nil || l.PolicyNote != "" {
						t.Errorf("argv %q, sandbox %v, note %q; want %q, a sandbox and no note", argv, l.Sandbox != nil, l.PolicyNote, arg)
					}
					return
				}
				if strings.Contains(argv, arg) || l.Sandbox != nil || !strings.Contains(l.PolicyNote, "does not hold") {
					t.Errorf("argv %q, sandbox %v, note %q; want no %q, no sandbox and a note saying why", argv, l.Sandbox != nil, l.PolicyNote, arg)
				}
			})
		}
	}
}

func TestEffectivePolicy(t *testing.T) {
	holding(t, true)
	k := claude.New(config.Agent{})
	for _, c := range []struct {
		name   string
		policy config.PermissionPolicy
		mode   string
		home   string // "" for the session's own
		want   config.PermissionPolicy
		why    string
	}{
		{"sandbox", config.PermissionsSandbox, "implement", "", config.PermissionsBypass, ""},
		{"allowlist stays", config.PermissionsAllowlist, "implement", "", config.PermissionsAllowlist, ""},
		{"bypass stays", config.PermissionsBypass, "plan", "", config.PermissionsBypass, ""},
		{"finisher", config.PermissionsSandbox, "finish", "", config.PermissionsAllowlist, "main checkout"},
		{"controller agent", config.PermissionsSandbox, "controller", "", config.PermissionsAllowlist, "helper and the tracker"},
		{"home below /tmp", config.PermissionsSandbox, "review", "/tmp/h", config.PermissionsAllowlist, "below the writable /tmp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := agenttest.Session(t, k, c.mode)
			if c.home != "" {
				s.Home = c.home
			}
			got, sb, why := agent.EffectivePolicy(config.Agent{Permissions: c.policy}, s, config.AgentClaude)
			if got != c.want || (sb != nil) != (c.want == config.PermissionsBypass && c.policy == config.PermissionsSandbox) || !strings.Contains(why, c.why) {
				t.Errorf("EffectivePolicy(%s, %s) = %s, sandbox %v, %q; want %s, %q", c.policy, c.mode, got, sb != nil, why, c.want, c.why)
			}
		})
	}
}

// TestSandboxFor: what a claude agent of an issue's worktree may write and
// what it may not read.
func TestSandboxFor(t *testing.T) {
	holding(t, true)
	_, repo, wt, home := agenttest.GitWorktree(t)
	s := agent.Session{ID: agenttest.TeamID, Mode: "implement", Cwd: wt, Repo: repo, Home: home, Dir: filepath.Join(home, ".local/state/legion/agents/w"),
		LookupEnv: func(string) (string, bool) { return "", false }}
	sb := agent.SandboxFor(s, config.AgentClaude)
	if err := sb.Check(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{wt, filepath.Join(repo, ".git/worktrees/X-1"), filepath.Join(repo, ".git/objects"), filepath.Join(repo, ".git/refs"),
		s.Dir, filepath.Join(home, ".claude"), filepath.Join(home, ".claude.json"), filepath.Join(home, ".cache"), filepath.Join(home, "go/pkg/mod"), "/tmp"} {
		if !slices.Contains(sb.Write, w) {
			t.Errorf("write %v: want %s in it", sb.Write, w)
		}
	}
	for _, w := range []string{repo, filepath.Join(repo, ".git"), filepath.Join(repo, ".git/config"), filepath.Join(repo, ".git/hooks"), home} {
		if slices.Contains(sb.Write, w) {
			t.Errorf("write %v: want no %s", sb.Write, w)
		}
	}
	s.Secrets = []string{"/srv/keys/linear", ""}
	sb = agent.SandboxFor(s, config.AgentClaude)
	if !slices.Contains(sb.Hide, "/srv/keys/linear") {
		t.Errorf("hide %v: want the team's tracker credentials file in it", sb.Hide)
	}
	for _, h := range []string{".ssh", ".gnupg", ".aws", ".config/gh", ".netrc", ".docker/config.json", ".kube", ".codex/auth.json", ".local/state/legion", ".config/legion"} {
		if !slices.Contains(sb.Hide, filepath.Join(home, h)) {
			t.Errorf("hide %v: want ~/%s in it", sb.Hide, h)
		}
	}
	if slices.Contains(sb.Hide, filepath.Join(home, ".claude/.credentials.json")) {
		t.Errorf("hide %v: a claude agent keeps its own login", sb.Hide)
	}
}
