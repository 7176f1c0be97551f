package api

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Check reports a sandbox whose paths are not absolute and clean, or that
// hides a path below one it makes writable (which Landlock cannot do): the worker refuses such a spec, and
// package confine enforces a checked one.
func (s *Sandbox) Check() error {
	for _, l := range []struct {
		name  string
		paths []string
	}{{"write", s.Write}, {"make_dirs", s.MakeDirs}, {"read", s.Read}, {"hide", s.Hide}, {"connect", s.Connect}} {
		for _, p := range l.paths {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				return fmt.Errorf("sandbox %s: %q is not a clean absolute path", l.name, p)
			}
		}
	}
	for _, h := range s.Hide {
		for _, w := range s.Write {
			if h == w || w == "/" || strings.HasPrefix(h, w+"/") {
				return fmt.Errorf("sandbox: %s is to be hidden but is below the writable %s", h, w)
			}
		}
	}
	for _, d := range s.MakeDirs {
		if !slices.Contains(s.Write, d) {
			return fmt.Errorf("sandbox make_dirs: %s is not in write", d)
		}
	}
	return nil
}
