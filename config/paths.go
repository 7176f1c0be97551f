package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNoRuntimeDir is returned by RuntimeDir when XDG_RUNTIME_DIR is unset:
// Legion's sockets live there, and without a login session (or lingering)
// there is no such directory.
var ErrNoRuntimeDir = errors.New("XDG_RUNTIME_DIR is not set: log in through a systemd session (or `loginctl enable-linger $USER`) so /run/user/$UID exists")

// StateDir is $XDG_STATE_HOME/legion (~/.local/state/legion by default):
// durable state such as the daemon id, registry, transcripts, trackers and
// worktrees.
func StateDir() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the state dir: XDG_STATE_HOME is unset and %w", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "legion"), nil
}

// RuntimeDir is $XDG_RUNTIME_DIR/legion: sockets (dirs 0700, sockets 0600).
func RuntimeDir() (string, error) {
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		return "", ErrNoRuntimeDir
	}
	return filepath.Join(dir, "legion"), nil
}
