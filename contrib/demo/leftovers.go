package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/legion-dev/legion/activation"
	"github.com/legion-dev/legion/agent/claude/claudecode"
)

// leftovers is what a demo on the user's own manager writes into the
// user's directories besides its team's tracker and worktrees: the
// helper's spec, registry and transcript files of the demo's sessions
// (specs hold worker tokens), the helper's daemon id, and the scripted
// agent's session files under ~/.claude/projects. It records, before the
// demo's units run, which of those files and directories exist, so that
// cleanup removes the demo's files and only the directories (and the
// daemon id) the demo made; every other session's files stay.
type leftovers struct {
	state   string          // $XDG_STATE_HOME/legion
	home    string          // the workers' HOME
	existed map[string]bool // path → it existed before the demo
}

// stateSubdirs are the directories below the state dir the demo's helper,
// workers and tracker may create, deepest first.
var stateSubdirs = []string{"registry/pruned", "registry/quarantine", "registry", "specs", "transcripts", "teams", "worktrees"}

// recordLeftovers notes what exists before the demo writes anything.
func recordLeftovers(state, home string) *leftovers {
	l := &leftovers{state: state, home: home, existed: map[string]bool{}}
	for _, p := range l.owned() {
		_, err := os.Lstat(p)
		l.existed[p] = err == nil
	}
	return l
}

// owned lists the directories and the daemon id the demo may create,
// each before its parent.
func (l *leftovers) owned() []string {
	var ps []string
	for _, sub := range stateSubdirs {
		ps = append(ps, filepath.Join(l.state, filepath.FromSlash(sub)))
	}
	ps = append(ps, filepath.Join(l.state, activation.DaemonIDFile), l.state)
	if l.home != "" {
		ps = append(ps, filepath.Join(l.home, ".claude", "projects"), filepath.Join(l.home, ".claude"))
	}
	return ps
}

// remove deletes the files of the sessions of team (a name no one else
// uses: demo-<random>), the Claude project directories of its worktrees
// (worktreeDir/<issue> for each of issues: directories named after the
// demo's fresh worktree paths), then what recordLeftovers found missing,
// when empty. Call it once the team's units have stopped.
func (l *leftovers) remove(team, worktreeDir string, issues []string) error {
	var errs []error
	var ids []string
	for _, sub := range []string{"registry", "registry/pruned", "registry/quarantine", "specs"} {
		dir := filepath.Join(l.state, filepath.FromSlash(sub))
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("demo: clean up %s: %w", dir, err))
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			p := filepath.Join(dir, e.Name())
			id, ok := sessionOf(p, team)
			if !ok {
				continue
			}
			if err := os.Remove(p); err != nil {
				errs = append(errs, fmt.Errorf("demo: clean up: %w", err))
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		p := filepath.Join(l.state, "transcripts", id+".log")
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("demo: clean up: %w", err))
		}
	}
	if l.home != "" {
		// The agents' cwd as they saw it: physical, as Claude Code's.
		dirs := []string{worktreeDir}
		if phys, err := physical(worktreeDir); err == nil && phys != worktreeDir {
			dirs = append(dirs, phys)
		}
		for _, dir := range dirs {
			for _, issue := range issues {
				if err := os.RemoveAll(claudecode.ProjectDir(l.home, filepath.Join(dir, issue))); err != nil {
					errs = append(errs, fmt.Errorf("demo: clean up: %w", err))
				}
			}
		}
	}
	for _, p := range l.owned() {
		if l.existed[p] {
			continue
		}
		err := os.Remove(p) // a directory only when empty: someone else's files stay
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			errs = append(errs, fmt.Errorf("demo: clean up: %w", err))
		}
	}
	return errors.Join(errs...)
}

// sessionOf reads a registry or spec file and returns its session id when
// it belongs to team.
func sessionOf(path, team string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	var f struct {
		SessionID string `json:"session_id"`
		Team      string `json:"team"`
	}
	if json.Unmarshal(data, &f) != nil || f.Team != team || f.SessionID == "" || strings.ContainsAny(f.SessionID, `/\`) {
		return "", false
	}
	return f.SessionID, true
}

// physical resolves the symlinks of dir's longest existing ancestor (the
// worktrees are gone by cleanup) and joins the rest.
func physical(dir string) (string, error) {
	rest := ""
	for p := dir; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest), nil
		}
		if filepath.Dir(p) == p {
			return "", fmt.Errorf("resolve %s: no ancestor exists", dir)
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}
