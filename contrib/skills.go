// Package contrib carries what Legion ships besides its code: the skills
// that teach agents Legion's CLI (contrib/skills), embedded so that
// `legion install --skills` can write them, and the demo (contrib/demo).
package contrib

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/legion-dev/legion/internal/atomicfile"
)

//go:embed skills
var skills embed.FS

// InstallSkills writes every skill (legion-controller, legion-worker) into
// dir, usually ~/.claude/skills, one directory per skill. Only files whose
// content differs are written (atomically); it returns the paths written.
// Files in the skill directories that Legion does not ship are left alone.
func InstallSkills(dir string, dryRun bool) ([]string, error) {
	var written []string
	err := fs.WalkDir(skills, "skills", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := skills.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("skills", p)
		dst := filepath.Join(dir, rel)
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
			return nil
		}
		written = append(written, dst)
		if dryRun {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("install skill %s: %w", rel, err)
		}
		if err := atomicfile.Write(dst, data, 0o644); err != nil {
			return fmt.Errorf("install skill %s: %w", rel, err)
		}
		return nil
	})
	return written, err
}
