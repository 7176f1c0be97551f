package proto

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/atomicfile"
)

// SpecVersion is the version of the spec file format this package writes
// and reads.
const SpecVersion = 1

// Defaults and limits of spec values.
const (
	DefaultCols  = 80
	DefaultRows  = 24
	MaxTermDim   = 4096
	maxSpecBytes = 1 << 20
	// MaxSocketPath is the longest socket path a worker accepts: well under
	// the 108-byte sun_path limit, so a path that grows a little still fits.
	MaxSocketPath = 100
)

// Agent kinds (Spec.Agent).
const (
	AgentCustom = "custom" // any terminal program: no hooks; liveness from its output
	AgentClaude = "claude" // Claude Code: state from its hooks
)

// PrepareTimeout bounds each of a spec's prepare commands (Spec.Prepare):
// a clone of a large repository onto a new volume fits in it, a command
// that hangs does not hold the session's start for ever.
const PrepareTimeout = 5 * time.Minute

// MaxPrepare is how many prepare commands a spec may hold.
const MaxPrepare = 16

// maxDialogMarkers and maxDialogMarker bound Spec.DialogMarkers.
const (
	maxDialogMarkers = 8
	maxDialogMarker  = 200
)

// ownCommandGroups are the values Spec.OwnCommands may hold.
var ownCommandGroups = []string{api.OwnIssue, api.OwnState, api.OwnWorktreeFinish}

// clip shortens s to n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Argv kinds: which of the spec's argv a run uses.
const (
	ArgvNew    = "new"
	ArgvResume = "resume"
)

// Spec is everything a worker needs to host one session. It is written by
// whoever creates the worker unit (0600, owned by the user) and read by the
// worker at every start. It holds the control token, so it never goes on a
// command line or into unit properties.
type Spec struct {
	Version   int    `json:"version"`
	SessionID string `json:"session_id"` // a UUID; names the worker's files
	Name      string `json:"name"`       // human name of the session
	Team      string `json:"team"`
	TeamShort string `json:"team_short"` // the team's short ID (8 hex digits)
	Issue     string `json:"issue,omitempty"`
	Mode      string `json:"mode,omitempty"` // phase: plan, implement, review, ...
	Role      string `json:"role,omitempty"` // "worker", "controller", "command", ...

	// AgentSession is the agent conversation's session ID (what the agent
	// is started or resumed with) when it is not SessionID: a retro resumes
	// the implementer's conversation under a worker of its own. See
	// AgentSessionID.
	AgentSession string `json:"agent_session,omitempty"`

	Cwd string   `json:"cwd"`
	Env []string `json:"env,omitempty"` // KEY=VALUE, on top of the worker's environment
	// EnvFiles are more of the agent's variables, each read from a file
	// at every start of the agent (and of its prepare commands): the
	// file's contents, a trailing newline cut. A key mounted from a
	// Kubernetes Secret reaches the agent so, never written into the
	// spec, argv or logs. A file that cannot be read keeps the agent from
	// starting (ErrAgentNotStartable: a restart would read the same).
	EnvFiles   map[string]string `json:"env_files,omitempty"`
	ArgvNew    []string          `json:"argv_new"`              // argv when the session file does not exist
	ArgvResume []string          `json:"argv_resume,omitempty"` // argv when it does; empty: always ArgvNew
	// Prepare are commands the worker runs in order at each of its starts,
	// before the agent (new or resumed): no shell, in "/", with the
	// agent's environment but no hook socket, each bounded by
	// PrepareTimeout (api.SpawnArgs's). One that fails keeps the agent
	// from starting and fails the run, which its supervisor retries.
	Prepare [][]string `json:"prepare,omitempty"`

	// Agent is the agent's kind: AgentClaude (its state from its hooks,
	// see hook.go) or AgentCustom; empty means custom. It picks the
	// watchdog's rules (notify.go).
	Agent string `json:"agent,omitempty"`
	// Instructions are what the agent was told (the prompt its argv
	// carries), for `legion sessions status`; the worker does not read them.
	Instructions string `json:"instructions,omitempty"`
	// EndWhenIdle ends the agent cleanly (completed) as soon as its turn
	// has ended with no background task left: one pass of a controller
	// agent, which its host then starts again. Kind claude only.
	EndWhenIdle bool `json:"end_when_idle,omitempty"`
	// OwnCommands are the groups of Legion's own commands (api.OwnIssue,
	// api.OwnState, api.OwnWorktreeFinish) the worker allows at once when the
	// agent asks permission to run one for the session's own team and
	// issue (owncommand.go), as the team's permission policy says. Kind
	// claude only; empty: every request waits for a person.
	OwnCommands []string `json:"own_commands,omitempty"`
	// DialogMarkers are lines on the agent's screen while one of its own
	// approval dialogs is open that no hook answers (api.SpawnArgs's):
	// the worker answers them with Claude Code's keys. Kind claude only.
	DialogMarkers []string `json:"dialog_markers,omitempty"`
	// Legion is the legion program's absolute path as the agent's hooks
	// run it: a command that runs Legion by this path (or another of the
	// same file) is one of Legion's own, as one that runs `legion` by name.
	Legion string `json:"legion,omitempty"`

	// Sandbox, when set, confines the agent with Landlock (package
	// confine): the permission policy "sandbox". The worker adds its own
	// socket to Sandbox.Connect (the agent's hooks), and refuses to start
	// the agent when the kernel cannot confine it.
	Sandbox *api.Sandbox `json:"sandbox,omitempty"`

	// SessionFile is the agent's session file (Claude Code layout). Empty
	// means no session-file liveness: see notify.go for what feeds the
	// watchdog then.
	SessionFile string `json:"session_file,omitempty"`
	// ResumeMarker: ArgvResume runs only when SessionFile holds these
	// bytes (Claude Code's first user message); a file without them is
	// moved aside (SetAsideUnresumable). Empty: any session file resumes.
	ResumeMarker string   `json:"resume_marker,omitempty"`
	StaleAfter   Duration `json:"stale_after,omitempty"`   // required with SessionFile; without, liveness by hooks (claude) or output (custom)
	StartupGrace Duration `json:"startup_grace,omitempty"` // fed regardless for this long after start
	// SelfWatchdog: no systemd watchdog supervises the worker (engine
	// kubernetes: a Job's pod). On the first stale verdict the worker
	// ends the agent itself, records why, and exits 1, so the Job starts
	// a new pod that resumes the same conversation, as systemd restarts
	// a unit whose watchdog was triggered.
	SelfWatchdog bool `json:"self_watchdog,omitempty"`

	RingSize int `json:"ring_size,omitempty"` // bytes of output kept; 0 means DefaultRingSize
	Cols     int `json:"cols,omitempty"`      // initial PTY size; 0 means 80x24
	Rows     int `json:"rows,omitempty"`

	Token            string `json:"token"` // control token for hello
	DaemonInstanceID string `json:"daemon_instance_id"`
	Paths            Paths  `json:"paths"`
	Unit             string `json:"unit,omitempty"` // the worker's unit name, for the registry
}

// Paths are the directories a worker uses.
type Paths struct {
	// RuntimeDir holds sockets ($XDG_RUNTIME_DIR/legion): the worker's
	// socket is RuntimeDir/w/<short session id>.sock.
	RuntimeDir string `json:"runtime_dir"`
	// StateDir holds durable state ($XDG_STATE_HOME/legion): registry/ and
	// transcripts/.
	StateDir string `json:"state_dir"`
}

// Duration is a time.Duration written in JSON as a duration string
// ("10m", "1m30s"): the helper API's type (api.Duration), Legion's one.
type Duration = api.Duration

// NewToken returns a fresh random control token (32 bytes, base64url).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// CheckEnvFiles checks Spec.EnvFiles (and api.SpawnArgs'): each a
// variable's name (letters, digits and '_', not starting with a digit)
// and an absolute path.
func CheckEnvFiles(files map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(files)) {
		if !envName(k) {
			return fmt.Errorf("%q: want a variable's name (letters, digits and '_', not starting with a digit)", clip(k, 32))
		}
		if p := files[k]; !filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
			return fmt.Errorf("%s: %q is not an absolute path", k, clip(p, 64))
		}
	}
	return nil
}

// envName reports whether k is a portable variable name.
func envName(k string) bool {
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return k != ""
}

// ReadEnvFiles reads files (Spec.EnvFiles) as KEY=VALUE entries, sorted by
// key: each file's contents with one trailing newline (or CRLF) cut. The
// error names the variable and the file, never a value.
func ReadEnvFiles(files map[string]string) ([]string, error) {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(files)) {
		b, err := os.ReadFile(files[k])
		if err != nil {
			return nil, fmt.Errorf("%s from %s: %w", k, files[k], err)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("%s from %s: the file holds a NUL byte", k, files[k])
		}
		env = append(env, k+"="+v)
	}
	return env, nil
}

// Validate checks every field; the error names the first bad field and what
// was expected.
func (s *Spec) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("field %s: %s", field, fmt.Sprintf(format, args...))
	}
	if s.Version != SpecVersion {
		return bad("version", "got %d, want %d", s.Version, SpecVersion)
	}
	if _, err := uuid.Parse(s.SessionID); err != nil || len(s.SessionID) != 36 {
		return bad("session_id", "%q is not a UUID (like 0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c)", s.SessionID)
	}
	if _, err := uuid.Parse(s.AgentSession); s.AgentSession != "" && (err != nil || len(s.AgentSession) != 36) {
		return bad("agent_session", "%q is not a UUID (like 0b7e2a4c-3f1d-5a8e-9c2b-6d4f1e0a7b3c)", s.AgentSession)
	}
	for _, f := range []struct{ name, v string }{{"name", s.Name}, {"team", s.Team}} {
		if f.v == "" {
			return bad(f.name, "must not be empty")
		}
	}
	for _, f := range []struct{ name, v string }{
		{"name", s.Name}, {"team", s.Team}, {"issue", s.Issue}, {"mode", s.Mode}, {"role", s.Role}, {"unit", s.Unit},
	} {
		if HasCtl(f.v) {
			return bad(f.name, "%q holds control characters", f.v)
		}
	}
	if !isShortID(s.TeamShort) {
		return bad("team_short", "%q is not 8 lowercase hex digits", s.TeamShort)
	}
	if !filepath.IsAbs(s.Cwd) {
		return bad("cwd", "%q is not an absolute path", s.Cwd)
	}
	for i, kv := range s.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return bad("env", "entry %d %q is not KEY=VALUE", i, kv)
		}
	}
	if err := CheckEnvFiles(s.EnvFiles); err != nil {
		return bad("env_files", "%v", err)
	}
	if err := checkArgv(s.ArgvNew); err != nil {
		return bad("argv_new", "%v", err)
	}
	if len(s.ArgvResume) > 0 {
		if err := checkArgv(s.ArgvResume); err != nil {
			return bad("argv_resume", "%v", err)
		}
	}
	if len(s.Prepare) > MaxPrepare {
		return bad("prepare", "%d commands: want at most %d", len(s.Prepare), MaxPrepare)
	}
	for i, argv := range s.Prepare {
		if err := checkArgv(argv); err != nil {
			return bad(fmt.Sprintf("prepare[%d]", i), "%v", err)
		}
	}
	if s.Agent != "" && s.Agent != AgentCustom && s.Agent != AgentClaude {
		return bad("agent", "%q: want %q, %q or nothing (custom)", clip(s.Agent, 32), AgentClaude, AgentCustom)
	}
	if s.EndWhenIdle && s.Agent != AgentClaude {
		return bad("end_when_idle", "needs agent %q (an agent without hooks has no turns to see end)", AgentClaude)
	}
	for _, g := range s.OwnCommands {
		if !slices.Contains(ownCommandGroups, g) {
			return bad("own_commands", "%q: want some of %q", clip(g, 32), ownCommandGroups)
		}
	}
	if len(s.DialogMarkers) > maxDialogMarkers {
		return bad("dialog_markers", "%d markers: want at most %d", len(s.DialogMarkers), maxDialogMarkers)
	}
	for _, m := range s.DialogMarkers {
		if strings.TrimSpace(m) == "" || len(m) > maxDialogMarker || strings.ContainsAny(m, "\n\r") {
			return bad("dialog_markers", "%q: want a line of screen text, 1 to %d bytes", clip(m, 32), maxDialogMarker)
		}
	}
	if len(s.DialogMarkers) > 0 && s.Agent != AgentClaude {
		return bad("dialog_markers", "needs agent %q (the worker answers dialogs of agents with hooks)", AgentClaude)
	}
	if s.Legion != "" && !filepath.IsAbs(s.Legion) {
		return bad("legion", "%q is not an absolute path", s.Legion)
	}
	if len(s.OwnCommands) > 0 && s.Agent != AgentClaude {
		return bad("own_commands", "needs agent %q (an agent without hooks asks no permission the worker sees)", AgentClaude)
	}
	if s.Sandbox != nil {
		if err := s.Sandbox.Check(); err != nil {
			return bad("sandbox", "%v", err)
		}
	}
	if s.SessionFile != "" && !filepath.IsAbs(s.SessionFile) {
		return bad("session_file", "%q is not an absolute path", s.SessionFile)
	}
	if s.SessionFile != "" && s.StaleAfter <= 0 {
		return bad("stale_after", "must be a positive duration when session_file is set (got %s)", time.Duration(s.StaleAfter))
	}
	if s.StaleAfter < 0 {
		return bad("stale_after", "must not be negative (got %s)", time.Duration(s.StaleAfter))
	}
	if s.StartupGrace < 0 {
		return bad("startup_grace", "must not be negative (got %s)", time.Duration(s.StartupGrace))
	}
	if s.RingSize != 0 && (s.RingSize < MinRingSize || s.RingSize > MaxRingSize) {
		return bad("ring_size", "%d is outside %d..%d bytes", s.RingSize, MinRingSize, MaxRingSize)
	}
	if (s.Cols == 0) != (s.Rows == 0) || s.Cols < 0 || s.Rows < 0 || s.Cols > MaxTermDim || s.Rows > MaxTermDim {
		return bad("cols/rows", "want both 1..%d or both unset (got %dx%d)", MaxTermDim, s.Cols, s.Rows)
	}
	if len(s.Token) < 16 {
		return bad("token", "must be at least 16 characters (see NewToken)")
	}
	if s.DaemonInstanceID == "" || HasCtl(s.DaemonInstanceID) {
		return bad("daemon_instance_id", "must be non-empty printable text")
	}
	if !filepath.IsAbs(s.Paths.RuntimeDir) {
		return bad("paths.runtime_dir", "%q is not an absolute path", s.Paths.RuntimeDir)
	}
	if !filepath.IsAbs(s.Paths.StateDir) {
		return bad("paths.state_dir", "%q is not an absolute path", s.Paths.StateDir)
	}
	if p := s.SocketPath(); len(p) > MaxSocketPath {
		return bad("paths.runtime_dir", "socket path %s is %d bytes; the limit is %d (sun_path holds 108): use a shorter runtime dir", p, len(p), MaxSocketPath)
	}
	return nil
}

func checkArgv(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("must hold a program and its arguments")
	}
	for i, a := range argv {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("argument %d holds a NUL byte", i)
		}
	}
	return nil
}

func HasCtl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func isShortID(s string) bool {
	if len(s) != 8 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// AgentSessionID is the value of LEGION_SESSION everywhere Legion sets it:
// in the agent's environment, the worker unit's environment, and the
// "session" attribute of the worker's, the helper's and the controller's
// log entries (the journal field LEGION_SESSION, see internal/journal).
// It is the agent conversation's session ID, what a person greps for:
// AgentSession when set, else SessionID.
func (s *Spec) AgentSessionID() string {
	if s.AgentSession != "" {
		return s.AgentSession
	}
	return s.SessionID
}

// ShortSessionID is the first 12 hex digits of the session ID: the socket's
// file name.
func (s *Spec) ShortSessionID() string {
	id := strings.ReplaceAll(s.SessionID, "-", "")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

// SocketDir is the 0700 directory of worker sockets.
func (s *Spec) SocketDir() string { return filepath.Join(s.Paths.RuntimeDir, "w") }

// SocketPath is the worker's RPC socket.
func (s *Spec) SocketPath() string {
	return filepath.Join(s.SocketDir(), s.ShortSessionID()+".sock")
}

// RegistryPath is the session's registry file.
func (s *Spec) RegistryPath() string {
	return filepath.Join(s.Paths.StateDir, "registry", s.SessionID+".json")
}

// TranscriptPath is the session's transcript file.
func (s *Spec) TranscriptPath() string {
	return filepath.Join(s.Paths.StateDir, "transcripts", s.SessionID+".log")
}

// ChooseArgv picks the argv for a start: the resume argv when the session
// file exists (and a resume argv is set), else the new one. For Claude
// Code the file must also hold the conversation (a user message): it
// writes its mode, permission and file-history lines first, and `claude
// --resume` of a file with no message fails with "No conversation found
// with session ID", exit 1, at every restart (agent/claude FACTS F13a),
// so an agent killed in that moment of its start failed for good at its
// start limit (the chaos run found it).
func (s *Spec) ChooseArgv() (kind string, argv []string) {
	if len(s.ArgvResume) > 0 && s.SessionFile != "" && resumable(s.SessionFile, s.ResumeMarker) {
		return ArgvResume, s.ArgvResume
	}
	return ArgvNew, s.ArgvNew
}

// SetAsideUnresumable moves aside a session file without s.ResumeMarker
// (a Claude Code file that holds no conversation: ChooseArgv starts such
// a session anew), never deleting it, and returns where it went ("" when
// there was none to move): over any file of its id, the new run's `claude
// --session-id` says "Session ID ... is already in use" and exits 1
// (FACTS F13a). Without a marker nothing is moved: Codex's, Gemini's and
// opencode's files resume as they are.
func (s *Spec) SetAsideUnresumable(now time.Time) (string, error) {
	if s.ResumeMarker == "" || len(s.ArgvResume) == 0 || s.SessionFile == "" || resumable(s.SessionFile, s.ResumeMarker) {
		return "", nil
	}
	if _, err := os.Lstat(s.SessionFile); err != nil {
		return "", nil // no file: nothing in the way
	}
	return atomicfile.Quarantine(s.SessionFile, now)
}

// resumable reports whether the session file at path can be resumed: it
// exists, and holds marker when there is one.
func resumable(path, marker string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if marker == "" {
		return true
	}
	return contains(f, []byte(marker))
}

// contains reports whether r holds pat, reading it in chunks (a session
// file grows to megabytes, with lines of 40–60 KB) and stopping at the
// first match, which in a Claude Code session comes within its first
// lines.
func contains(r io.Reader, pat []byte) bool {
	buf := make([]byte, 64<<10)
	keep := 0
	for {
		n, err := r.Read(buf[keep:])
		chunk := buf[:keep+n]
		if bytes.Contains(chunk, pat) {
			return true
		}
		if err != nil {
			return false
		}
		keep = min(len(pat)-1, len(chunk))
		copy(buf, chunk[len(chunk)-keep:])
	}
}

// WriteSpec validates s and writes it to path atomically, mode 0600.
func WriteSpec(path string, s *Spec) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("write spec %s: %w", path, err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("write spec %s: %w", path, err)
	}
	if err := atomicfile.WritePrivate(path, append(b, '\n')); err != nil {
		return fmt.Errorf("write spec %s: %w", path, err)
	}
	return nil
}

// ReadSpec reads and validates a spec file. The file must be a regular file
// (not a symlink) owned by the current user with no group or other
// permissions; unknown fields are errors.
func ReadSpec(path string) (*Spec, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read spec %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read spec %s: not a regular file", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if err := specOwner(int(st.Uid), fi.Mode().Perm(), os.Getuid()); err != nil {
			return nil, fmt.Errorf("read spec %s: %w (the spec holds a control token)", path, err)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read spec %s: %w", path, err)
	}
	if len(b) > maxSpecBytes {
		return nil, fmt.Errorf("read spec %s: %w: larger than %d bytes", path, ErrCorruptSpec, maxSpecBytes)
	}
	s, err := ParseSpec(b)
	if err != nil {
		return nil, fmt.Errorf("read spec %s: %w: %w", path, ErrCorruptSpec, err)
	}
	return s, nil
}

// ReadVolumeSpec is ReadSpec for a spec a kubelet mounted from a Secret
// volume: there the file is a symlink into the volume's own data
// directory (spec.json -> ..data/spec.json, ..data -> ..<time>: the
// kubelet's atomic writer), which ReadSpec refuses ("too many levels of
// symbolic links", seen on a real node; kubetest's runc runner writes
// plain files). A path that is a symlink is resolved only if what it
// names stays in the path's own directory; ReadSpec then checks the file
// it names (regular, owner, mode). Any other path is ReadSpec's.
func ReadVolumeSpec(path string) (*Spec, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return ReadSpec(path)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("read spec %s: %w", path, err)
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("read spec %s: %w", path, err)
	}
	if rel, err := filepath.Rel(dir, target); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("read spec %s: a symlink to %s, outside its directory %s; want a file there (a Secret volume's layout)", path, target, dir)
	}
	return ReadSpec(target)
}

// ErrCorruptSpec is returned (wrapped) by ReadSpec for a spec file that
// could be read but is not a valid spec: bad JSON, a field that fails
// validation, too large. A file that is missing, not regular, or owned or
// moded wrongly is another error: its content was never looked at.
var ErrCorruptSpec = errors.New("corrupt spec file")

// QuarantineSpec moves a corrupt spec file aside to
// <path>.corrupt-<UTC time> (never deleting it: it held a token, and a
// person may want to see what became of it) and returns the new path.
// The helper reads only *.json in its spec directory, so it is not
// taken for a session's spec again.
func QuarantineSpec(path string) (string, error) {
	dst, err := atomicfile.Quarantine(path, time.Now())
	if err != nil {
		return "", fmt.Errorf("quarantine spec %s: %w", path, err)
	}
	return dst, nil
}

// ParseSpec decodes and validates spec JSON strictly.
func ParseSpec(b []byte) (*Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decode: trailing data after the JSON object")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// specOwner checks who may have written a spec file and who may read it:
// the worker's own user with mode 0600, or root with no access for others
// (a Kubernetes Secret volume: root-owned, readable by the pod's fsGroup,
// mode 0440). Any other owner could have planted it.
func specOwner(uid int, perm os.FileMode, me int) error {
	switch {
	case uid == me && perm&0o077 == 0:
		return nil
	case uid == me:
		return fmt.Errorf("mode %#o, want 0600", perm)
	case uid == 0 && perm&0o007 == 0:
		return nil
	case uid == 0:
		return fmt.Errorf("owned by root with mode %#o, want no access for others (0440 at most)", perm)
	}
	return fmt.Errorf("owned by uid %d, want %d or root", uid, me)
}
