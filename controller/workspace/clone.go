package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A team on a cluster (engine = "kubernetes") has no workspace its pods
// can see: each issue's pod clones the team's repository onto the issue's
// volume (Clone) and works in a worktree of that clone, as on a machine.
// The clone is Legion's own, marked in its git config (cloneMarker): its
// default branch only follows origin's, so its finisher may reset it to
// origin's before merging and push the merge back (MergeAndPublish),
// which Legion never does to a workspace of the user's.

// cloneMarker is the git config key that marks a repository Clone made.
const cloneMarker = "legion.clone"

// maxPublishTries bounds MergeAndPublish's rounds: each loses only to a
// push of another issue's finisher in between.
const maxPublishTries = 5

// Clone makes dir a clone of url, Legion's own (marked), or, when dir is
// one already, fetches origin and moves the default branch to origin's:
// an issue's worktree branches from what the repository has now. A dir
// that holds another repository, or a clone of another url, is an error
// naming both: nothing is overwritten.
func Clone(ctx context.Context, url, dir string) error {
	if url == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("clone %q into %q: want a repository URL and an absolute directory", url, dir)
	}
	m := &Manager{Repo: dir, Dir: filepath.Dir(dir)}
	if _, err := os.Stat(filepath.Join(dir, ".git")); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return fmt.Errorf("clone %s: %w", url, err)
		}
		// Cloned beside dir and renamed into place: a clone cut short (a
		// pod killed mid-clone) leaves only its own partial directory,
		// which the next Clone replaces; a directory that is not Legion's
		// is never written into or removed.
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			return fmt.Errorf("clone %s: %s is not empty and not a git repository: move it away or name another directory", url, dir)
		}
		partial := dir + ".partial"
		if err := os.RemoveAll(partial); err != nil {
			return fmt.Errorf("clone %s: remove the unfinished clone %s: %w", url, partial, err)
		}
		if _, err := m.git(ctx, filepath.Dir(dir), "-c", "credential.helper=", "clone", "--quiet", "--", url, partial); err != nil {
			return fmt.Errorf("clone %s into %s: %w", url, dir, err)
		}
		if _, err := m.git(ctx, partial, "config", cloneMarker, "true"); err != nil {
			return fmt.Errorf("clone %s: mark %s as Legion's: %w", url, dir, err)
		}
		_ = os.Remove(dir) // empty, if there
		if err := os.Rename(partial, dir); err != nil {
			return fmt.Errorf("clone %s: %w", url, err)
		}
		return nil
	}
	if !m.IsClone(ctx) {
		return fmt.Errorf("clone %s: %s is a repository Legion did not clone (no %s in its git config): move it away or name another directory", url, dir, cloneMarker)
	}
	if origin, _ := m.git(ctx, dir, "remote", "get-url", "origin"); origin != url {
		return fmt.Errorf("clone %s: %s is a clone of %s, not of %s: move it away, or set kubernetes.repository back", url, dir, origin, url)
	}
	return m.syncDefault(ctx)
}

// IsClone reports whether the workspace is a clone Legion made (Clone).
func (m *Manager) IsClone(ctx context.Context) bool {
	v, err := m.git(ctx, m.Repo, "config", "--bool", "--get", cloneMarker)
	return err == nil && v == "true"
}

// syncDefault fetches origin and sets the clone's default branch, checked
// out, to origin's: whatever the clone had there and origin has not (a
// merge whose push was refused) is origin's to decide, not the clone's.
func (m *Manager) syncDefault(ctx context.Context) error {
	if _, err := m.git(ctx, m.Repo, "-c", "credential.helper=", "fetch", "--quiet", "--prune", "origin"); err != nil {
		return fmt.Errorf("fetch origin into %s: %w", m.Repo, err)
	}
	def, err := m.DefaultBranch(ctx)
	if err != nil {
		return err
	}
	if _, err := m.git(ctx, m.Repo, "checkout", "--quiet", "-B", def, "origin/"+def); err != nil {
		return fmt.Errorf("set %s of %s to origin's: %w", def, m.Repo, err)
	}
	return nil
}

// MergeAndPublish merges the issue's branch into the default branch of a
// clone (Clone) and pushes that branch to origin. A push refused because
// origin moved on (another issue finished meanwhile) starts again from
// origin's branch, at most maxPublishTries times. Conflicts are Merge's:
// the error wraps ErrConflict with the files.
func (m *Manager) MergeAndPublish(ctx context.Context, issue string) (MergeResult, error) {
	if !m.IsClone(ctx) {
		return MergeResult{}, fmt.Errorf("finish %s: %s is not a clone Legion made: merge with Merge", issue, m.Repo)
	}
	var last error
	for range maxPublishTries {
		if err := m.syncDefault(ctx); err != nil {
			return MergeResult{}, fmt.Errorf("finish %s: %w", issue, err)
		}
		res, err := m.Merge(ctx, issue)
		if err != nil {
			return res, err
		}
		def, err := m.DefaultBranch(ctx)
		if err != nil {
			return MergeResult{}, err
		}
		ref := "refs/heads/" + def
		out, err := m.git(ctx, m.Repo, "-c", "credential.helper=", "push", "--porcelain", "origin", ref+":"+ref)
		if err == nil {
			return res, nil
		}
		if !strings.Contains(out, "[rejected]") && !strings.Contains(err.Error(), "fetch first") && !strings.Contains(err.Error(), "non-fast-forward") {
			return MergeResult{}, fmt.Errorf("finish %s: push %s to origin: %w", issue, def, err)
		}
		last = err
	}
	return MergeResult{}, fmt.Errorf("finish %s: origin's default branch moved on %d times while merging: %w", issue, maxPublishTries, last)
}
