package claude

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/agent"
	"github.com/legion-dev/legion/agent/claude/claudecode"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/internal/privdir"
)

// Kind is Claude Code (agent.kind = "claude"). Its session files follow
// package agent/claude/claudecode; Prepare gives every session:
//
//   - its own settings file, Session.Dir/settings.json (0600, in a 0700
//     directory): a hook for each of [HookEvents] running `<legion> hook`,
//     which hands the event to the session's worker, and the permission
//     rules of the team's policy for the session's mode ([SettingsFor]).
//     The user's own settings files are left as they are and still apply;
//   - the arguments --settings FILE and --permission-mode (manual for the
//     allowlist and ask policies, so that what no rule allows opens a
//     dialog, reported by the PermissionRequest hook; bypassPermissions for
//     bypass), inserted into both argvs where [agent.InsertArgs] says;
//   - the answers, in ~/.claude.json, to the dialogs a new worktree would
//     stop at ([WriteDialogAnswers]);
//   - CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (no telemetry, no update
//     check) and, for bypass as root, IS_SANDBOX=1, without which Claude
//     Code refuses bypass mode as root.
type Kind struct {
	Config config.Agent // the team's agent table
}

// SettingsFileName is the name of a session's settings file in its
// Session.Dir.
const SettingsFileName = "settings.json"

// Name is "claude".
func (*Kind) Name() string { return string(config.AgentClaude) }

// SessionID is claude.SessionID: UUIDv5 of the team and "<issue>:<mode>".
func (*Kind) SessionID(team uuid.UUID, issue, mode string) uuid.UUID {
	return claudecode.SessionID(team, issue, mode)
}

// SessionFile is claude.SessionFile of cwd's physical path (Claude Code
// resolves symlinks in its working directory), or of cwd as given when it
// cannot be resolved.
func (*Kind) SessionFile(home, cwd string, id uuid.UUID) string {
	return claudecode.SessionFile(home, agent.Physical(cwd), id)
}

// Plan expands agent.new and agent.resume and names the session file.
func (c *Kind) Plan(s agent.Session) (agent.Launch, error) {
	argvNew, argvResume, err := agent.Expand(c.Config, s.Vars)
	if err != nil {
		return agent.Launch{}, err
	}
	return agent.Launch{
		Agent: c.Name(), ArgvNew: argvNew, ArgvResume: argvResume,
		SessionFile: c.SessionFile(s.Home, s.Cwd, s.ID), ResumeMarker: claudecode.ResumeMarker,
	}, nil
}

// Prepare writes s's settings file and the dialog answers of ~/.claude.json,
// and adds --settings, --permission-mode and the environment to l.
func (c *Kind) Prepare(ctx context.Context, s agent.Session, l agent.Launch) (agent.Launch, error) {
	if !filepath.IsAbs(s.Legion) {
		return agent.Launch{}, fmt.Errorf("prepare claude session %s: the hooks need the legion binary's absolute path, got %q", s.ID, s.Legion)
	}
	if !filepath.IsAbs(s.Dir) || !filepath.IsAbs(s.Cwd) || !filepath.IsAbs(s.Repo) || !filepath.IsAbs(s.Home) {
		return agent.Launch{}, fmt.Errorf("prepare claude session %s: want absolute paths, got dir %q, cwd %q, repo %q, home %q", s.ID, s.Dir, s.Cwd, s.Repo, s.Home)
	}
	policy := agent.ApplyPolicy(c.Config, s, config.AgentClaude, &l)
	data, err := SettingsFor(policy, s.Legion, s.Cwd, c.Config.Allow)
	if err != nil {
		return agent.Launch{}, fmt.Errorf("prepare claude session %s: %w", s.ID, err)
	}
	settings := filepath.Join(s.Dir, SettingsFileName)
	if !s.PlanOnly {
		if err := privdir.Ensure(s.Dir); err != nil {
			return agent.Launch{}, fmt.Errorf("prepare claude session %s: %w", s.ID, err)
		}
		if err := atomicfile.WritePrivate(settings, data); err != nil {
			return agent.Launch{}, fmt.Errorf("prepare claude session %s: write %s: %w", s.ID, settings, err)
		}
		key, _ := s.Getenv("ANTHROPIC_API_KEY")
		if err := WriteDialogAnswers(ctx, s.Home, s.Repo, key); err != nil {
			return agent.Launch{}, fmt.Errorf("prepare claude session %s: %w", s.ID, err)
		}
	}

	mode := "manual"
	if policy == config.PermissionsBypass {
		mode = "bypassPermissions"
	}
	args := []string{"--settings", settings, "--permission-mode", mode}
	l.ArgvNew = agent.InsertArgs(c.Config.New, l.ArgvNew, args...)
	if l.ArgvResume != nil {
		l.ArgvResume = agent.InsertArgs(c.Config.Resume, l.ArgvResume, args...)
	}
	l.Env = append(l.Env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	if policy == config.PermissionsBypass && os.Geteuid() == 0 && !s.Pod { // a pod's user is not root
		l.Env = append(l.Env, "IS_SANDBOX=1")
	}
	return l, nil
}

// New is the kind for the team's agent table a.
func New(a config.Agent) agent.Kind { return &Kind{Config: a} }

// LimitWindow is five hours: the provider's usage windows (a plan's
// five-hour limit) are the longest Legion backs off at a limit whose
// reset time it does not learn.
func (*Kind) LimitWindow() time.Duration { return 5 * time.Hour }
