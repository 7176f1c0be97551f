package api

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// State is a session's state as the API reports it.
type State string

// Session states.
const (
	StateStarting     State = "starting"      // the unit is starting or waiting out its restart cooldown
	StateRunning      State = "running"       // the agent runs and its session file is fresh
	StateWaitingInput State = "waiting_input" // the agent waits on a human (a pending question)
	StateStale        State = "stale"         // the agent runs but its session file went stale; systemd will restart it
	StateExited       State = "exited"        // the agent ended and will not be restarted (see Exit)
	StateFailed       State = "failed"        // systemd gave up (start limit) or the unit failed for good
	// StateLost: the machine rebooted while the session ran (a `legion
	// spawn` session: its unit and worker did not survive the boot, and
	// nothing starts it again by itself); Cause says so and how to start
	// it again or forget it. A team's workers are never lost: their
	// controller resumes them.
	StateLost State = "lost"
)

// Ended reports whether a session in state s is over: exited, failed or
// lost (nothing runs it, and it is not restarted by itself).
func (s State) Ended() bool {
	return s == StateExited || s == StateFailed || s == StateLost
}

// Session is one agent session as `legion sessions list --json` prints it.
type Session struct {
	Name         string     `json:"name"`  // unique among sessions; what the CLI takes
	ID           string     `json:"id"`    // the session UUID (names its worker's files); the agent's --session-id but for a retro, which resumes the implementer's
	Unit         string     `json:"unit"`  // legion-<short>-<issue>-<mode>.service
	Team         string     `json:"team"`  // team name
	Issue        string     `json:"issue"` // issue identifier; empty for `legion spawn`
	Mode         string     `json:"mode"`  // plan, implement, ...; "spawn" for `legion spawn`
	State        State      `json:"state"`
	Restarts     uint32     `json:"restarts"`           // restarts of the worker since the session was spawned (its run counter - 1)
	PID          int        `json:"pid"`                // the agent's PID, 0 when not running
	LastActivity *time.Time `json:"last_activity"`      // newest output or session-file activity; null if unknown
	Exit         *Exit      `json:"exit"`               // how the last run ended; null while the first run runs
	Question     string     `json:"question,omitempty"` // with waiting_input: what the agent asks
	// Cause says, with failed, why systemd gave up: the start limit hit
	// (with the last run's exit), or the agent that could not be started
	// ("start failed: ... executable file not found in $PATH (PATH=...)");
	// with lost, that the machine rebooted while it ran, and how to start
	// it again (`legion spawn` with its name) or forget it (`legion
	// sessions kill`).
	Cause string `json:"cause,omitempty"`
	// Agent is what the agent inside is doing, from its hooks; nil for an
	// agent without hooks (kind custom) and before its first hook event.
	Agent *Agent `json:"agent,omitempty"`
	// Checking is true while the helper, just started, has yet to hear
	// from the session's worker: State, PID and Restarts are what its unit
	// and the worker's registry entry say (running, starting or exited),
	// not yet what the worker says (waiting_input, stale, the agent's
	// state, the last activity). Only sessions.list answers before every
	// worker was checked; once checked, a session is listed as usual, or
	// leaves the list when recovery quarantined it (see
	// ListResult.Quarantined).
	Checking bool `json:"checking,omitempty"`
	// Resources is the worker unit's memory and CPU use and limits, as
	// systemd accounts them; only sessions.status fills it in.
	Resources *Resources `json:"resources,omitempty"`
	// Instructions are what the agent was told (SpawnArgs.Instructions);
	// only sessions.status fills them in.
	Instructions string `json:"instructions,omitempty"`
	// Engine is where the session runs: "" or EngineSystemd (a transient
	// unit of this user's manager), or EngineKubernetes (a Job on a
	// cluster; Node names the node its pod runs on, "" while unscheduled).
	Engine string `json:"engine,omitempty"`
	Node   string `json:"node,omitempty"`
	// Hooks says, for a session on a cluster, that its worker reads the
	// agent's hook events (SpawnArgs.Agent "claude"): the helper follows
	// its worker through the API server for Agent. Unset under systemd,
	// where the helper watches every worker over its socket.
	Hooks bool `json:"hooks,omitempty"`
}

// The engines a session runs on (Session.Engine, SpawnArgs.Kubernetes).
const (
	EngineSystemd    = "systemd"
	EngineKubernetes = "kubernetes"
)

// KubeTarget is where on a cluster a team's sessions run (engine
// "kubernetes" in legion.toml's [kubernetes] table); see package
// activation/kube for what a session becomes there. The helper reads the
// kubeconfig itself: no credential travels in a request.
type KubeTarget struct {
	Kubeconfig string `json:"kubeconfig,omitempty"` // file; "" means $KUBECONFIG, else ~/.kube/config
	Context    string `json:"context,omitempty"`    // "" means the kubeconfig's current context
	Namespace  string `json:"namespace"`            // the team's namespace
	Image      string `json:"image"`                // the worker image (legion-pty-worker, legion, the agent CLIs)
	// StorageClass and Storage are each issue's volume (worktree, agent
	// session files, Legion's spec, registry and transcript): "" means
	// the cluster's default class.
	StorageClass string `json:"storage_class,omitempty"`
	Storage      string `json:"storage"` // a quantity, e.g. "10Gi"
	// Requests and limits of the worker's container (quantities; "" for
	// none).
	CPURequest    string `json:"cpu_request,omitempty"`
	MemoryRequest string `json:"memory_request,omitempty"`
	CPULimit      string `json:"cpu_limit,omitempty"`
	MemoryLimit   string `json:"memory_limit,omitempty"`
	// SecretName is the team's Secret (the agents' API keys, one file
	// per key) mounted read-only into every session's pod at
	// /run/secrets/legion; "" for none.
	SecretName string `json:"secret_name,omitempty"`
}

// Resources is a session's use of memory and CPU, read from its worker
// unit over D-Bus (MemoryCurrent, CPUUsageNSec), with the unit's limits
// (MemoryMax=, CPUWeight=; agent.memory_max and agent.cpu_weight in
// legion.toml). A null figure is one systemd does not report; NotAccounted
// says why.
type Resources struct {
	MemoryBytes  *uint64 `json:"memory_bytes"`            // the unit's memory, agent included
	CPUNSec      *uint64 `json:"cpu_nsec"`                // CPU time used by the unit since it started
	MemoryMax    *uint64 `json:"memory_max"`              // null: no limit of the unit's own
	CPUWeight    *uint64 `json:"cpu_weight"`              // null: systemd's default (100)
	NotAccounted string  `json:"not_accounted,omitempty"` // why memory_bytes or cpu_nsec is null
}

// Exit is how a session's last run ended.
type Exit struct {
	Code   *int      `json:"code,omitempty"`   // exit code, when it exited
	Signal string    `json:"signal,omitempty"` // signal name, when killed by one
	Time   time.Time `json:"time"`
	Reason string    `json:"reason,omitempty"` // e.g. "watchdog: stale for 612s", "killed by legion sessions kill"
}

// String renders e for people: "exit code 3 at 15:04:05 (reason)".
func (e *Exit) String() string {
	if e == nil {
		return "no exit recorded"
	}
	var s string
	switch {
	case e.Signal != "":
		s = "killed by signal " + e.Signal
	case e.Code != nil:
		s = fmt.Sprintf("exit code %d", *e.Code)
	default:
		s = "ended"
	}
	if !e.Time.IsZero() {
		s += " at " + e.Time.Local().Format(time.DateTime)
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// RecoveryCounts are the outcome of the helper's last recovery.
type RecoveryCounts struct {
	Recovered   int `json:"recovered"`   // sessions adopted: ours, and their worker answered (or their unit is restarting); while recovery is under way also those whose worker has yet to (ListResult.Checking)
	Pruned      int `json:"pruned"`      // registry entries whose worker is dead and unit gone (moved to registry/pruned)
	Lost        int `json:"lost"`        // `legion spawn` sessions that a reboot cut (listed as lost, entries kept)
	Quarantined int `json:"quarantined"` // entries not ours, of another RPC version, corrupt, or unreachable after retries
	Failed      int `json:"failed"`      // entries recovery could not examine (I/O or D-Bus errors); see the helper's log
}

// Quarantined is a registry entry the helper refuses to adopt.
type Quarantined struct {
	Name   string `json:"name"`   // session name or registry file base name
	Path   string `json:"path"`   // where the entry now lies
	Reason string `json:"reason"` // why, e.g. "owner mismatch: daemon id ..."
}

// NameArgs are the args of commands about one session.
type NameArgs struct {
	Name string `json:"name"`
}

// ListResult is the result of sessions.list.
type ListResult struct {
	DaemonID    string         `json:"daemon_id"`
	Sessions    []Session      `json:"sessions"`
	Recovery    RecoveryCounts `json:"recovery"`
	Quarantined []Quarantined  `json:"quarantined,omitempty"`
	// Checking counts the sessions listed whose workers the helper, just
	// started, has yet to hear from (Session.Checking): recovery is under
	// way, and they count as recovered until their check says otherwise
	// (then they leave the list, counted as quarantined or pruned). 0 once
	// recovery is done.
	Checking int `json:"checking,omitempty"`
}

// StatusResult is the result of sessions.status, sessions.kill and send.
type StatusResult struct {
	Session Session `json:"session"`
}

// LogsArgs are the args of sessions.logs.
type LogsArgs struct {
	Name   string `json:"name"`
	Follow bool   `json:"follow,omitempty"` // keep streaming, across unit restarts, until the session ends or the client closes
	Offset int64  `json:"offset,omitempty"` // transcript byte offset to start from
	// Tail, instead of Offset, starts at most this many bytes before the
	// transcript's end as it is when the stream begins, so the end of a
	// long transcript costs what it shows, not the whole file.
	Tail int64 `json:"tail,omitempty"`
}

// LogEvent is one stream item of sessions.logs: a chunk of transcript bytes
// starting at Offset (Data is base64 in JSON).
type LogEvent struct {
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
}

// LogsResult ends a sessions.logs stream: Offset is where the next read
// would start; Reason says why the stream ended ("eof", "session ended").
type LogsResult struct {
	Offset int64  `json:"offset"`
	Reason string `json:"reason"`
}

// SendArgs are the args of send: Text is typed into the session as is,
// then, unless NoEnter, a carriage return (the Enter key).
type SendArgs struct {
	Name    string `json:"name"`
	Text    string `json:"text"`
	NoEnter bool   `json:"no_enter,omitempty"`
}

// AttachArgs are the args of attach.
type AttachArgs struct {
	Name     string `json:"name"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// AttachResult comes with one file descriptor: a unix stream socket
// connected to the session's worker, on which the helper has already done
// the worker's hello (so the control token never leaves the helper). The
// client speaks the worker protocol (package ptyworker/proto) on it from attach
// on. The descriptor arrives with the response line (SCM_RIGHTS).
type AttachResult struct {
	Session Session `json:"session"`
	// Relayed: the descriptor is a relay to a worker elsewhere (a pod on
	// a cluster, through the API server's exec), not the worker's own
	// socket; no ring descriptor can cross it, so attach without mapped.
	Relayed bool `json:"relayed,omitempty"`
}

// SpawnArgs are the args of spawn: a full launch, planned by the caller
// (`legion spawn`, `legion dispatch`, a team's controller) with its team's
// values from legion.toml. The helper applies no defaults of its own: a
// launch that leaves a required field out or gives a bad value is refused
// with bad_request naming the field. The helper derives the unit name,
// legion-<first 8 hex digits of TeamID>-<Issue, or Name without an
// issue>-<Mode>.service, and checks it.
type SpawnArgs struct {
	Team   string `json:"team"`    // the team's name
	TeamID string `json:"team_id"` // the team's UUID
	Name   string `json:"name"`    // session name, unique across teams (see ValidateName)
	ID     string `json:"id"`      // the session's UUID; it names the worker's spec, registry, socket and transcript
	// AgentSession is the agent conversation's session UUID, its
	// LEGION_SESSION, when it is not ID: a retro worker resumes the
	// implementer's conversation. Empty means ID.
	AgentSession string `json:"agent_session,omitempty"`
	Issue        string `json:"issue,omitempty"` // the issue a dispatched worker works on; empty for `legion spawn`
	Mode         string `json:"mode"`            // plan, implement, review, retro, finish; "spawn" for `legion spawn`
	Role         string `json:"role"`            // "worker" (a dispatched agent) or "command" (`legion spawn`)

	Cwd        string   `json:"cwd"`                   // absolute, an existing directory
	Argv       []string `json:"argv"`                  // the command of a new run, no shell: an absolute program or a bare name found in the worker's PATH
	ArgvResume []string `json:"argv_resume,omitempty"` // with Watch: the command of a run whose session file exists; empty means Argv
	Env        []string `json:"env,omitempty"`         // KEY=VALUE for the command
	// EnvFiles are more variables of the command, each read by the worker
	// from a file (absolute, where the worker runs) at every start of the
	// agent and of its prepare commands, a trailing newline cut: a key
	// mounted from a Kubernetes Secret reaches the agent so, never in the
	// spec, argv or logs. One that cannot be read keeps the agent from
	// starting (exit 78: fix the file, then dispatch again).
	EnvFiles map[string]string `json:"env_files,omitempty"`
	Watch    string            `json:"watch,omitempty"` // session file whose mtime feeds the watchdog; empty: no staleness
	// ResumeMarker, with Watch and ArgvResume: the run is resumed only
	// when the session file holds these bytes (Claude Code's first user
	// message); a file without them is moved aside, kept, and the run
	// starts anew. Empty: any session file resumes.
	ResumeMarker string `json:"resume_marker,omitempty"`
	// Prepare are commands the worker runs, in order, each time it starts
	// (each pod, each restart of its unit), before the agent starts, new
	// or resumed: e.g. `legion worktree ensure TEAM ISSUE`, which makes
	// the directory Cwd names. Each is an argv like Argv (no shell), run
	// in "/" with the agent's environment (Env, LEGION_*) but not its hook
	// socket, stdin empty, for at most proto.PrepareTimeout (5 minutes).
	// One that fails or times out keeps the agent from starting: the run
	// fails with the command's stderr's tail as the cause ("start failed:
	// prepare: ...") and is retried after the cooldown up to the start
	// limit, as a crashed agent is (not at once for good, as an agent
	// that cannot start is). At most 16. Under systemd the spawn answers
	// once the first start's commands are done (the unit's start waits for
	// the agent), with their failure as its error; on a cluster, once the
	// Job is made.
	Prepare [][]string `json:"prepare,omitempty"`
	// KubeFiles are files for a session on a cluster only (Kubernetes
	// set): each is a key of the session's spec Secret, mounted read-only
	// beside spec.json as /run/legion-spec/NAME, e.g. a small legion.toml
	// for the pod's own legion. A name is a DNS subdomain (lower-case
	// letters, digits, '-' and '.', starting and ending with a letter or
	// digit), never "spec.json"; together at most MaxKubeFiles bytes. The
	// helper treats them like the spec (never logged), but they are not
	// for credentials: those go in KubeTarget.SecretName's Secret.
	KubeFiles map[string][]byte `json:"kube_files,omitempty"`
	// StaleAfter: with Watch, restart when the file is older than this;
	// without, when a claude agent that works sent no hook event, or a
	// custom agent printed nothing, for this long. Zero: no staleness.
	StaleAfter Duration `json:"stale_after,omitempty"`
	// Agent is the agent's kind: "claude" (state from its hooks, ended
	// cleanly when done) or "custom" (any terminal program: liveness from
	// its output). Empty means custom.
	Agent string `json:"agent,omitempty"`
	// Sandbox, when set, confines the agent (not its worker) to these
	// files with Landlock: the permission policy "sandbox". A worker that
	// cannot confine it refuses to start it.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Instructions are what the agent was told (its phase's rendered
	// instructions, which its argv carries as the prompt), kept so that
	// sessions.status can show them; empty for none.
	Instructions string `json:"instructions,omitempty"`
	// OwnCommands are the groups of Legion's own commands (OwnIssue,
	// OwnState, OwnWorktreeFinish) whose permission requests the worker
	// allows at once when the agent runs one for this session's own team
	// and issue, as the team's permission policy says. Agent "claude"
	// only; empty: every permission request waits for a person.
	OwnCommands []string `json:"own_commands,omitempty"`
	// DialogMarkers are lines on the agent's screen while one of its own
	// approval dialogs is open that no hook answers (the Gemini CLI's),
	// besides Claude Code's; the worker answers them with Claude Code's
	// keys (1 allows once, Esc declines). Agent "claude" only.
	DialogMarkers []string `json:"dialog_markers,omitempty"`
	// Legion is the legion program's absolute path, as the agent's hooks
	// run it: with OwnCommands, a command that runs Legion by this path
	// (or another path of the same file) is Legion's own, as is one that
	// runs `legion` by name.
	Legion string `json:"legion,omitempty"`

	// Supervision, as the team's legion.toml says (the helper has no
	// defaults): RestartSec=, StartLimitBurst=, StartLimitIntervalSec= of
	// the unit, and the worker's startup grace and scrollback.
	Cooldown           *Duration `json:"cooldown"`                // required; 0 restarts at once
	StartLimitBurst    int       `json:"start_limit_burst"`       // at least 1
	StartLimitInterval Duration  `json:"start_limit_interval"`    // positive
	StartupGrace       *Duration `json:"startup_grace,omitempty"` // required with Watch, refused without
	RingSize           int       `json:"ring_size"`               // bytes, 4 KiB to 256 MiB

	// MaxLive, when not 0, is the machine's cap on live sessions of all
	// teams ([helper] session_limit): the spawn is refused (CodeNoRoom)
	// when that many are live or being spawned with a cap, counted under
	// one lock, so two controllers deciding at once cannot both pass it.
	MaxLive int `json:"max_live,omitempty"`

	// Reuse makes a live session of the same name and team a success
	// (Started false: dispatch is idempotent) instead of an exists error.
	// A live session of another team that holds the name is an exists
	// error either way.
	Reuse bool `json:"reuse,omitempty"`

	// Kubernetes, when set, runs the session as a Job on that cluster
	// instead of a transient unit of this user's manager (the team's
	// engine "kubernetes"). Cwd, Argv, Env and Watch are then paths in
	// the session's pod, not checked on this machine.
	Kubernetes *KubeTarget `json:"kubernetes,omitempty"`
}

// MaxKubeFiles bounds the total size of SpawnArgs.KubeFiles' contents:
// they travel in one request (base64, in a line of at most 256 KiB) and
// share the session's Secret (at most 1 MiB) with its spec.
const MaxKubeFiles = 128 << 10

// ModeSpawn is the mode of sessions started with `legion spawn` (the
// last part of their unit name).
const ModeSpawn = "spawn"

// SpawnResult is the result of spawn.
type SpawnResult struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	Unit string `json:"unit"`
	// Started is false when SpawnArgs.Reuse found the session live.
	Started bool `json:"started"`
}

// maxNameLen bounds session names (they become file and unit name parts).
const maxNameLen = 100

// ValidateName checks a session name: non-empty, at most 100 bytes of
// UTF-8, no '/', not "." and no "..", no whitespace or control characters.
// The error says which rule the name broke.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("session name is empty")
	case len(name) > maxNameLen:
		return fmt.Errorf("session name %q is %d bytes long, at most %d allowed", name[:20]+"...", len(name), maxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("session name %q is not valid UTF-8", name)
	case strings.Contains(name, "/"):
		return fmt.Errorf("session name %q contains '/': names are single path components", name)
	case name == "." || strings.Contains(name, ".."):
		return fmt.Errorf("session name %q contains '..' or is '.': names must not walk paths", name)
	case strings.HasPrefix(name, "-"):
		return fmt.Errorf("session name %q starts with '-'", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("session name %q contains the control or space character %U", name, r)
		}
	}
	return nil
}

// Sandbox is what an agent of the permission policy "sandbox" may touch,
// enforced by its worker with Landlock on the agent's process tree (see
// ptyworker/confine). Every path is absolute. A path that does not exist
// when the agent starts is skipped, but for MakeDirs.
type Sandbox struct {
	// Write are the files and directories (each with everything below it)
	// the agent may read, write, create and remove.
	Write []string `json:"write"`
	// MakeDirs are directories of Write that the worker creates (0700)
	// when missing: the toolchains' caches.
	MakeDirs []string `json:"make_dirs,omitempty"`
	// Read are the trees the agent may read and execute, e.g. "/".
	Read []string `json:"read"`
	// Hide are files and directories below Read that it may not read:
	// secrets. A path of Write below one of them stays writable.
	Hide []string `json:"hide,omitempty"`
	// Connect are the unix sockets it may connect to (its own worker's,
	// for its hooks), where the kernel can say (Landlock ABI 9); an older
	// kernel lets it connect to any socket it can name.
	Connect []string `json:"connect,omitempty"`
}
