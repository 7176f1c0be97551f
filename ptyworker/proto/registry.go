package proto

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/internal/privdir"
)

// RegistryVersion is the version of registry files this package writes.
const RegistryVersion = 1

// ErrCorruptRegistry is returned (wrapped) by ReadRegistry for a file that
// is not a registry entry: bad JSON, a missing session ID, another version.
var ErrCorruptRegistry = errors.New("corrupt registry file")

// Registry is the per-session registry file: what the helper's recovery
// reads to find and check a worker without talking to it. It is written
// atomically (temp file + rename), 0600, in a 0700 directory.
type Registry struct {
	Version          int    `json:"version"`
	SessionID        string `json:"session_id"`
	AgentSession     string `json:"agent_session,omitempty"` // Spec.AgentSession
	Name             string `json:"name"`
	Team             string `json:"team"`
	Issue            string `json:"issue,omitempty"`
	Mode             string `json:"mode,omitempty"`
	Role             string `json:"role,omitempty"`
	Unit             string `json:"unit,omitempty"`
	DaemonInstanceID string `json:"daemon_instance_id"`
	Token            string `json:"token"`

	WorkerPID      int    `json:"worker_pid"`
	ChildPID       int    `json:"child_pid,omitempty"`
	SocketPath     string `json:"socket_path"`
	TranscriptPath string `json:"transcript_path"`
	Owner          Lease  `json:"owner"` // the worker process that wrote this

	State     string    `json:"state"` // StateStarting, StateRunning, ...
	Run       int       `json:"run"`   // 1 for the first start, +1 per restart
	ArgvKind  string    `json:"argv_kind,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at"`
	LastExit  *ExitInfo `json:"last_exit,omitempty"`
}

// AgentSessionID is Spec.AgentSessionID of the entry's session.
func (r *Registry) AgentSessionID() string {
	if r.AgentSession != "" {
		return r.AgentSession
	}
	return r.SessionID
}

// Lease identifies a process beyond its PID: PID plus the process start
// time from /proc/<pid>/stat (clock ticks since boot) plus a random nonce
// per process, and the boot it ran in. A lease is alive while a process
// with that PID and start time exists in that boot; a reused PID has
// another start time, and a PID and start time of an earlier boot name
// another process.
type Lease struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Nonce     string `json:"nonce"`
	// BootID is the kernel's boot ID when the lease was taken (see
	// BootID); empty in entries of workers older than this field, and
	// when it could not be read.
	BootID string `json:"boot_id,omitempty"`
}

// NewLease returns the lease of process pid with a fresh nonce, in this
// boot.
func NewLease(pid int) (Lease, error) {
	st, err := ProcStartTime(pid)
	if err != nil {
		return Lease{}, err
	}
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return Lease{}, fmt.Errorf("lease nonce: %w", err)
	}
	// A machine without the boot ID (no /proc/sys) still gets a lease:
	// only the reboot rules of the helper's recovery need it.
	boot, _ := BootID()
	return Lease{PID: pid, StartTime: st, Nonce: hex.EncodeToString(n[:]), BootID: boot}, nil
}

// Alive reports whether the leased process still exists.
func (l Lease) Alive() bool {
	if l.PID <= 0 {
		return false
	}
	if l.BootID != "" {
		if boot, err := BootID(); err == nil && boot != l.BootID {
			return false
		}
	}
	st, err := ProcStartTime(l.PID)
	return err == nil && st == l.StartTime
}

// bootIDFile is where Linux gives the ID of the running boot: a random
// UUID drawn once per boot (random(4)); systemd's journal and
// `journalctl --list-boots` use the same ID.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// BootID returns the ID of the running boot (36 characters, a UUID).
func BootID() (string, error) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("boot id: %s is empty", bootIDFile)
	}
	return id, nil
}

// ProcStartTime reads a process's start time (field 22 of /proc/<pid>/stat,
// in clock ticks since boot).
func ProcStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("process %d start time: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold anything,
	// so split after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("process %d start time: malformed /proc/%d/stat", pid, pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	const startTimeField = 22 - 3 // fields after ')' start at field 3 (state)
	if len(fields) <= startTimeField {
		return 0, fmt.Errorf("process %d start time: short /proc/%d/stat", pid, pid)
	}
	v, err := strconv.ParseUint(fields[startTimeField], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("process %d start time: %w", pid, err)
	}
	return v, nil
}

// WriteRegistry writes r to path atomically with mode 0600, creating the
// directory (0700) if needed.
func WriteRegistry(path string, r *Registry) error {
	if err := privdir.Ensure(DirOf(path)); err != nil {
		return fmt.Errorf("write registry %s: %w", path, err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("write registry %s: %w", path, err)
	}
	if err := atomicfile.WritePrivate(path, append(b, '\n')); err != nil {
		return fmt.Errorf("write registry %s: %w", path, err)
	}
	return nil
}

// ReadRegistry reads a registry file. A file that does not decode, lacks a
// session ID or has another version wraps ErrCorruptRegistry. Unknown
// fields are allowed (a newer worker may add some).
func ReadRegistry(path string) (*Registry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read registry: %w", err)
	}
	var r Registry
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read registry %s: %w: %v", path, ErrCorruptRegistry, err)
	}
	if r.Version != RegistryVersion {
		return nil, fmt.Errorf("read registry %s: %w: version %d, want %d", path, ErrCorruptRegistry, r.Version, RegistryVersion)
	}
	if r.SessionID == "" {
		return nil, fmt.Errorf("read registry %s: %w: no session_id", path, ErrCorruptRegistry)
	}
	return &r, nil
}

// QuarantineRegistry moves a bad registry file aside to
// <path>.corrupt-<UTC time> (never deleting it) and returns the new path.
func QuarantineRegistry(path string) (string, error) {
	dst, err := atomicfile.Quarantine(path, time.Now())
	if err != nil {
		return "", fmt.Errorf("quarantine registry %s: %w", path, err)
	}
	return dst, nil
}

// LoadRegistry reads the registry at path: (nil, "", nil) when there is
// none; a corrupt file is quarantined and reported by its new path.
func LoadRegistry(path string) (r *Registry, quarantined string, err error) {
	r, err = ReadRegistry(path)
	switch {
	case err == nil:
		return r, "", nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", nil
	case errors.Is(err, ErrCorruptRegistry):
		q, qerr := QuarantineRegistry(path)
		if qerr != nil {
			return nil, "", errors.Join(err, qerr)
		}
		return nil, q, nil
	default:
		return nil, "", err
	}
}

func DirOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}
