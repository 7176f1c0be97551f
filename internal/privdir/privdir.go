// Package privdir makes the directories that hold Legion's sockets, tokens
// and session state private to the user.
package privdir

import (
	"fmt"
	"os"
	"syscall"
)

// Ensure creates dir (and missing parents) with mode 0700, then checks the
// directory itself: it must be a real directory (not a symlink, which
// could be pointed elsewhere between this check and its use) owned by this
// user. A wider mode is tightened to 0700. Parents are taken as they are,
// so $XDG_RUNTIME_DIR or ~/.local/state may themselves be links.
func Ensure(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("directory %s is a symlink; Legion keeps sockets and tokens only in a real directory (remove the link, or point Legion at its target)", dir)
	case !fi.IsDir():
		return fmt.Errorf("create directory %s: not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("directory %s belongs to uid %d, not to this user (uid %d): refusing to use it", dir, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("directory %s: set mode 0700: %w", dir, err)
		}
	}
	return nil
}
