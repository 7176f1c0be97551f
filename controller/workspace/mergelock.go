package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/legion-dev/legion/internal/gitlock"
	"golang.org/x/sys/unix"
)

// Finishers of several issues merge into the one workspace, and a
// finisher may be killed (kill -9, OOM, a reboot) in the middle of git:
// git then leaves its lock files behind (index.lock, HEAD.lock, a
// branch's ref lock), and every later merge failed with "Unable to
// create '.../HEAD.lock': File exists" until a person removed it (the
// chaos run found it: a finisher killed mid-merge, and the next issue's
// finisher failed until its start limit). So Legion's merges into a
// repository take turns (an flock on its git directory itself, which the
// kernel releases with a killed process), and under it a git lock older
// than staleLock is a killed git's: it is moved aside, named by its time,
// not deleted. A younger one (a person's git, for a moment) is waited for.
//
// The flock is taken on the directory, opened read-only, and not on a file
// of Legion's in it: an agent's sandbox lets a finisher write only what
// its merge writes, and a file of Legion's there was refused (the real
// Codex finisher of TestFollowCodex: "open .git/legion-merge.lock:
// read-only file system"). Git itself takes no flock, so nothing else
// contends for it.
//
// Adding a worktree (Ensure) takes the same lock: it writes the
// repository's config (the branch's port offset, after reading which
// slots are taken), and two dispatches adding worktrees at once failed
// with "could not lock config file .git/config: File exists", or both
// took the same free slot. Removing one (Remove) takes it too: git
// branch -D writes the config as well, and read a worktree's record that
// an Ensure was writing ("failed to read .git/worktrees/DEMO-8/commondir").

const (
	// staleLock is the age after which a git lock found under the
	// repository's lock is taken for a killed git's (git holds them for the
	// time of one command).
	staleLock = 20 * time.Second
	// lockWait bounds the wait for a git lock that is not stale.
	lockWait = 30 * time.Second
)

// withMergeLock runs f while holding the repository's lock, with the git
// locks f's merge needs (index, HEAD, branch def's ref) free.
func (m *Manager) withMergeLock(ctx context.Context, def string, f func() error) error {
	return m.withRepoLock(ctx, []string{"index.lock", "HEAD.lock", filepath.Join("refs", "heads", def+".lock")}, f)
}

// withRepoLock runs f while holding the repository's lock (an flock on
// its git directory), with the git locks named by locks (paths in the git
// directory) free: one older than staleLock is moved aside, a younger one
// waited for.
func (m *Manager) withRepoLock(ctx context.Context, locks []string, f func() error) error {
	gitDir, err := m.git(ctx, m.Repo, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return err
	}
	lf, err := os.Open(gitDir)
	if err != nil {
		return fmt.Errorf("lock %s: %w", m.Repo, err)
	}
	defer lf.Close()
	for {
		err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("lock %s: %w", m.Repo, err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for Legion's other change to %s (a merge or a new worktree): %w", m.Repo, err)
		}
	}
	defer unix.Flock(int(lf.Fd()), unix.LOCK_UN)
	deadline := time.Now().Add(lockWait)
	for _, name := range locks {
		p := filepath.Join(gitDir, name)
		for {
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				break
			}
			if moved, err := gitlock.MoveAside(p, staleLock); err != nil {
				return err
			} else if moved {
				continue
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s is held by another git (for %s now): finish or stop it, then run this again", p, lockWait)
			}
			if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return f()
}

// StaleLocks are the git locks withMergeLock moved aside in repo's git
// directory (what `ls` would show), for tests and people.
func StaleLocks(gitDir string) []string {
	var out []string
	_ = filepath.WalkDir(gitDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".lock.stale-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
