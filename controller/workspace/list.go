package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The controller lists a team's worktrees each tick, and it ran five or
// six git processes per worktree (its offset, git status, the default
// branch, git rev-list, git merge-tree): with 1,000 issues some 5,000
// processes a tick. List now reads the repository once (one git
// for-each-ref for every branch's commit, one git config for every
// offset) and runs one git status per worktree. How far a branch is
// ahead of the default branch and which files a merge would leave in
// conflict depend on the two commits alone, so they are kept, by the two
// commit ids, until either branch moves (a commit, a merge, a reset) or a
// List no longer needs them. Whether a worktree is dirty is asked of git
// status every time: it depends on every file in the worktree (an edit
// that is not staged touches neither the index nor a ref, nor, written in
// place, its directory), and only a walk of the worktree doing what git
// status does could tell that it has not changed.

// List returns the worktrees Legion made, sorted by issue. A directory
// under Dir that is not a usable worktree is listed with its Problem
// rather than failing the listing: one broken directory must not hide the
// others (nor stop the controller, which reports worktrees each tick).
func (m *Manager) List(ctx context.Context) ([]Worktree, error) {
	entries, err := os.ReadDir(m.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	m.mu.Lock()
	m.gen++
	gen := m.gen
	m.mu.Unlock()
	// Without the repository's branches (git failed) no worktree shows
	// Ahead or Conflicts, as before when the default branch was not known.
	r, _ := m.readRefs(ctx)
	def, _ := m.defaultBranch(ctx, r)
	offs := m.offsets(ctx)
	var out []Worktree
	for _, e := range entries {
		if !e.IsDir() || checkIssue(e.Name()) != nil {
			continue
		}
		wt, err := m.describe(ctx, e.Name(), offs[e.Name()], r, def)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			wt = Worktree{Issue: e.Name(), Path: m.Path(e.Name()), Branch: Branch(e.Name()), PortOffset: offs[e.Name()], Problem: err.Error()}
		}
		out = append(out, wt)
	}
	m.mu.Lock()
	for k, f := range m.facts {
		if f.gen < gen {
			delete(m.facts, k)
		}
	}
	m.mu.Unlock()
	return out, nil
}

// describe tells the issue's worktree as it is now, its branch compared
// with the default branch def as r read them.
func (m *Manager) describe(ctx context.Context, issue string, off int, r refs, def string) (Worktree, error) {
	wt := Worktree{Issue: issue, Path: m.Path(issue), Branch: Branch(issue), PortOffset: off}
	status, err := m.git(ctx, wt.Path, "status", "--porcelain")
	if err != nil {
		return Worktree{}, fmt.Errorf("worktree of %s at %s is not usable; "+
			"`git -C %s worktree repair %s` mends one whose repository moved, "+
			"else move it away (keep what you need of it) and run `git -C %s worktree prune`, "+
			"and the next dispatch adds it again from %s: %w",
			issue, wt.Path, m.Repo, wt.Path, m.Repo, wt.Branch, err)
	}
	wt.Dirty = status != ""
	wt.Ahead, wt.Conflicts = m.compare(ctx, r.heads[def], r.heads[wt.Branch])
	return wt, nil
}

// refs is one reading of the repository's branches.
type refs struct {
	heads      map[string]string // commit id by branch name
	originHead string            // the branch origin/HEAD names, if any
}

// readRefs reads every branch's commit and origin's HEAD with one git
// for-each-ref.
func (m *Manager) readRefs(ctx context.Context) (refs, error) {
	out, err := m.git(ctx, m.Repo, "for-each-ref", "--format=%(refname) %(objectname) %(symref)", "refs/heads", "refs/remotes/origin/HEAD")
	if err != nil {
		return refs{}, err
	}
	r := refs{heads: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) < 2:
		case f[0] == "refs/remotes/origin/HEAD":
			if len(f) == 3 {
				r.originHead = strings.TrimPrefix(f[2], "refs/remotes/origin/")
			}
		default:
			if b, ok := strings.CutPrefix(f[0], "refs/heads/"); ok {
				r.heads[b] = f[1]
			}
		}
	}
	return r, nil
}

// DefaultBranch is the branch the main workspace merges into: origin's HEAD
// when there is one, else init.defaultBranch-style names that exist, else
// the checked-out branch.
func (m *Manager) DefaultBranch(ctx context.Context) (string, error) {
	r, err := m.readRefs(ctx)
	if err != nil {
		return "", fmt.Errorf("default branch of %s: %w", m.Repo, err)
	}
	return m.defaultBranch(ctx, r)
}

// defaultBranch is DefaultBranch from r.
func (m *Manager) defaultBranch(ctx context.Context, r refs) (string, error) {
	if r.originHead != "" {
		return r.originHead, nil
	}
	for _, b := range []string{"main", "master", "trunk"} {
		if _, ok := r.heads[b]; ok {
			return b, nil
		}
	}
	cur, err := m.git(ctx, m.Repo, "symbolic-ref", "--short", "HEAD")
	if err != nil {
		return "", fmt.Errorf("default branch of %s: %w", m.Repo, err)
	}
	return cur, nil
}

// mergeFacts are what merging a commit into a base commit would meet.
type mergeFacts struct {
	ahead     int      // commits not in the base
	conflicts []string // files a merge would leave in conflict
	gen       uint64   // the last List that used them
}

// compare returns how many commits tip has that base has not, and the
// files a merge of tip into base would leave in conflict (git merge-tree,
// nothing touched); nothing when either is not known. It asks git only
// for a pair of commits it has not answered before.
func (m *Manager) compare(ctx context.Context, base, tip string) (ahead int, conflicts []string) {
	if base == "" || tip == "" {
		return 0, nil
	}
	key := [2]string{base, tip}
	m.mu.Lock()
	f, ok := m.facts[key]
	if ok {
		f.gen = m.gen
		m.facts[key] = f
	}
	m.mu.Unlock()
	if ok {
		return f.ahead, slices.Clone(f.conflicts)
	}
	n, err := m.git(ctx, m.Repo, "rev-list", "--count", base+".."+tip)
	if err == nil {
		ahead, err = strconv.Atoi(n)
	}
	_, conflicts, terr := m.mergeTree(ctx, base, tip)
	if err != nil || terr != nil {
		return ahead, conflicts
	}
	m.mu.Lock()
	if m.facts == nil {
		m.facts = map[[2]string]mergeFacts{}
	}
	m.facts[key] = mergeFacts{ahead: ahead, conflicts: conflicts, gen: m.gen}
	m.mu.Unlock()
	return ahead, slices.Clone(conflicts)
}
