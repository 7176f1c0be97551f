package api

import (
	"errors"
	"os"
	"path/filepath"
)

// SocketName is the helper's socket file in $XDG_RUNTIME_DIR/legion.
const SocketName = "legion.sock"

// ErrNoRuntimeDir means XDG_RUNTIME_DIR is unset, so there is no place for
// the helper's socket.
var ErrNoRuntimeDir = errors.New("XDG_RUNTIME_DIR is not set: log in through a systemd session (or export it) so the helper's socket can be found")

// SocketPath returns $XDG_RUNTIME_DIR/legion/legion.sock, where
// legion.socket listens and where an unactivated helper listens itself.
func SocketPath() (string, error) {
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return "", ErrNoRuntimeDir
	}
	return filepath.Join(rt, "legion", SocketName), nil
}
