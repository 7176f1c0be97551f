package workspace

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// ErrNoBranch is returned (wrapped) by Diff when the issue has no branch:
// no worktree was ever made for it, or it was finished and removed.
var ErrNoBranch = errors.New("no branch")

// ErrBadIssue is returned (wrapped) by Diff for an identifier that
// cannot name a branch (see Branch); the message says what is wrong.
var ErrBadIssue = errors.New("bad issue identifier")

// badIssueError is checkIssue's error, matching ErrBadIssue.
type badIssueError struct{ error }

func (badIssueError) Is(target error) bool { return target == ErrBadIssue }

// MaxDiffBytes bounds the patch Diff returns; a longer one is cut there
// (Diff.Truncated) so that a page showing it stays usable.
const MaxDiffBytes = 1 << 20

// maxConflictText bounds each conflicted file's text with markers.
const maxConflictText = 64 << 10

// mergeTreeMinor is the first git 2.x whose merge-tree has --write-tree.
const mergeTreeMinor = 38

// Diff is an issue's branch against the default branch, as a person
// reviewing it wants to see it: what the branch changed since it forked
// (git diff base...branch), and what a merge into the default branch now
// would leave in conflict.
type Diff struct {
	Issue  string `json:"issue"`
	Branch string `json:"branch"` // legion/<issue>
	Base   string `json:"base"`   // the default branch
	Ahead  int    `json:"ahead"`  // commits on the branch not in Base
	Behind int    `json:"behind"` // commits in Base not on the branch
	// Dirty: the worktree has uncommitted changes, which the patch does
	// not show (they are the agent's work in progress).
	Dirty     bool   `json:"dirty"`
	Patch     string `json:"patch"` // unified diff of Base...Branch
	Truncated bool   `json:"truncated,omitempty"`
	// Conflicts are the files a merge of Branch into Base would leave in
	// conflict, each with its text as the merge would leave it (conflict
	// markers in place). Computed with git merge-tree --write-tree, which
	// writes only objects: no worktree, index or ref is touched.
	Conflicts []Conflict `json:"conflicts"`
	// ConflictsUnknown, when set, says why Conflicts could not be computed
	// (git older than 2.38) and what to do.
	ConflictsUnknown string `json:"conflicts_unknown,omitempty"`
}

// Conflict is one file a merge would leave in conflict.
type Conflict struct {
	Path string `json:"path"`
	// Text is the file as the merge would leave it, with git's conflict
	// markers; empty when it is not a text conflict (a file deleted on
	// one side, say) or longer than 64 KiB.
	Text string `json:"text,omitempty"`
}

// Diff compares the issue's branch with the default branch of the
// workspace, touching nothing: git diff, rev-list and merge-tree
// --write-tree (objects only). An issue without a branch is an error
// wrapping ErrNoBranch, a bad identifier one wrapping ErrBadIssue.
func (m *Manager) Diff(ctx context.Context, issue string) (Diff, error) {
	if err := checkIssue(issue); err != nil {
		return Diff{}, badIssueError{err}
	}
	d := Diff{Issue: issue, Branch: Branch(issue), Conflicts: []Conflict{}}
	if !m.branchExists(ctx, d.Branch) {
		return Diff{}, fmt.Errorf("diff of %s: %w %s in %s (no worktree was made for it, or it was finished)", issue, ErrNoBranch, d.Branch, m.Repo)
	}
	base, err := m.DefaultBranch(ctx)
	if err != nil {
		return Diff{}, fmt.Errorf("diff of %s: %w", issue, err)
	}
	d.Base = base
	counts, err := m.git(ctx, m.Repo, "rev-list", "--left-right", "--count", base+"..."+d.Branch)
	if err != nil {
		return Diff{}, fmt.Errorf("diff of %s: %w", issue, err)
	}
	if f := strings.Fields(counts); len(f) == 2 {
		d.Behind, _ = strconv.Atoi(f[0])
		d.Ahead, _ = strconv.Atoi(f[1])
	}
	patch, err := m.git(ctx, m.Repo, "diff", "--no-color", "--no-ext-diff", base+"..."+d.Branch)
	if err != nil {
		return Diff{}, fmt.Errorf("diff of %s: %w", issue, err)
	}
	if len(patch) > MaxDiffBytes {
		patch, d.Truncated = patch[:MaxDiffBytes], true
	}
	d.Patch = patch
	if status, err := m.git(ctx, m.Path(issue), "status", "--porcelain"); err == nil {
		d.Dirty = status != ""
	}
	if why := m.mergeTreeMissing(ctx); why != "" {
		d.ConflictsUnknown = why
		return d, nil
	}
	d.Conflicts, err = m.conflictTexts(ctx, base, d.Branch)
	if err != nil {
		return Diff{}, fmt.Errorf("diff of %s: %w", issue, err)
	}
	return d, nil
}

// gitVersion matches `git version 2.39.5` (and vendor suffixes).
var gitVersion = regexp.MustCompile(`^git version (\d+)\.(\d+)`)

// mergeTreeMissing says why git merge-tree --write-tree cannot run here,
// or "" when it can.
func (m *Manager) mergeTreeMissing(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "version").Output()
	if err != nil {
		return "cannot run git version: " + err.Error()
	}
	v := gitVersion.FindStringSubmatch(strings.TrimSpace(string(out)))
	if v == nil {
		return fmt.Sprintf("cannot tell git's version from %q; would-be conflicts need git 2.%d or later (merge-tree --write-tree)", strings.TrimSpace(string(out)), mergeTreeMinor)
	}
	if !versionUsable(v[1], v[2]) {
		return fmt.Sprintf("%s is too old to compute would-be conflicts without touching a worktree: install git 2.%d or later (merge-tree --write-tree)", strings.TrimSpace(string(out)), mergeTreeMinor)
	}
	return ""
}

// versionUsable reports whether git major.minor has merge-tree
// --write-tree.
func versionUsable(major, minor string) bool {
	ma, _ := strconv.Atoi(major)
	mi, _ := strconv.Atoi(minor)
	return ma > 2 || ma == 2 && mi >= mergeTreeMinor
}

// conflictTexts lists the files a merge of branch into base would leave
// in conflict, each with its text from the tree git merge-tree wrote.
func (m *Manager) conflictTexts(ctx context.Context, base, branch string) ([]Conflict, error) {
	tree, files, err := m.mergeTree(ctx, base, branch)
	if err != nil {
		return nil, err
	}
	conflicts := []Conflict{}
	for _, p := range files {
		c := Conflict{Path: p}
		if text, err := m.git(ctx, m.Repo, "cat-file", "blob", tree+":"+p); err == nil && len(text) <= maxConflictText {
			c.Text = text
		}
		conflicts = append(conflicts, c)
	}
	return conflicts, nil
}
