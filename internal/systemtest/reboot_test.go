package systemtest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/internal/waitfor"
)

// rebootScript: the implementer works until it is resumed, then does its
// phase; the other modes do theirs at once.
const rebootScript = `
if-env LEGION_MODE=plan run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
if-env LEGION_MODE=implement if-new say Implementing $LEGION_ISSUE
if-env LEGION_MODE=implement if-new work 30m
if-env LEGION_MODE=implement if-resumed say resumed $SESSION_ID
if-env LEGION_MODE=implement if-resumed run sh -c "echo impl > $LEGION_ISSUE.txt"
if-env LEGION_MODE=implement if-resumed run git add -A
if-env LEGION_MODE=implement if-resumed run git commit -qm "Implement $LEGION_ISSUE"
if-env LEGION_MODE=implement if-resumed run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
if-env LEGION_MODE=review run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-approved
if-env LEGION_MODE=review run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
if-env LEGION_MODE=retro run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
if-env LEGION_MODE=finish run @LEGION@ issue move $LEGION_TEAM $LEGION_ISSUE Done
if-env LEGION_MODE=finish run @LEGION@ worktree finish $LEGION_TEAM $LEGION_ISSUE
`

// TestRebootMidImplement: the machine reboots while the implementer
// works. With lingering, the user's manager starts at boot and with it
// the enabled legion@web, nobody logged in; the implementer resumes its
// own conversation (the same session id, its session file shows the
// resumed turn) and the issue reaches Done.
func TestRebootMidImplement(t *testing.T) {
	t.Parallel()
	s := bootLegion(t, options{linger: true, script: rebootScript})
	id := s.setUpTeam()
	s.login("systemctl", "--user", "start", "legion@"+teamName)
	s.workerUnit(id, controller.ModeImplement)
	session := s.agentSession("Implementing " + id)

	start := time.Now()
	if err := s.Reboot(s.ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("rebooted in %v", time.Since(start).Round(time.Millisecond))
	s.until("legion@"+teamName+" to start at boot", func() error {
		if st := s.unitShow("legion@"+teamName+".service", "ActiveState"); st != "active" {
			return fmt.Errorf("legion@%s is %q", teamName, st)
		}
		return nil
	})
	s.until("the implementer to resume its session "+session, func() error {
		text, err := s.sessionFile(session)
		if err != nil {
			return err
		}
		if !strings.Contains(text, "resumed "+session) {
			return fmt.Errorf("session %s has not resumed", session)
		}
		return nil
	})
	t.Logf("the implementer resumed %v after the reboot began", time.Since(start).Round(100*time.Millisecond))
	s.waitStatus(id, controller.StatusDone)
	t.Logf("%s Done %v after the reboot began", id, time.Since(start).Round(100*time.Millisecond))
	if st := s.loginState(); st != "lingering" {
		t.Errorf("logind's state of %s = %q; want lingering (no one logged in since the boot)", user, st)
	}
	if out := s.login("git", "-C", "src/web", "show", "main:"+id+".txt"); out != "impl\n" {
		t.Errorf("main:%s.txt = %q; want %q", id, out, "impl\n")
	}
}

// finishRebootScript: the finisher works until it is resumed, then
// finishes; the other modes do their phase at once.
const finishRebootScript = `
if-env LEGION_MODE=plan run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
if-env LEGION_MODE=implement run sh -c "echo impl > $LEGION_ISSUE.txt && git add -A && git commit -qm 'Implement $LEGION_ISSUE'"
if-env LEGION_MODE=implement run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
if-env LEGION_MODE=review run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-approved
if-env LEGION_MODE=review run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
if-env LEGION_MODE=retro run @LEGION@ issue label $LEGION_TEAM $LEGION_ISSUE worker-done
if-env LEGION_MODE=finish if-new say Finishing $LEGION_ISSUE
if-env LEGION_MODE=finish if-new work 30m
if-env LEGION_MODE=finish if-resumed say resumed $SESSION_ID
if-env LEGION_MODE=finish if-resumed run sh -c "@LEGION@ worktree finish $LEGION_TEAM $LEGION_ISSUE && @LEGION@ issue move $LEGION_TEAM $LEGION_ISSUE Done"
`

// TestRebootMidFinish: the machine reboots while the finisher works. Its
// unit goes with the boot and the helper prunes its entry, so no finisher
// of the issue has ended: the controller runs it again (it resumes its
// conversation) rather than hand the issue to a person as a finisher that
// ended without closing it (the chaos run's reboot fault found that).
func TestRebootMidFinish(t *testing.T) {
	t.Parallel()
	s := bootLegion(t, options{linger: true, script: finishRebootScript})
	id := s.setUpTeam()
	s.login("systemctl", "--user", "start", "legion@"+teamName)
	s.workerUnit(id, controller.ModeFinish)
	session := s.agentSession("Finishing " + id)

	if err := s.Reboot(s.ctx); err != nil {
		t.Fatal(err)
	}
	s.until("the finisher to resume its session "+session, func() error {
		if is, err := s.issue(id); err == nil && hasLabel(is, controller.LabelInputNeeded) {
			return waitfor.Stop(fmt.Errorf("%s waits for a person after the reboot: %v", id, is.Labels))
		}
		text, err := s.sessionFile(session)
		if err != nil {
			return err
		}
		if !strings.Contains(text, "resumed "+session) {
			return fmt.Errorf("session %s has not resumed", session)
		}
		return nil
	})
	s.waitStatus(id, controller.StatusDone)
	s.waitMerged(id)
}
