package activation

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/legion-dev/legion/internal/atomicfile"
	"github.com/legion-dev/legion/internal/privdir"
)

// DaemonIDFile is the name of the daemon instance id file in the state dir
// (contrib/demo removes the one it made).
const DaemonIDFile = "daemon-id"

// loadDaemonID returns the helper's persistent instance id stored at path
// (one UUID and a newline). A missing file is created; a corrupt one (not
// a UUID) is moved aside to path + ".corrupt-<UTC time>" (atomicfile.Quarantine) and replaced.
// Writes are atomic: a temp file in the same 0700 directory, fsync,
// rename, fsync of the directory. Workers started under one id are not
// adopted under another (recovery quarantines them), so the id must
// survive restarts and upgrades.
func loadDaemonID(path string, log *slog.Logger) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if id, perr := uuid.ParseBytes(bytes.TrimSpace(b)); perr == nil && len(bytes.TrimSpace(b)) == 36 {
			return id.String(), nil
		}
		aside, err := atomicfile.Quarantine(path, time.Now())
		if err != nil {
			return "", fmt.Errorf("move corrupt daemon id %s aside: %w", path, err)
		}
		log.Warn("daemon id file is corrupt; moved aside and rewritten: workers started under the old id will be quarantined",
			"file", path, "moved_to", aside)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return "", fmt.Errorf("read daemon id: %w", err)
	}
	id := uuid.New().String()
	if err := writePrivate(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("write daemon id: %w", err)
	}
	log.Info("created daemon instance id", "file", path, "daemon_id", id)
	return id, nil
}

// writePrivate replaces path with data (0600, atomically: see atomicfile)
// in a private directory (see privdir.Ensure), created if missing.
func writePrivate(path string, data []byte) error {
	if err := privdir.Ensure(filepath.Dir(path)); err != nil {
		return err
	}
	return atomicfile.WritePrivate(path, data)
}
