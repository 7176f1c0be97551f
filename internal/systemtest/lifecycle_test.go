package systemtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units/unitname"
)

// setUpTeam is the quick start's team, with the controller enabled (it
// starts with the user's manager) and one issue, as the user: the team,
// the units, the issue. It returns the issue's ID.
func (s *sys) setUpTeam() string {
	s.t.Helper()
	s.login("legion", "team", "add", teamName, "--workspace", "src/web")
	s.login("legion", "install", "--enable", teamName)
	return strings.TrimSpace(s.login("legion", "issue", "add", teamName, "Write a file"))
}

// workerUnit waits for the live worker unit of issue in mode and returns
// its name and main PID.
func (s *sys) workerUnit(issue string, mode controller.Mode) (unit, pid string) {
	s.t.Helper()
	s.until(fmt.Sprintf("a running worker of %s in %s mode", issue, mode), func() error {
		out, err := s.asUser("systemctl", "--user", "list-units", "--plain", "--no-legend", "--state=active", "legion-*.service")
		if err != nil {
			return err
		}
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if _, is, m, err := unitname.ParseWorkerUnit(f[0]); err == nil && is == issue && m == string(mode) {
				unit = f[0]
			}
		}
		if unit == "" {
			return fmt.Errorf("active worker units: %q", out)
		}
		pid = s.unitShow(unit, "MainPID")
		if pid == "" || pid == "0" {
			return fmt.Errorf("%s has no main PID yet", unit)
		}
		return nil
	})
	return unit, pid
}

// agentSession waits for the scripted agent's session file that contains
// text and returns its session ID (the file's name).
func (s *sys) agentSession(text string) string {
	s.t.Helper()
	var id string
	s.until(fmt.Sprintf("an agent session file with %q", text), func() error {
		files, _ := filepath.Glob(s.Path("/home/" + user + "/.claude/projects/*/*.jsonl"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), text) {
				id = strings.TrimSuffix(filepath.Base(f), ".jsonl")
				return nil
			}
		}
		return fmt.Errorf("session files: %v", files)
	})
	return id
}

// loginState is logind's state of the user: lingering when no session is
// open and lingering is on, offline when the manager is gone.
func (s *sys) loginState() string {
	out, _ := s.Run(s.ctx, "loginctl", "show-user", user, "-p", "State", "--value")
	return strings.TrimSpace(out)
}

// longPlan is a planner that works until it is resumed: then it says so
// and finishes its phase.
const longPlan = `
if-env LEGION_MODE=plan if-new say Planning $LEGION_ISSUE
if-env LEGION_MODE=plan if-new work 30m
if-env LEGION_MODE=plan if-resumed say resumed $SESSION_ID
if-env LEGION_MODE=plan if-resumed run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
`

// TestLogout: with lingering a worker survives the end of the user's
// last login session (same main PID); without it the user's manager, and
// the worker with it, stops at logout, and at the next login the enabled
// legion@web resumes the issue's agent in its own conversation.
func TestLogout(t *testing.T) {
	t.Parallel()
	s := bootLegion(t, options{linger: true, script: longPlan})
	id := s.setUpTeam()
	s.login("systemctl", "--user", "start", "legion@"+teamName)
	unit, pid := s.workerUnit(id, controller.ModePlan)
	session := s.agentSession("Planning " + id)

	// Every login so far has ended: the user is logged out.
	s.until("no login session of "+user+" (lingering)", func() error {
		if st := s.loginState(); st != "lingering" {
			return fmt.Errorf("logind's state of %s: %q", user, st)
		}
		return nil
	})
	if got := s.unitShow(unit, "MainPID"); got != pid {
		t.Fatalf("with linger, after logout %s has main PID %q; want %s (the same worker)", unit, got, pid)
	}
	if st := s.unitShow(unit, "ActiveState"); st != "active" {
		t.Fatalf("with linger, after logout %s is %s; want active", unit, st)
	}

	// Without linger: log in, turn lingering off, log out.
	se, err := s.OpenSession(s.ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetLinger(s.ctx, user, false); err != nil {
		t.Fatal(err)
	}
	if err := se.Close(s.ctx); err != nil {
		t.Fatal(err)
	}
	userUnit := "user@" + s.uid + ".service"
	s.until(userUnit+" to stop after the logout without linger", func() error {
		out, _ := s.Run(s.ctx, "systemctl", "is-active", userUnit)
		if st := strings.TrimSpace(out); st != "inactive" {
			return fmt.Errorf("%s is %s", userUnit, st)
		}
		return nil
	})
	if out, _ := s.Run(s.ctx, "ps", "-u", user, "-o", "pid=,args="); strings.TrimSpace(out) != "" {
		t.Errorf("processes of %s after the manager stopped:\n%s", user, out)
	}

	// The next login: the manager starts legion@web (enabled), which
	// resumes the planner in its conversation.
	start := time.Now()
	se, err = s.OpenSession(s.ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	defer se.Close(s.ctx)
	s.until("the planner resumed after the next login", func() error {
		text, err := s.sessionFile(session)
		if err != nil {
			return err
		}
		if !strings.Contains(text, "resumed "+session) {
			return fmt.Errorf("session %s has not resumed", session)
		}
		return nil
	})
	t.Logf("the planner resumed %v after the login", time.Since(start).Round(100*time.Millisecond))
	s.until(id+" planned", func() error {
		is, err := s.issue(id)
		if err != nil {
			return err
		}
		if is.Status == controller.StatusTodo && !hasLabel(is, "worker-done") {
			return fmt.Errorf("%s is %s %v", id, is.Status, is.Labels)
		}
		return nil
	})
}

func hasLabel(is controller.TrackedIssue, label string) bool {
	for _, l := range is.Labels {
		if l == label {
			return true
		}
	}
	return false
}
