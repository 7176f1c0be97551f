// Package atomicfile replaces Legion's files so that a crash leaves either
// the old or the new content: private state (session specs and
// registries, the daemon id, the local tracker),
// and the files Legion installs for others to read (unit files, the
// config, agent skills).
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2"
)

// Write replaces path with data, with mode perm whatever mode an older
// file had (the umask does not apply): a synced temp file in the same
// directory, renamed over path (github.com/google/renameio), then the
// directory synced, so that the rename itself survives a crash. The
// directory must exist. On failure path is untouched and no temp file is
// left.
func Write(path string, data []byte, perm os.FileMode) error {
	// The temp file goes beside path: renameio's default probes
	// os.TempDir() on every write (two temp files, a rename and an
	// unlink) and, on the same file system, writes there, where a crash
	// would leave a token-holding file in a shared directory. A crash here
	// leaves a dot file (.<base><random>) that no reader of these
	// directories takes for one of its files.
	f, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(perm), renameio.WithTempDir(filepath.Dir(path)))
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// WritePrivate is Write with mode 0600. An older file's mode is not kept
// (renameio.WriteFile would keep it): these files hold tokens, and readers
// refuse a spec that others may read.
func WritePrivate(path string, data []byte) error {
	return Write(path, data, 0o600)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// Quarantine moves a corrupt file aside to path.corrupt-<UTC time of now,
// to the nanosecond>, never deleting it, and returns the new path. The
// error is the rename's.
func Quarantine(path string, now time.Time) (string, error) {
	aside := path + ".corrupt-" + now.UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	return aside, nil
}
