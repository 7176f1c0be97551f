package systemtest_test

import (
	"slices"
	"strings"
	"testing"
)

// keptByUninstall are the paths below the user's home that Legion and its
// agents may leave after `legion uninstall`, which keeps "Legion's config
// and state" (its --help): the config, the state (tracker, worktrees,
// specs, registry, transcripts, agent settings), and the agent's own files
// (Claude Code's ~/.claude and ~/.claude.json, which Legion merges its
// dialog answers into, with their lock files). Plus the workspace, where
// the work was merged.
var keptByUninstall = []string{
	".config/legion/", ".local/state/legion/",
	".claude/", ".claude.json", ".claude.json.legion-lock", ".claude.json.lock",
	"src/web/",
}

// testUninstall: after `legion uninstall` no Legion unit is loaded or
// installed, no process of Legion's runs, and every file it wrote below the
// home since before `legion install` is one of what it keeps.
func testUninstall(t *testing.T, s *sys, before []string) {
	s = s.sub(t)
	out := s.login("legion", "uninstall")
	t.Logf("legion uninstall:\n%s", out)

	// (list-unit-files fails when nothing matches.)
	if units := s.login("sh", "-c", "systemctl --user list-units --all --plain --no-legend 'legion*'; systemctl --user list-unit-files --plain --no-legend 'legion*' || true"); strings.TrimSpace(units) != "" {
		t.Errorf("units loaded or installed after uninstall:\n%s", units)
	}
	if ps := s.root("ps", "-u", user, "-o", "pid=,args="); strings.Contains(ps, "legion") {
		t.Errorf("processes of %s after uninstall:\n%s", user, ps)
	}
	// kept: p (a directory ends in "/") is within what is kept, or a
	// directory above it.
	kept := func(p string) bool {
		q := strings.TrimSuffix(p, "/")
		return slices.ContainsFunc(keptByUninstall, func(k string) bool {
			return strings.HasPrefix(q+"/", k) || q == k || strings.HasPrefix(k, q+"/")
		})
	}
	var emptyDirs []string
	for _, p := range s.homeFiles() {
		switch {
		case slices.Contains(before, p), kept(p):
		case strings.HasSuffix(p, "/"):
			emptyDirs = append(emptyDirs, "~/"+p) // a directory: checked below
		default:
			t.Errorf("after uninstall, ~/%s is left (not there before `legion install`, and not Legion's config or state)", p)
		}
	}
	// Directories left are only those made for the units (the unit dir
	// and the .wants dirs systemd's enable made): empty, so nothing that
	// systemd or a person reads.
	for _, d := range emptyDirs {
		if out := s.root("find", "/home/"+user+"/"+strings.TrimPrefix(d, "~/"), "-mindepth", "1", "-not", "-type", "d"); strings.TrimSpace(out) != "" {
			t.Errorf("after uninstall, %s holds files:\n%s", d, out)
		}
	}
	if len(emptyDirs) > 0 {
		t.Logf("empty directories left by install and uninstall: %v", emptyDirs)
	}
}

// homeFiles lists every path below the user's home, relative to it,
// directories with a trailing slash, except those below the workspace's
// .git.
func (s *sys) homeFiles() []string {
	s.t.Helper()
	out := s.root("find", "/home/"+user, "-mindepth", "1", "-not", "-path", "/home/"+user+"/src/web/.git/*",
		"(", "-type", "d", "-printf", "%P/\n", ")", "-o", "-printf", "%P\n")
	return strings.Fields(out)
}
