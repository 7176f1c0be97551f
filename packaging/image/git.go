package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// The host's git the image holds: a pod clones the team's repository,
// adds the worktree, commits, merges and pushes with it
// (controller/workspace), over a path or file:// URL and http(s)://.
const (
	// CACerts is the CA bundle, at the host's path, that the https
	// transport (libcurl) verifies servers with; Debian's libcurl finds
	// it there without GIT_SSL_CAINFO.
	CACerts = "/etc/ssl/certs/ca-certificates.crt"
	// GitTemplates is the template directory git init and clone copy into
	// a new repository's .git (compiled into git; a clone warns without
	// it).
	GitTemplates = "/usr/share/git-core/templates"
	// Shell runs the local transport: for a path or file:// URL git runs
	// "git-upload-pack '<path>'" (fetch) or "git-receive-pack '<path>'"
	// (push) through sh -c.
	Shell = "/bin/sh"
	// gitInstall is what to install when the host lacks git or its CA
	// certificates.
	gitInstall = "apt-get install git ca-certificates"
)

// GitExecPrograms are the programs of git's exec path (git --exec-path)
// the image holds, of the host's 170 or so (23 MB): the other dashed
// names are builtins that /usr/bin/git runs in its own process (clone,
// fetch, push, worktree, merge, commit, index-pack, send-pack...), and the
// rest (git-http-backend, git-daemon, git-shell, git-imap-send, scalar,
// the shell and perl scripts) serve repositories or people, not a pod's
// clone. Each maps to what it is in the image: "" for the host's file;
// a name for a symlink to that file of the exec path.
var GitExecPrograms = []struct{ Name, LinkTo string }{
	// The smart-HTTP remote helper for http:// and https:// (links
	// libcurl: its libraries come from ldd).
	{"git-remote-http", ""},
	{"git-remote-https", "git-remote-http"},
	// git runs these by their dashed name for the local transport and
	// for the git commands it starts (send-pack, index-pack) with the exec
	// path first on $PATH; each is git itself.
	{"git", ""},
	{"git-upload-pack", "git"},
	{"git-receive-pack", "git"},
}

// addGit adds the host's git to l: the program found on $PATH, the
// programs of its exec path in GitExecPrograms, the shared libraries ldd
// names for them, Shell and its libraries, and GitTemplates, all at the
// host's paths (git's exec path and template directory are compiled in).
// A missing piece is an error saying what to install.
func addGit(ctx context.Context, l *layer) error {
	git, err := exec.LookPath("git")
	if err != nil {
		return fmt.Errorf("git, which a pod clones the team's repository with: %w; install it with %s", err, gitInstall)
	}
	if git, err = filepath.Abs(git); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, git, "--exec-path").Output()
	if err != nil {
		return fmt.Errorf("%s --exec-path: %w", git, err)
	}
	execPath := strings.TrimSpace(string(out))
	if !filepath.IsAbs(execPath) {
		return fmt.Errorf("%s --exec-path = %q; want an absolute directory (a git built with RUNTIME_PREFIX is not supported)", git, execPath)
	}
	programs := []string{git, Shell}
	if err := l.hostFile(git); err != nil {
		return fmt.Errorf("git: %w; install it with %s", err, gitInstall)
	}
	if err := l.hostFile(Shell); err != nil {
		return fmt.Errorf("git's local transport runs %s: %w", Shell, err)
	}
	for _, p := range GitExecPrograms {
		name := path.Join(strings.TrimPrefix(filepath.ToSlash(execPath), "/"), p.Name)
		switch {
		case p.LinkTo != "":
			l.symlink(name, p.LinkTo)
		case p.Name == "git":
			// The exec path's git is the same program as git on $PATH.
			l.symlink(name, filepath.ToSlash(git))
		default:
			src := filepath.Join(execPath, p.Name)
			if err := l.hostFile(src); err != nil {
				return fmt.Errorf("git's %s: %w; install it with %s", p.Name, err, gitInstall)
			}
			programs = append(programs, src)
		}
	}
	for _, p := range programs {
		libs, err := libraries(ctx, p)
		if err != nil {
			return err
		}
		for _, lib := range libs {
			if err := l.hostFile(lib); err != nil {
				return fmt.Errorf("%s needs %s: %w", p, lib, err)
			}
			if path.Base(lib) != "libc.so.6" {
				continue
			}
			// glibc loads libgcc_s.so.1 (dlopen, so ldd does not name it)
			// when a thread exits: git's threaded index-pack and
			// pack-objects abort without it ("libgcc_s.so.1 must be
			// installed for pthread_exit to work").
			gcc := filepath.Join(filepath.Dir(lib), "libgcc_s.so.1")
			if err := l.hostFile(gcc); err != nil {
				return fmt.Errorf("git's threads need %s beside %s: %w; install it with apt-get install libgcc-s1", gcc, lib, err)
			}
		}
	}
	if fi, err := os.Stat(GitTemplates); err != nil {
		return fmt.Errorf("git's templates: %w; install git with %s", err, gitInstall)
	} else if !fi.IsDir() {
		return fmt.Errorf("git's templates: %s is not a directory; reinstall git with %s", GitTemplates, gitInstall)
	}
	if err := l.tree(GitTemplates, strings.TrimPrefix(GitTemplates, "/")); err != nil {
		return fmt.Errorf("git's templates: %w", err)
	}
	return nil
}
