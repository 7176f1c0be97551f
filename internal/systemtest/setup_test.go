package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/booted"
	"github.com/legion-dev/legion/units/booted/bootedtest"
	"github.com/legion-dev/legion/units/sdtest"
)

const (
	user     = "dev" // the ordinary user every test logs in as
	teamName = "web" // the README's team
	prefix   = "WEB" // its issue prefix (from the team name)
	// waitFor is the generous deadline of every condition the tests poll.
	waitFor = 3 * time.Minute
	// pollEvery spaces polls that run a command in the container.
	pollEvery = 300 * time.Millisecond
)

// scriptedLegion is where the tests' legion (sdtest.LegionBinary, built
// with the demo tag) is installed for claudeWrapper: it has `legion
// scripted-agent`, which the legion of `make install` (the quick start's)
// has not.
const scriptedLegion = "/usr/local/lib/legion-test/legion"

// claudeWrapper is the `claude` on the user's PATH: the scripted agent,
// running the script in ~/agent.script.
const claudeWrapper = `#!/bin/sh
# Written by Legion's booted-system tests: Claude Code's stand-in.
LEGION_SCRIPT_FILE="$HOME/agent.script" exec ` + scriptedLegion + ` scripted-agent "$@"
`

// sys is a booted system with the user, their workspace ~/src/web (a git
// repository on main) and the agent stand-in.
type sys struct {
	*booted.System
	t   *testing.T
	ctx context.Context
	uid string
}

// options say what a test's system has before the test starts.
type options struct {
	// noBinaries leaves /usr/local/bin without legion (the quick start
	// installs its own).
	noBinaries bool
	linger     bool
	// script is the scripted agent's script; @LEGION@ is legion's path.
	script string
}

// bootLegion boots a system for the test and prepares it (options).
func bootLegion(t *testing.T, o options) *sys {
	t.Helper()
	bootedtest.Require(t)
	for _, tool := range []string{"git", "tmux"} {
		if _, err := exec.LookPath(tool); err != nil {
			sdtest.Require(t, tool+" (scripts/check-deps installs it)", false)
		}
	}
	bin := sdtest.LegionBinary(t) // before Boot: a build takes long, and the overlay needs no fresh file
	// Not t.Context(): the cleanups below still run commands.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	s := &sys{System: bootedtest.Boot(t), t: t, ctx: ctx}
	if !o.noBinaries {
		for _, f := range []string{bin, sdtest.WorkerBinary(t)} {
			if err := s.Install(f, "/usr/local/bin/"+filepath.Base(f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Install(bin, scriptedLegion); err != nil {
		t.Fatal(err)
	}
	s.writeFile("/usr/local/bin/claude", claudeWrapper, 0o755, "root")
	if err := s.AddUser(ctx, user); err != nil {
		t.Fatal(err)
	}
	s.uid = strings.TrimSpace(s.root("id", "-u", user))
	s.writeFile("/home/"+user+"/agent.script", strings.ReplaceAll(o.script, "@LEGION@", "legion"), 0o600, user)
	if o.linger {
		if err := s.SetLinger(ctx, user, true); err != nil {
			t.Fatal(err)
		}
	}
	s.login("sh", "-ec", `git config --global user.name 'Dev Eloper'
git config --global user.email dev@example.com
git init -q -b main ~/src/web
cd ~/src/web && echo web > README && git add README && git commit -qm first`)
	t.Cleanup(func() {
		if t.Failed() {
			s.logState()
		}
	})
	return s
}

// sub is s for a subtest t.
func (s *sys) sub(t *testing.T) *sys {
	c := *s
	c.t = t
	return &c
}

// writeFile writes a file of the container, owned by owner.
func (s *sys) writeFile(path, text string, mode os.FileMode, owner string) {
	s.t.Helper()
	if err := os.WriteFile(s.Path(path), []byte(text), mode); err != nil {
		s.t.Fatal(err)
	}
	s.root("chown", owner+":", path)
}

// root runs argv as root in the container.
func (s *sys) root(argv ...string) string {
	s.t.Helper()
	out, err := s.Run(s.ctx, argv...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// login runs argv as the user in a login session of its own (a login,
// then a logout).
func (s *sys) login(argv ...string) string {
	s.t.Helper()
	out, err := s.Login(s.ctx, user, argv...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// asUser runs argv as the user without a login session (as `sudo -u`
// would), with the user manager's runtime dir and bus: for reading state
// while no one is logged in.
func (s *sys) asUser(argv ...string) (string, error) {
	rt := "/run/user/" + s.uid
	args := []string{"runuser", "-u", user, "--", "env", "HOME=/home/" + user, "USER=" + user,
		"XDG_RUNTIME_DIR=" + rt, "DBUS_SESSION_BUS_ADDRESS=unix:path=" + rt + "/bus"}
	return s.Run(s.ctx, append(args, argv...)...)
}

// until polls cond, a check that runs commands in the container, every
// pollEvery until it returns nil.
func (s *sys) until(what string, cond func() error) {
	s.t.Helper()
	s.untilWithin(waitFor, what, cond)
}

// untilWithin is until with a deadline of its own.
func (s *sys) untilWithin(d time.Duration, what string, cond func() error) {
	s.t.Helper()
	var last time.Time
	var lastErr error = fmt.Errorf("not tried yet")
	waitfor.Check(s.t, d, what, func() error {
		if time.Since(last) < pollEvery {
			return lastErr
		}
		last = time.Now()
		lastErr = cond()
		return lastErr
	})
}

// waitMerged waits until the workspace's main has issue id's implementer
// commit: the scripted finisher moves the issue to Done first and merges
// (legion worktree finish) right after, so Done alone does not say the
// merge is in.
func (s *sys) waitMerged(id string) {
	s.t.Helper()
	s.until("main's log has the implementer commit of "+id, func() error {
		out, err := s.asUser("git", "-C", "/home/"+user+"/src/web", "log", "--format=%s", "main")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "Implement "+id) {
			return fmt.Errorf("main's log has no implementer commit:\n%s", out)
		}
		return nil
	})
}

// issue reads an issue of the team's local tracker.
func (s *sys) issue(id string) (controller.TrackedIssue, error) {
	out, err := s.asUser("legion", "issue", "show", teamName, id, "--json")
	if err != nil {
		return controller.TrackedIssue{}, err
	}
	var is controller.TrackedIssue
	if err := json.Unmarshal([]byte(out), &is); err != nil {
		return is, fmt.Errorf("legion issue show %s --json: %w: %q", id, err, out)
	}
	return is, nil
}

// waitStatus waits until the issue has status.
func (s *sys) waitStatus(id string, status controller.Status) {
	s.t.Helper()
	s.until(fmt.Sprintf("%s to reach %s", id, status), func() error {
		is, err := s.issue(id)
		if err != nil {
			return err
		}
		if is.Status != status {
			return fmt.Errorf("%s is %s %v", id, is.Status, is.Labels)
		}
		return nil
	})
}

// unitShow returns a property of a unit of the user's manager.
func (s *sys) unitShow(unit, prop string) string {
	out, _ := s.asUser("systemctl", "--user", "show", "-p", prop, "--value", unit)
	return strings.TrimSpace(out)
}

// sessionFile returns the scripted agent's session file of the agent
// session id (Claude Code's layout: ~/.claude/projects/*/ID.jsonl).
func (s *sys) sessionFile(id string) (string, error) {
	files, err := filepath.Glob(s.Path("/home/" + user + "/.claude/projects/*/" + id + ".jsonl"))
	if err != nil || len(files) != 1 {
		return "", fmt.Errorf("session files of %s: %v (%v); want one", id, files, err)
	}
	b, err := os.ReadFile(files[0])
	return string(b), err
}

// logState logs what helps to read a failure: the user's units, the
// journal's end and the issues.
func (s *sys) logState() {
	for _, argv := range [][]string{
		{"systemctl", "--user", "list-units", "--all", "--no-pager", "legion*"},
		{"legion", "issue", "list", teamName},
		{"journalctl", "--user", "--no-pager", "-n", "80"},
	} {
		out, err := s.asUser(argv...)
		s.t.Logf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	out, _ := s.Run(context.Background(), "journalctl", "--no-pager", "-n", "40")
	s.t.Logf("system journal:\n%s", out)
}
