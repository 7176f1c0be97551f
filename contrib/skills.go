// Package contrib carries what Legion ships besides its code: the skills
// that teach agents run by hand Legion's CLI, generated from the
// instructions Legion gives its own agents (controller/instructions), for
// `legion install --skills`; and the demo (contrib/demo, linked only by a
// legion built with the demo tag).
package contrib

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/legion-dev/legion/controller/instructions"
	"github.com/legion-dev/legion/internal/atomicfile"
)

// InstallSkills writes every skill (legion-controller, legion-worker) into
// dir, usually ~/.claude/skills, one directory per skill. Only files whose
// content differs are written (atomically); it returns the paths written.
// Files in the skill directories that Legion does not ship are left alone.
func InstallSkills(dir string, dryRun bool) ([]string, error) {
	files, err := instructions.Skills()
	if err != nil {
		return nil, fmt.Errorf("install skills: %w", err)
	}
	var names []string
	for rel := range files {
		names = append(names, rel)
	}
	slices.Sort(names)
	var written []string
	for _, rel := range names {
		data := files[rel]
		dst := filepath.Join(dir, rel)
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
			continue
		}
		written = append(written, dst)
		if dryRun {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return written, fmt.Errorf("install skill %s: %w", rel, err)
		}
		if err := atomicfile.Write(dst, data, 0o644); err != nil {
			return written, fmt.Errorf("install skill %s: %w", rel, err)
		}
	}
	return written, nil
}
