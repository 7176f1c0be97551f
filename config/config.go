package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/agent/cliversion"
	"github.com/legion-dev/legion/ptyworker/termkeys"
)

// Config is a loaded, validated legion.toml with every default applied.
type Config struct {
	// Path is the file the config was loaded from (also set by LoadOrEmpty
	// when the file does not exist).
	Path string

	Helper Helper
	Worker Worker
	Web    Web

	// Defaults is the team every [teams.<name>] starts from: the built-in
	// defaults overridden by [defaults]. Its Name, ID and Workspace are empty.
	Defaults Team

	// Teams are the configured teams, sorted by name.
	Teams []Team
}

// Team returns the team called name.
func (c *Config) Team(name string) (Team, bool) {
	for _, t := range c.Teams {
		if t.Name == name {
			return t, true
		}
	}
	return Team{}, false
}

// Helper configures the socket-activated helper (`legion helper`).
type Helper struct {
	// IdleExit is how long the helper stays up with no clients and no work
	// before exiting (socket activation starts it again). 0 means never.
	IdleExit time.Duration
	// LogLevel is the lowest level the helper logs.
	LogLevel slog.Level
	// SessionLimit caps the live agent sessions of all teams on this
	// machine; 0 is no cap. Every team's controller enforces it, counting
	// the sessions the helper lists (Team.MachineSessionLimit).
	SessionLimit int
}

// Web configures the dashboard: legion-web.socket and the server it
// starts (`legion web serve`).
type Web struct {
	// Address and Port are where legion-web.socket listens (TCP).
	Address string
	Port    int
	// IdleExit is how long the server stays up with no page connected
	// before exiting; 0 means never.
	IdleExit time.Duration
}

// Listen is the TCP address of the dashboard, "127.0.0.1:7787" or
// "[::1]:7787".
func (w Web) Listen() string { return net.JoinHostPort(w.Address, strconv.Itoa(w.Port)) }

// Local reports whether only this machine can reach the dashboard's TCP
// address (a loopback address).
func (w Web) Local() bool {
	ip := net.ParseIP(w.Address)
	return ip != nil && ip.IsLoopback()
}

// Worker configures every pty-worker.
type Worker struct {
	// RingSize is the scrollback ring of each worker, in bytes.
	RingSize int
	// DetachKey detaches `legion attach` from a session.
	DetachKey termkeys.Key
	// StartupGrace is how long after a start the agent may go without
	// writing to its session file before it counts as stale.
	StartupGrace time.Duration
}

// TrackerKind names where a team's issues live.
type TrackerKind string

// Tracker kinds.
const (
	TrackerLocal  TrackerKind = "local"  // file-backed, under the state dir
	TrackerLinear TrackerKind = "linear" // Linear's GraphQL API
	TrackerGitHub TrackerKind = "github" // a GitHub repository's issues
)

// ReviewKind names where review outcomes are read from.
type ReviewKind string

// Review sources.
const (
	ReviewLocal  ReviewKind = "local"  // labels on the issue
	ReviewGitHub ReviewKind = "github" // labels on the issue branch's pull request
)

// EngineKind names where a team's sessions run.
type EngineKind string

// Engines.
const (
	EngineSystemd    EngineKind = "systemd"    // transient units of the user's manager
	EngineKubernetes EngineKind = "kubernetes" // a Job per session on a cluster
)

// Kubernetes is a team's [teams.<name>.kubernetes] table: where on a
// cluster its sessions run with engine = "kubernetes".
type Kubernetes struct {
	Kubeconfig    string // absolute; "" means $KUBECONFIG, else ~/.kube/config
	Context       string // "" means the kubeconfig's current context
	Namespace     string
	Image         string
	StorageClass  string // "" means the cluster's default
	Storage       string // each issue's volume, a quantity
	CPURequest    string
	MemoryRequest string
	CPULimit      string
	MemoryLimit   string
	Secret        string // the team's Secret mounted into each session's pod; "" for none
	// SecretEnv are agent variables read from keys of Secret, by name:
	// the worker in the pod reads each key's file at every start.
	SecretEnv map[string]string
	// Repository is the git URL each issue's pod clones and a finisher
	// pushes to; the controller needs it (its pods cannot see Workspace).
	Repository string
	// BinDir is where the image has legion and legion-pty-worker.
	BinDir string
}

// ControllerKind names what runs as `legion controller TEAM`.
type ControllerKind string

// Controller kinds.
const (
	ControllerAuto  ControllerKind = "auto"  // the built-in deterministic loop
	ControllerAgent ControllerKind = "agent" // a controller agent in a pty-worker
)

// Team is one [teams.<name>] table with the defaults applied.
type Team struct {
	Name      string    // the table's key, any non-control UTF-8
	ID        uuid.UUID // stable identity; session IDs derive from it
	Workspace string    // absolute path of the team's repository

	// IssuePrefix starts the local tracker's issue identifiers ("DEMO" for
	// DEMO-1).
	IssuePrefix string

	Tracker    TrackerKind
	Review     ReviewKind
	Controller ControllerKind
	// Engine is where the team's sessions run; Kubernetes says where on
	// a cluster, with EngineKubernetes.
	Engine     EngineKind
	Kubernetes Kubernetes

	// StaleAfter is how long an agent may go without session-file activity
	// (and without waiting on a human) before systemd restarts it.
	StaleAfter time.Duration
	// RestartCooldown is RestartSec= of the team's units.
	RestartCooldown time.Duration
	// StartLimitBurst and StartLimitInterval are StartLimitBurst= and
	// StartLimitIntervalSec=: more than Burst starts within Interval and the
	// unit fails for good.
	StartLimitBurst    int
	StartLimitInterval time.Duration
	// WIPLimit is how many code workers (implementers) may run at once.
	WIPLimit int
	// SessionLimit is how many of the team's agents, in every mode, may
	// run at once; 0 is no cap beyond WIPLimit.
	SessionLimit int
	// MachineSessionLimit is [helper] session_limit, the same in every
	// team: how many agents of all teams may run at once on the machine.
	MachineSessionLimit int
	// IdleGrace is how long an agent may sit idle at its prompt, its turn
	// ended without worker-done, before the controller escalates.
	IdleGrace time.Duration

	Agent Agent

	// Limits of the team's slice legion-<short>.slice; zero means unset.
	MemoryMax       uint64 // bytes, MemoryMax=
	CPUQuotaPercent int    // CPUQuota=, 100 is one CPU
	TasksMax        uint64 // TasksMax=

	// Hardening changes the sandboxing of the team's workers.
	Hardening Hardening

	Linear Linear // used when Tracker is TrackerLinear
	GitHub GitHub // used when Review is ReviewGitHub

	Notify Notify // where the team's waits for a person are announced
	Budget Budget // the spend at which the team's agents stop
}

// KubeTarget is where the helper runs the team's sessions with engine
// "kubernetes"; nil with engine "systemd".
func (t Team) KubeTarget() *api.KubeTarget {
	if t.Engine != EngineKubernetes {
		return nil
	}
	k := t.Kubernetes
	return &api.KubeTarget{
		Kubeconfig: k.Kubeconfig, Context: k.Context, Namespace: k.Namespace, Image: k.Image,
		StorageClass: k.StorageClass, Storage: k.Storage, CPURequest: k.CPURequest, MemoryRequest: k.MemoryRequest,
		CPULimit: k.CPULimit, MemoryLimit: k.MemoryLimit, SecretName: k.Secret,
	}
}

// ShortID is the first 8 hex characters of the team's UUID; unit and slice
// names use it.
func (t Team) ShortID() string { return t.ID.String()[:8] }

// WorkerRelax is what `legion install` takes out of the team's worker
// hardening: hardening.relax, plus what its agent kinds need. Codex runs
// its tools in a bubblewrap sandbox, which needs the capabilities a
// process gets in a user namespace of its own, so a team that runs Codex
// in any mode keeps the capability bounding set (with PrivateUsers its
// workers have no capability on the host either way), unless its
// hardening.add asks for an empty one.
func (t Team) WorkerRelax() []string {
	relax := slices.Clone(t.Hardening.Relax)
	const capSet = "CapabilityBoundingSet"
	if t.runsKind(AgentCodex) && !slices.Contains(relax, capSet) && !slices.Contains(t.Hardening.Add, capSet) {
		relax = append(relax, capSet)
	}
	return relax
}

// runsKind reports whether any mode of the team runs an agent of kind k.
func (t Team) runsKind(k AgentKind) bool {
	if t.Agent.Kind == k {
		return true
	}
	for _, mk := range t.Agent.KindByMode {
		if mk == k {
			return true
		}
	}
	return false
}

// Agent configures the team's agent: its kind, the argv templates (see
// [Expand] for the placeholders) and its permission policy.
type Agent struct {
	Kind   AgentKind
	New    []string // starts a new session
	Resume []string // resumes an existing session

	// Permissions is the team's permission policy; PermissionsByMode
	// overrides it for some modes (keys: plan, implement, review, retro,
	// finish). Use [Agent.Policy] to read them.
	Permissions       PermissionPolicy
	PermissionsByMode map[string]PermissionPolicy
	// InstructionsDir holds the team's own instruction templates
	// (<mode>.md), replacing the built-in ones; "" for none.
	InstructionsDir string
	// Allow are extra permission rules in Claude Code's syntax, e.g.
	// "Bash(make test)", allowed with the allowlist policy.
	Allow []string

	// Limits of each agent's own worker unit; zero means unset.
	MemoryMax uint64 // bytes, MemoryMax= of each worker unit
	CPUWeight int    // CPUWeight= of each worker unit, 1 to 10000

	// KindByMode runs some modes with another kind (claude, codex, gemini
	// or opencode) than Kind, with that kind's default argvs. Use
	// [Agent.ForMode].
	KindByMode map[string]AgentKind

	// Env is more environment for every agent of the team (agent.env),
	// and EnvByKind more for the agents of one kind (agent.env_by_kind),
	// which wins. Use [Agent.Environment].
	Env       map[string]string
	EnvByKind map[AgentKind]map[string]string
}

// Environment is the environment a's agents get from legion.toml, as
// sorted NAME=value: agent.env, then agent.env_by_kind of a's kind, which
// wins. Call it on [Agent.ForMode]'s agent for a mode's kind.
func (a Agent) Environment() []string {
	m := maps.Clone(a.Env)
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, a.EnvByKind[a.Kind])
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// Hardening is [teams.<name>.hardening]: directives of package
// units/hardening taken out of, or added to, the workers' default set.
type Hardening struct {
	Relax []string // keys of hardening.WorkerDefaults to leave out
	Add   []string // keys of hardening.WorkerOptional to add
}

// clone is a deep copy of h.
func (h Hardening) clone() Hardening {
	h.Relax, h.Add = slices.Clone(h.Relax), slices.Clone(h.Add)
	return h
}

// ForMode is the agent configuration of the team's agents in mode: a
// itself, or, when KindByMode gives the mode another kind, a with that
// kind and its default argvs.
func (a Agent) ForMode(mode string) Agent {
	k, ok := a.KindByMode[mode]
	if !ok || k == a.Kind {
		return a
	}
	a = a.clone()
	a.Kind = k
	if argvNew, argvResume, ok := KindArgv(k); ok {
		a.New, a.Resume = argvNew, argvResume
	} else {
		a.New, a.Resume = slices.Clone(defaultAgentNew), slices.Clone(defaultAgentResume)
	}
	return a
}

// Policy is the permission policy of the team's agents in mode.
func (a Agent) Policy(mode string) PermissionPolicy {
	if p, ok := a.PermissionsByMode[mode]; ok {
		return p
	}
	return a.Permissions
}

// clone is a deep copy of a, so a team's changes leave [defaults] alone.
func (a Agent) clone() Agent {
	a.New, a.Resume, a.Allow = slices.Clone(a.New), slices.Clone(a.Resume), slices.Clone(a.Allow)
	a.PermissionsByMode = maps.Clone(a.PermissionsByMode)
	a.KindByMode = maps.Clone(a.KindByMode)
	a.Env = maps.Clone(a.Env)
	a.EnvByKind = maps.Clone(a.EnvByKind)
	return a
}

// AgentKind names the kind of program a team's workers run (each is a
// package agent/<kind>, listed in the registry agent/kinds).
type AgentKind string

// Agent kinds.
const (
	// AgentClaude is Claude Code: per-session settings with hooks that
	// report its state, a dialog-free start, clean end when its phase is done.
	AgentClaude AgentKind = "claude"
	// AgentCustom is any terminal program: no settings, no session file,
	// liveness from its output, no completion detection.
	AgentCustom AgentKind = "custom"
	// AgentCodex is OpenAI's Codex CLI: a Codex home per conversation with
	// hooks that report its state (package agent/codex).
	AgentCodex AgentKind = "codex"
	// AgentGemini is Google's Gemini CLI: a Gemini home per conversation
	// with hooks that report its state (package agent/gemini).
	AgentGemini AgentKind = "gemini"
	// AgentOpencode is the opencode CLI: an opencode home per conversation
	// with a plugin that reports its state (package agent/opencode).
	AgentOpencode AgentKind = "opencode"
)

// KindArgv is the default agent.new and agent.resume of kind, and whether
// kind has defaults of its own (otherwise Claude Code's are the defaults):
// its CLI's pin's (agent/cliversion).
func KindArgv(kind AgentKind) (argvNew, argvResume []string, ok bool) {
	if c, found := cliversion.For(string(kind)); found && c.New != nil {
		return slices.Clone(c.New), slices.Clone(c.Resume), true
	}
	return nil, nil, false
}

// kindNames are the kinds agent.kind may name: every pinned CLI's
// (agent/cliversion) and, with custom, AgentCustom. agent.kind_by_mode
// takes only kinds with hooks (a custom agent has no default argv to
// switch to).
func kindNames(custom bool) []string {
	var out []string
	for _, c := range cliversion.All() {
		out = append(out, c.Kind)
	}
	if custom {
		out = append(out, string(AgentCustom))
	}
	return out
}

// PermissionPolicy says which of an agent's tool calls run without asking
// a person.
type PermissionPolicy string

// Permission policies.
const (
	// PermissionsAllowlist allows Legion's own commands, git and file tools
	// inside the worktree and agent.allow; everything else waits for a person.
	PermissionsAllowlist PermissionPolicy = "allowlist"
	// PermissionsAsk has a person decide every tool call but the agent's
	// `legion issue` reports.
	PermissionsAsk PermissionPolicy = "ask"
	// PermissionsBypass asks nobody about anything.
	PermissionsBypass PermissionPolicy = "bypass"
	// PermissionsSandbox asks nobody, as bypass, but the agent runs
	// confined by Landlock: it writes only its worktree, the git objects
	// and refs a commit needs, its own state, the toolchains' caches and
	// /tmp, and reads no secrets (agent.SandboxFor). Where
	// Landlock cannot hold, and for the controller agent, it is allowlist.
	PermissionsSandbox PermissionPolicy = "sandbox"
)

// WorkerModes are the phases a worker runs in, in the order an issue goes
// through them: the keys of agent.kind_by_mode and
// agent.permissions_by_mode. The one list of them; every other package
// takes it from here.
func WorkerModes() []string { return slices.Clone(workerModes) }

var workerModes = []string{"plan", "implement", "review", "retro", "finish"}

// Linear configures the Linear tracker. The API key is read at run time from
// the environment variable APIKeyEnv or else from CredentialsFile; it never
// appears in the config, on a command line or in a unit property.
type Linear struct {
	TeamKey         string // Linear team key, e.g. "ENG"
	APIKeyEnv       string
	CredentialsFile string // absolute; "" for none
	APIURL          string

	StatusTodo        string
	StatusInProgress  string
	StatusNeedsReview string
	StatusRetro       string
	StatusDone        string
}

// GitHub configures the GitHub review source. The token is read at run time
// from TokenEnv or else from CredentialsFile.
type GitHub struct {
	Repo            string // "owner/name"
	TokenEnv        string
	CredentialsFile string // absolute; "" for none
	APIURL          string
	MergeMethod     string // "merge", "squash" or "rebase"; "": the repository's first allowed

	// With tracker = "github": the label that opts an issue in, and the
	// labels of the phases before Done (a closed issue).
	Label                                                        string
	StatusTodo, StatusInProgress, StatusNeedsReview, StatusRetro string

	// Project, when not 0, is the number of a project (Projects v2) of
	// the repository's owner whose single-select field ProjectField holds
	// the phases, as the options ProjectTodo ... ProjectDone, instead of
	// the status labels.
	Project                                            int
	ProjectField                                       string
	ProjectTodo, ProjectInProgress, ProjectNeedsReview string
	ProjectRetro, ProjectDone                          string

	// WebhookSecretFile is the file (0600) holding the secret GitHub signs
	// the team's webhook deliveries with; "" turns the webhook off.
	WebhookSecretFile string // absolute
}

// EnvConfig names the environment variable that overrides the default
// config path. Legion sets it for the agents it starts, so an agent's
// `legion issue ...` reads the same legion.toml as the controller that
// dispatched it.
const EnvConfig = "LEGION_CONFIG"

// DefaultPath is $LEGION_CONFIG when set, else
// $XDG_CONFIG_HOME/legion/legion.toml (~/.config when XDG_CONFIG_HOME is
// unset).
func DefaultPath() (string, error) {
	if p := os.Getenv(EnvConfig); p != "" {
		return p, nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find config dir: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "legion", "legion.toml"), nil
}

// Load reads and validates the config file at path. A missing file is an
// error wrapping fs.ErrNotExist; problems in the file are [*Error]s naming
// file, line and key, all of them, joined with errors.Join.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load config: %s does not exist; create it with `legion team add NAME --workspace DIR` (or pass --config): %w", path, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return Parse(path, data)
}

// LoadOrEmpty is Load, except that a missing file gives a config with only
// the defaults, for commands that work without one.
func LoadOrEmpty(path string) (*Config, error) {
	c, err := Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Parse(path, nil)
	}
	return c, err
}

// Parse validates data as the contents of the config file path (path is used
// only in errors and Config.Path; workspaces are checked on disk).
func Parse(path string, data []byte) (*Config, error) {
	return decodeFile(path, data)
}

// expandHome turns a leading "~/" into the home directory and requires the
// result to be absolute.
func expandHome(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("expand ~ in %q: %w", p, err)
		}
		p = filepath.Join(home, p[1:])
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q is relative: expected an absolute path or one starting with ~/", p)
	}
	return filepath.Clean(p), nil
}

// Notify is [teams.<name>.notify]: the channels that announce a wait for
// a person (package controller/notify). Secrets are named, never held:
// each comes from its environment variable or its 0600 file.
type Notify struct {
	WebhookURL        string // POST JSON, signed with HMAC-SHA256; "" for none
	WebhookSecretEnv  string // the variable holding the webhook's secret
	WebhookSecretFile string // absolute; the file (0600) holding it
	NtfyURL           string // an ntfy topic, https://HOST/TOPIC; "" for none
	NtfyTokenEnv      string // the variable holding an ntfy access token
	NtfyTokenFile     string // absolute; the file (0600) holding it
	Desktop           bool   // org.freedesktop.Notifications on the session bus
	// DashboardURL is the dashboard's address as the person reaches it,
	// the base of the links to cards; "" is [web]'s address and port.
	DashboardURL string
}

// Any reports whether n configures a channel.
func (n Notify) Any() bool { return n.WebhookURL != "" || n.NtfyURL != "" || n.Desktop }
