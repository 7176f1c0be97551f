// Package wire is what the helper and its Kubernetes engine process
// (legion-kube engine) say to each other: JSON lines, requests on the
// engine's stdin, replies and session events on its stdout; and what
// `legion doctor` asks `legion-kube check` (CheckRequest) and hears back
// (Report). It imports
// nothing of Kubernetes, so the legion program, whose every start (each
// `legion hook` an agent runs) pays for what it links, stays small: the
// client libraries live in legion-kube alone (internal/layout asserts it).
package wire

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/legion-dev/legion/activation/api"
)

// Ops of a Request.
const (
	OpStart    = "start"     // follow Target's sessions (its informers); replies when listed once
	OpSpawn    = "spawn"     // Spawn on Target
	OpKill     = "kill"      // SessionID on Target
	OpTeamStop = "team_stop" // every live session of the team with short id Short, on every target
	OpList     = "list"      // every session of every target; with Name, only the session of that name
	OpPod      = "pod"       // the running pod of the session of Name, and its Target: where to exec
)

// Request is one line on the engine's stdin.
type Request struct {
	ID        uint64          `json:"id"`
	Op        string          `json:"op"`
	Target    *api.KubeTarget `json:"target,omitempty"`
	Spawn     *Spawn          `json:"spawn,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	Short     string          `json:"short,omitempty"`
	Name      string          `json:"name,omitempty"`
}

// Reply is one line on the engine's stdout: the answer to request ID,
// or, with ID 0, an Event.
type Reply struct {
	ID       uint64          `json:"id,omitempty"`
	Error    *api.Error      `json:"error,omitempty"`
	Started  bool            `json:"started,omitempty"`
	Sessions []api.Session   `json:"sessions,omitempty"`
	Stopped  []string        `json:"stopped,omitempty"`
	Event    *api.Session    `json:"event,omitempty"`  // a session's new view (its Job or a pod changed)
	Pod      string          `json:"pod,omitempty"`    // OpPod: the session's running pod
	Target   *api.KubeTarget `json:"target,omitempty"` // OpPod: the cluster it runs on
}

// Spawn is one session to run as a Job: the helper's checked launch.
type Spawn struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Team   string `json:"team"`
	TeamID string `json:"team_id"`
	Issue  string `json:"issue,omitempty"`
	Mode   string `json:"mode"`
	Unit   string `json:"unit"`
	// Spec is the worker's spec file (JSON, with its control token): it
	// goes into a Secret, never into the Job's spec.
	Spec []byte `json:"spec"`
	// StartLimitBurst is how many runs may fail before the session fails
	// for good (the Job's backoffLimit is one less).
	StartLimitBurst int `json:"start_limit_burst"`
	// Socket is the worker's socket in the pod (proto.Spec.SocketPath):
	// the pod's environment names it (EnvSocket), for ConnectCommand.
	Socket string `json:"socket,omitempty"`
	// Reuse: a failed Job of the session is an error, not replaced (a
	// dispatch never restarts what failed for good).
	Reuse bool `json:"reuse,omitempty"`
	// Files are more keys of the spec's Secret (api.SpawnArgs.KubeFiles),
	// files of SpecDir in the pod beside SpecKey; names as CheckFileName
	// says. Never logged.
	Files map[string][]byte `json:"files,omitempty"`
	// Hooks: the worker reads the agent's hook events, so its agent
	// state is worth following (api.Session.Hooks).
	Hooks bool `json:"hooks,omitempty"`
}

// SpecKey is the spec's key in a session's spec Secret: the file name
// of SpecFile.
const SpecKey = "spec.json"

// fileName is a DNS subdomain (RFC 1123), the names Kubernetes gives
// objects: a Secret's keys may hold more ('_', capitals), but a name that
// is a subdomain is a plain file name everywhere.
var fileName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// CheckFileName checks the name of a file of a session's spec Secret
// (Spawn.Files): a DNS subdomain of at most 253 bytes, not SpecKey. The
// error says what was expected.
func CheckFileName(name string) error {
	switch {
	case name == SpecKey:
		return fmt.Errorf("%q is the spec's own file: choose another name", name)
	case len(name) > 253 || !fileName.MatchString(name):
		return errors.New("want a DNS subdomain (at most 253 of a-z, 0-9, '-' and '.', starting and ending with a letter or digit), e.g. \"legion.toml\"")
	}
	return nil
}

// Paths in a session's pod. The issue's volume holds everything that must
// outlive a pod: the worktree, the agent's home (its session files) and
// Legion's state (registry, transcript); the worker's sockets are on an
// emptyDir of the pod, its spec on a Secret.
const (
	VolumeMount = "/legion"          // the issue's volume
	StateDir    = "/legion/state"    // proto.Paths.StateDir
	HomeDir     = "/legion/home"     // HOME: the agent's session files
	WorkDir     = "/legion/work"     // the worktree
	RuntimeDir  = "/run/legion"      // proto.Paths.RuntimeDir (emptyDir)
	SpecDir     = "/run/legion-spec" // the spec Secret
	SpecFile    = SpecDir + "/" + SpecKey
	SecretsDir  = "/run/secrets/legion" // the team's Secret (KubeTarget.SecretName)
)

// The environment of a session's container that ConnectCommand, run in
// it by exec, finds its worker by: the spec (token and daemon id for its
// hello) and the socket.
const (
	EnvSpec   = "LEGION_WORKER_SPEC"
	EnvSocket = "LEGION_WORKER_SOCKET"
)

// ConnectCommand, run by exec in a session's container, says hello to
// its worker and then relays its stdin and stdout to the worker's socket
// (ptyworker.Connect): the API server's exec stream becomes a connection
// to the worker, as the helper's attach broker gives one on the machine.
var ConnectCommand = []string{"legion-pty-worker", "--connect"}

// TranscriptCommand, run by exec in a session's container, writes the
// offset it starts at (one decimal line), then the session's transcript
// from offset (or tail bytes before its end); with follow, until its
// stdin ends (ptyworker.Transcript).
func TranscriptCommand(offset, tail int64, follow bool) []string {
	c := []string{"legion-pty-worker", "--transcript", "--offset", strconv.FormatInt(offset, 10), "--tail", strconv.FormatInt(tail, 10)}
	if follow {
		c = append(c, "--follow")
	}
	return c
}

// JobName is the name of session id's Job; its Secret is SecretName.
func JobName(id string) string    { return "legion-" + id }
func SecretName(id string) string { return "legion-spec-" + id }

// BinaryName is the engine's program, found beside legion.
const BinaryName = "legion-kube"
