// Package workspace gives every issue its own git worktree on its own branch,
// legion/<issue>, with a port offset that parallel agents use to keep their
// dev servers apart, shows an issue's branch against the default branch
// with the conflicts a merge would leave (Diff: git merge-tree, nothing
// touched), and merges finished work back into the default branch (the
// merges into one repository take turns, and a git lock a killed git left
// behind is moved aside: mergelock.go; adding a worktree takes the
// same turn). List, which the controller runs each tick, reads the
// repository once and runs one git status per worktree: what a branch
// has against the default branch is kept until either moves, but whether
// a worktree is dirty is asked of git status every time, since only
// every file in it can tell (list.go). For a
// team on a cluster it also makes and refreshes the clone of the team's
// repository on an issue's volume (Clone) and publishes a finished
// issue's merge to origin (MergeAndPublish): the one repository whose
// default branch it moves is the clone it made.
//
// It runs the real git binary with argv (never a shell) and never touches a
// worktree or branch it did not create: only branches under legion/ and
// worktrees under its own directory.
package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
)

// BranchPrefix starts every branch Legion creates.
const BranchPrefix = "legion/"

// PortStep is the distance between two issues' port offsets: issue slot n
// gets LEGION_PORT_OFFSET = n*PortStep.
const PortStep = 10

// Manager manages the worktrees of one team's repository.
type Manager struct {
	Repo string // the team's workspace: a git repository
	Dir  string // where worktrees live, one sub-directory per issue

	mu    sync.Mutex
	facts map[[2]string]mergeFacts // by default branch's and branch's commits: list.go
	gen   uint64                   // List's count, to drop facts it no longer uses

	gitRuns atomic.Int64 // git processes run, for tests and benchmarks
}

// Worktree is one issue's worktree.
type Worktree struct {
	Issue      string `json:"issue"`
	Path       string `json:"path"`
	Branch     string `json:"branch"`
	PortOffset int    `json:"port_offset"`
	Dirty      bool   `json:"dirty"` // uncommitted changes
	Ahead      int    `json:"ahead"` // commits not in the default branch
	// Conflicts are the files that would conflict if the branch were merged
	// into the default branch now (git merge-tree, nothing is touched).
	Conflicts []string `json:"conflicts,omitempty"`
	// Problem, set by List, says why the directory is not a usable
	// worktree (not one at all, or its .git file points nowhere) and what
	// to do; PortOffset is then the stored one, and Dirty, Ahead and
	// Conflicts are not known.
	Problem string `json:"problem,omitempty"`
}

// MergeResult says how a finish went.
type MergeResult struct {
	Merged    bool     `json:"merged"`
	Conflicts []string `json:"conflicts,omitempty"` // files in conflict, when not merged
}

// ErrConflict is returned (wrapped) by Finish when the merge conflicts; the
// merge is aborted and the worktree and branch are kept.
var ErrConflict = errors.New("merge conflict")

// Branch is the branch of an issue.
func Branch(issue string) string { return BranchPrefix + issue }

// checkIssue refuses identifiers that would not make a safe path element or
// branch name.
func checkIssue(issue string) error {
	if issue == "" || issue == "." || issue == ".." || strings.ContainsAny(issue, "/\\~^:?*[") ||
		strings.ContainsFunc(issue, unicode.IsSpace) || strings.HasPrefix(issue, "-") || strings.Contains(issue, "..") {
		return fmt.Errorf("issue %q: want an identifier like DEMO-1 (no spaces, slashes or git ref punctuation)", issue)
	}
	return nil
}

// Path is where the worktree of issue lives.
func (m *Manager) Path(issue string) string { return filepath.Join(m.Dir, issue) }

// Ensure returns the issue's worktree, creating it (and its branch, from the
// default branch) when missing. Calling it again returns the same worktree.
// Creating one takes the repository's lock (mergelock.go): it writes the
// repository's config.
func (m *Manager) Ensure(ctx context.Context, issue string) (Worktree, error) {
	if err := checkIssue(issue); err != nil {
		return Worktree{}, err
	}
	off, ok := m.offsets(ctx)[issue]
	if _, err := os.Stat(filepath.Join(m.Path(issue), ".git")); err != nil || !ok {
		err := m.withRepoLock(ctx, []string{"config.lock"}, func() error {
			var err error
			off, err = m.add(ctx, issue)
			return err
		})
		if err != nil {
			return Worktree{}, err
		}
	}
	// As in List, a worktree whose default branch is not known has no
	// Ahead or Conflicts.
	r, _ := m.readRefs(ctx)
	def, _ := m.defaultBranch(ctx, r)
	return m.describe(ctx, issue, off, r, def)
}

// add creates what the issue is missing of its worktree and its port
// offset, under the repository's lock, and returns the offset.
func (m *Manager) add(ctx context.Context, issue string) (int, error) {
	path, branch := m.Path(issue), Branch(issue)
	if _, err := os.Stat(filepath.Join(path, ".git")); err != nil {
		if err := os.MkdirAll(m.Dir, 0o700); err != nil {
			return 0, fmt.Errorf("worktree for %s: %w", issue, err)
		}
		args := []string{"worktree", "add", path, branch}
		if !m.branchExists(ctx, branch) {
			def, err := m.DefaultBranch(ctx)
			if err != nil {
				return 0, err
			}
			args = []string{"worktree", "add", "-b", branch, path, def}
		}
		_, err := m.git(ctx, m.Repo, args...)
		if err != nil && !exists(path) {
			// Its directory gone while git still lists it (a removal cut
			// short): git refuses the path as "a missing but already
			// registered worktree". Pruning forgets only worktrees whose
			// directories are gone; the branch and its commits stay.
			if _, perr := m.git(ctx, m.Repo, "worktree", "prune"); perr == nil {
				_, err = m.git(ctx, m.Repo, args...)
			}
		}
		if err != nil {
			return 0, fmt.Errorf("worktree for %s: %w", issue, err)
		}
	}
	return m.portOffset(ctx, issue)
}

// exists reports whether path exists (an error other than "not there"
// counts as there: nothing is pruned on a guess).
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// Env is the environment an agent in wt gets on top of its own.
func (wt Worktree) Env() []string {
	return []string{"LEGION_PORT_OFFSET=" + strconv.Itoa(wt.PortOffset), "LEGION_BRANCH=" + wt.Branch}
}

// Finish merges the issue's branch into the default branch of the main
// workspace (Merge), then removes the worktree and the branch. On conflict
// the merge is aborted, nothing is removed, and the error wraps
// ErrConflict with the files.
func (m *Manager) Finish(ctx context.Context, issue string) (MergeResult, error) {
	res, err := m.Merge(ctx, issue)
	if err != nil {
		return res, err
	}
	if err := m.Remove(ctx, issue); err != nil {
		return res, err
	}
	return res, nil
}

// Merge merges the issue's branch into the default branch of the main
// workspace (which must have the default branch checked out and be
// clean); with no branch left (merged and removed before) there is
// nothing to merge. On conflict the merge is aborted and the error wraps
// ErrConflict with the files.
func (m *Manager) Merge(ctx context.Context, issue string) (MergeResult, error) {
	if err := checkIssue(issue); err != nil {
		return MergeResult{}, err
	}
	branch := Branch(issue)
	def, err := m.DefaultBranch(ctx)
	if err != nil {
		return MergeResult{}, err
	}
	cur, err := m.git(ctx, m.Repo, "symbolic-ref", "--short", "HEAD")
	if err != nil || cur != def {
		return MergeResult{}, fmt.Errorf("finish %s: %s must have %s checked out to merge into it (has %q)", issue, m.Repo, def, cur)
	}
	var res MergeResult
	err = m.withMergeLock(ctx, def, func() error {
		var err error
		res, err = m.merge(ctx, issue, branch, def)
		return err
	})
	if err != nil {
		return res, err
	}
	return MergeResult{Merged: true}, nil
}

// merge is Merge's git merge, under the repository's merge lock.
func (m *Manager) merge(ctx context.Context, issue, branch, def string) (MergeResult, error) {
	if m.branchExists(ctx, branch) {
		msg := fmt.Sprintf("Merge %s (%s)", branch, issue)
		if _, err := m.git(ctx, m.Repo, "merge", "--no-ff", "--no-edit", "-m", msg, branch); err != nil {
			files, _ := m.git(ctx, m.Repo, "diff", "--name-only", "--diff-filter=U")
			// Abort only a merge that started (a conflict); a merge refused
			// up front (no identity, dirty tree) left nothing to abort.
			if _, merging := m.git(ctx, m.Repo, "rev-parse", "-q", "--verify", "MERGE_HEAD"); merging == nil {
				if _, aerr := m.git(ctx, m.Repo, "merge", "--abort"); aerr != nil {
					err = errors.Join(err, aerr)
				}
			}
			conflicts := strings.Fields(files)
			if len(conflicts) == 0 {
				return MergeResult{}, fmt.Errorf("finish %s: merge %s into %s: %w", issue, branch, def, err)
			}
			return MergeResult{Conflicts: conflicts}, fmt.Errorf("finish %s: merge %s into %s: %w in %s", issue, branch, def, ErrConflict, strings.Join(conflicts, ", "))
		}
	}
	return MergeResult{Merged: true}, nil
}

// Push pushes the issue's branch to the remote url (a branch of the same
// name there), with env added to git's environment (how it
// authenticates) and no credential helper of the user's: what env gives is
// all git uses, and nothing is stored. The worktree must be clean: what
// is not committed would not be in what others review.
func (m *Manager) Push(ctx context.Context, issue, url string, env []string) error {
	if err := checkIssue(issue); err != nil {
		return err
	}
	branch := Branch(issue)
	if !m.branchExists(ctx, branch) {
		return fmt.Errorf("push %s: there is no branch %s in %s", issue, branch, m.Repo)
	}
	if status, err := m.git(ctx, m.Path(issue), "status", "--porcelain"); err == nil && status != "" {
		return fmt.Errorf("push %s: the worktree %s has uncommitted changes: commit them (git add -A, git commit) and run it again:\n%s", issue, m.Path(issue), status)
	}
	ref := "refs/heads/" + branch
	args := []string{"-c", "credential.helper=", "push", "--porcelain", url, ref + ":" + ref}
	if _, err := m.gitEnv(ctx, m.Repo, env, args...); err != nil {
		return fmt.Errorf("push %s: %w", issue, err)
	}
	return nil
}

// Remove deletes the issue's worktree and branch (merged or not), under
// the repository's lock (mergelock.go): git branch -D writes the
// repository's config, and git reads every worktree's record, which
// Ensure may be writing.
func (m *Manager) Remove(ctx context.Context, issue string) error {
	if err := checkIssue(issue); err != nil {
		return err
	}
	return m.withRepoLock(ctx, []string{"config.lock"}, func() error { return m.remove(ctx, issue) })
}

// remove is Remove under the repository's lock.
func (m *Manager) remove(ctx context.Context, issue string) error {
	path := m.Path(issue)
	if _, err := os.Stat(path); err == nil {
		if _, err := m.git(ctx, m.Repo, "worktree", "remove", "--force", path); err != nil {
			return fmt.Errorf("remove worktree of %s: %w", issue, err)
		}
	}
	if m.branchExists(ctx, Branch(issue)) {
		if _, err := m.git(ctx, m.Repo, "branch", "-D", Branch(issue)); err != nil {
			return fmt.Errorf("remove branch of %s: %w", issue, err)
		}
	}
	return nil
}

// portOffset returns the issue's offset, giving it the lowest free slot the
// first time. The slot is kept in the repository's config under the branch
// (branch.legion/<issue>.legionPortOffset), so it goes with the branch.
// Its caller holds the repository's lock: the slots read are still free
// when it writes.
func (m *Manager) portOffset(ctx context.Context, issue string) (int, error) {
	offs := m.offsets(ctx)
	if off, ok := offs[issue]; ok {
		return off, nil
	}
	used := slices.Collect(maps.Values(offs))
	off := PortStep
	for slices.Contains(used, off) {
		off += PortStep
	}
	if _, err := m.git(ctx, m.Repo, "config", "branch."+Branch(issue)+".legionPortOffset", strconv.Itoa(off)); err != nil {
		return 0, fmt.Errorf("port offset of %s: %w", issue, err)
	}
	return off, nil
}

// offsets reads the port offsets of all the repository's issues at once
// (one git config), by issue. None is read when git cannot: an issue
// without one then gets one from Ensure.
func (m *Manager) offsets(ctx context.Context) map[string]int {
	out, _ := m.git(ctx, m.Repo, "config", "--get-regexp", `^branch\.legion/.*\.legionportoffset$`)
	offs := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		key, v, ok := strings.Cut(line, " ")
		issue := strings.TrimSuffix(strings.TrimPrefix(key, "branch."+BranchPrefix), ".legionportoffset")
		if n, err := strconv.Atoi(v); ok && err == nil && issue != key {
			offs[issue] = n
		}
	}
	return offs
}

// mergeTree runs git merge-tree --write-tree (git 2.38 or later), which
// merges branch into base writing only objects, never a working tree,
// index or ref, and returns the tree it wrote and the files left in
// conflict. Exit status 1 means conflicts; the output is the tree id,
// then one conflicted path a line (--name-only).
func (m *Manager) mergeTree(ctx context.Context, base, branch string) (tree string, files []string, err error) {
	out, err := m.git(ctx, m.Repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", base, branch)
	lines := strings.Split(out, "\n")
	if err == nil {
		return strings.TrimSpace(lines[0]), nil, nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		return "", nil, err
	}
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(files, l) {
			files = append(files, l)
		}
	}
	return strings.TrimSpace(lines[0]), files, nil
}

func (m *Manager) branchExists(ctx context.Context, b string) bool {
	_, err := m.git(ctx, m.Repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+b)
	return err == nil
}

// git runs git in dir and returns its trimmed stdout; the error carries
// git's stderr. Git does not look for a repository above Dir
// (GIT_CEILING_DIRECTORIES): a directory under Dir that is not a worktree
// is not taken for part of a repository around it (a home directory kept
// in git, say). It takes no optional lock (GIT_OPTIONAL_LOCKS=0): the
// controller looks at worktrees while their agents work in them, and a
// `git status` that refreshed the index would hold index.lock just when
// the agent's `git add` needs it ("Unable to create .../index.lock: File
// exists").
func (m *Manager) git(ctx context.Context, dir string, args ...string) (string, error) {
	return m.gitEnv(ctx, dir, nil, args...)
}

// gitEnv is git with env added to its environment.
func (m *Manager) gitEnv(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	m.gitRuns.Add(1)
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_CEILING_DIRECTORIES="+m.Dir, "GIT_OPTIONAL_LOCKS=0")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return strings.TrimSpace(stdout.String()), fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(stdout.String()), fmt.Errorf("git %s: %s: %w", strings.Join(args, " "), msg, err)
	}
	return strings.TrimSpace(stdout.String()), nil
}
