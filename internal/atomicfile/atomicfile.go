// Package atomicfile replaces Legion's private state files (session specs
// and registries, the daemon id, the helper's tmux views) so that a crash
// leaves either the old or the new content, readable by this user only.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// WritePrivate replaces path with data, mode 0600 whatever mode an older
// file had: a synced temp file in the same directory, renamed over path
// (github.com/google/renameio), then the directory synced, so that the
// rename itself survives a crash. The directory must exist.
//
// An older file's mode is not kept (renameio.WriteFile would keep it):
// these files hold tokens, and readers refuse a spec that others may read.
func WritePrivate(path string, data []byte) error {
	f, err := renameio.NewPendingFile(path, renameio.WithStaticPermissions(0o600))
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
