package docs

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// File is one generated file: its path relative to the output directory,
// slash-separated ("man1/legion.1", "bash/legion"), and its bytes.
type File struct {
	Path string
	Data []byte
}

// WriteTree writes files below dir, creating directories 0755 and files
// 0644 (they are documentation, installed world-readable). It refuses
// paths that are absolute or leave dir. Existing files are replaced;
// other files in dir are left alone.
func WriteTree(dir string, files []File) error {
	for _, f := range files {
		clean := path.Clean(f.Path)
		if f.Path == "" || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("write %q: want a relative path inside %s", f.Path, dir)
		}
		dst := filepath.Join(dir, filepath.FromSlash(clean))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", dst, err)
		}
		if err := os.WriteFile(dst, f.Data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", dst, err)
		}
		// WriteFile keeps the mode of a file that existed; the umask may
		// have narrowed a new one.
		if err := os.Chmod(dst, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", dst, err)
		}
	}
	return nil
}
