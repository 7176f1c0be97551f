// Package gitlock moves aside the lock files a killed git left in a
// worktree.
//
// Git holds index.lock, HEAD.lock and a branch's ref lock for the time of
// one command and removes them when it ends; a git killed in between
// (kill -9, an OOM kill, a reboot) leaves them, and every later git that
// needs them fails with "Unable to create '.../index.lock': File exists"
// until someone removes them, as git's own message says to. An agent's
// worker starts a run only once every process of the run before is gone
// (systemd empties the unit's cgroup before it restarts it), so a lock
// in its worktree from before is such a killed git's: the worker moves it
// aside (Clear) before the agent starts. The booted tier's reboot chaos
// run found it: a reboot during the implementer's `git commit` left
// index.lock, and the implementer failed at every run until its start
// limit.
package gitlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Clear moves aside, in the git worktree or repository at dir, the index
// and HEAD locks and the lock of the branch HEAD names, each one last
// written more than older ago (a younger one may be a person's git at
// work), to <lock>.stale-<UTC time>: not deleted. It returns the paths it
// moved aside. A dir that is no git worktree is none of its business: no
// error.
func Clear(ctx context.Context, dir string, older time.Duration) ([]string, error) {
	out, err := git(ctx, dir, "rev-parse", "--absolute-git-dir", "--git-common-dir")
	if err != nil {
		return nil, nil // not a worktree, or no git: nothing of git's to clear
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 2 {
		return nil, nil
	}
	gitDir, common := lines[0], lines[1]
	if !filepath.IsAbs(common) {
		common = filepath.Join(dir, common)
	}
	locks := []string{filepath.Join(gitDir, "index.lock"), filepath.Join(gitDir, "HEAD.lock")}
	// The branch HEAD names, born or not (a new repository's is not),
	// read from the worktree's own HEAD file: no second git to start.
	if head, err := os.ReadFile(filepath.Join(gitDir, "HEAD")); err == nil {
		if ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: "); ok && strings.HasPrefix(ref, "refs/") {
			locks = append(locks, filepath.Join(common, filepath.FromSlash(ref)+".lock"))
		}
	}
	var moved []string
	var errs []error
	for _, p := range locks {
		ok, err := MoveAside(p, older)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			moved = append(moved, p)
		}
	}
	return moved, errors.Join(errs...)
}

// MoveAside renames the git lock file p to p.stale-<UTC time> when it
// was last written more than older ago, and says whether it did. A lock
// that is not there (or is gone meanwhile), or younger, is left: no error.
func MoveAside(p string, older time.Duration) (bool, error) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) <= older {
		return false, nil
	}
	aside := p + ".stale-" + time.Now().UTC().Format("20060102T150405.000")
	if err := os.Rename(p, aside); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("move the stale git lock %s aside: %w", p, err)
	}
	return true, nil
}

// git runs git in dir, taking no optional lock, and returns its trimmed
// stdout.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C", "GIT_TERMINAL_PROMPT=0")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	return strings.TrimSpace(stdout.String()), err
}
