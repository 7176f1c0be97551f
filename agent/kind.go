package agent

import (
	"context"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/internal/envlist"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// Kind is one kind of agent. Plan and Prepare take a [Session] the caller
// filled in; Prepare takes the [Launch] that Plan returned for it.
type Kind interface {
	// Name is the kind as legion.toml's agent.kind spells it: "claude",
	// "codex", "gemini" or "custom". The worker is told Launch.Agent, which
	// is the name of the worker's half that serves the kind ("claude" for
	// codex and gemini).
	Name() string
	// SessionID is the deterministic id of the agent's conversation on
	// issue in mode for team: the same inputs give the same id, so a
	// restarted agent resumes its own conversation.
	SessionID(team uuid.UUID, issue, mode string) uuid.UUID
	// SessionFile is where the agent started in cwd keeps conversation id
	// (home is the agent's home directory); "" when it keeps none that
	// Legion can watch.
	SessionFile(home, cwd string, id uuid.UUID) string
	// Plan is s's launch, touching nothing: the team's agent.new and
	// agent.resume expanded with s.Vars, and the session file.
	Plan(s Session) (Launch, error)
	// Prepare readies the agent's environment for s before its worker
	// starts, as the user (files, settings), and returns l, Plan's launch,
	// with what the agent needs to find them (arguments, environment). It
	// is idempotent: every dispatch of the session prepares it again.
	Prepare(ctx context.Context, s Session, l Launch) (Launch, error)
}

// Session is one agent session the controller is about to start.
type Session struct {
	// ID is the agent's conversation ({session_id}, LEGION_SESSION).
	ID uuid.UUID
	// Mode is the phase the worker runs: plan, implement, review, retro
	// or finish (the permission policy may differ per mode). A retro runs
	// in the implementer's conversation but in its own Mode.
	Mode string
	// Vars are the values of the argv templates' placeholders.
	Vars config.Vars
	// Cwd is where the agent runs, absolute: the issue's worktree.
	Cwd string
	// Repo is the team's main checkout, absolute: Claude Code's trust in
	// it covers its worktrees.
	Repo string
	// Home is the agent's home directory (~/.claude, ~/.claude.json).
	Home string
	// Dir is this session's own directory for what the kind writes (its
	// settings file); Prepare creates it, mode 0700. It must outlive
	// restarts of the worker, which start the agent with the same argv.
	Dir string
	// Legion is the absolute path of the legion binary; the hooks run
	// `<Legion> hook`, and the allow rules name it.
	Legion string
	// Env is the environment planned for the agent so far (KEY=VALUE),
	// besides the user manager's that every worker inherits.
	Env []string
	// Secrets are more files a sandbox hides (absolute): the team's
	// tracker credentials files.
	Secrets []string
	// LookupEnv reads the user manager's environment, which the agent
	// inherits (ANTHROPIC_API_KEY); nil means this process's, right for the
	// controller, which runs under the same manager as its workers.
	LookupEnv func(key string) (string, bool) `json:"-"`

	// Pod says the agent runs in a Kubernetes pod (engine "kubernetes"),
	// as the pod's non-root user: no Landlock sandbox is probed or drawn
	// for it (the pod's security context confines it; EffectivePolicy).
	Pod bool
	// PlanOnly makes Prepare write nothing and return the launch only:
	// the files are made where the agent runs, by its pod's prepare
	// command, with the same Session (see PodPrepare).
	PlanOnly bool
}

// Getenv is the value of key in the agent's environment: s.Env, else the
// environment it inherits (s.LookupEnv).
func (s Session) Getenv(key string) (string, bool) {
	if v, ok := envlist.Lookup(s.Env, key); ok {
		return v, true
	}
	if s.LookupEnv != nil {
		return s.LookupEnv(key)
	}
	return os.LookupEnv(key)
}

// Launch is what the worker gets for one session.
type Launch struct {
	// Agent is the worker's kind, for api.SpawnArgs.Agent: the kind's Name,
	// but "claude" for codex and gemini, whose hooks the worker reads as Claude Code's.
	Agent string
	// ArgvNew starts a new conversation; ArgvResume resumes one (nil:
	// ArgvNew always).
	ArgvNew, ArgvResume []string
	// Env is added to the agent's environment (KEY=VALUE), after
	// Session.Env.
	Env []string
	// SessionFile is the agent's session file, watched for liveness; ""
	// for none.
	SessionFile string
	// ResumeMarker is what SessionFile holds once its conversation can be
	// resumed ("" : any file of it can): Claude Code writes lines before
	// its first message, and refuses to resume a file of only those.
	ResumeMarker string
	// Sandbox confines the agent (the policy "sandbox" where it holds);
	// nil for none.
	Sandbox *api.Sandbox
	// DialogMarkers are lines on the agent's screen while one of its own
	// approval dialogs is open that no hook answers (api.SpawnArgs's).
	DialogMarkers []string
	// PolicyNote says why the policy "sandbox" runs the agent unconfined
	// with its prompts on (as allowlist); "" otherwise. For the log.
	PolicyNote string
}

// LimitWindower is a kind whose provider limits its agents' use over a
// window (Claude's and Codex's five hours, Gemini's day): Legion's backoff
// at a limit whose reset time it does not learn never waits longer.
type LimitWindower interface {
	LimitWindow() time.Duration
}

// HookTranslator is a kind whose CLI's hook payloads are not Claude
// Code's: `legion hook` translates them with its dialect before it
// forwards them to the worker. Prepare names the kind in the agent's
// environment (proto.EnvHookDialect = the kind's Name).
type HookTranslator interface {
	HookDialect() proto.HookDialect
}
