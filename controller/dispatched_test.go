package controller_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/local"
)

// failingMoves is a local tracker whose moves fail while fail is set: a
// controller gone between a dispatch and its tracker changes.
type failingMoves struct {
	*local.Store
	fail bool
}

func (f *failingMoves) Move(ctx context.Context, id string, st controller.Status) error {
	if f.fail {
		return errors.New("the controller was killed")
	}
	return f.Store.Move(ctx, id, st)
}

// plannedIssue is a local tracker with one issue whose planner is done
// (worker-done) and whose moves fail (the controller killed between its
// dispatch and its tracker changes), and the sources of a controller that
// records its dispatches.
func plannedIssue(t *testing.T) (*local.Store, controller.TrackedIssue, *failingMoves, *fakeAgents, controller.Sources) {
	t.Helper()
	st := local.Open(t.TempDir(), "DEMO")
	is, err := st.Add(t.Context(), "Write a file")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddLabel(t.Context(), is.ID, controller.LabelWorkerDone); err != nil { // the planner's
		t.Fatal(err)
	}
	tr := &failingMoves{Store: st, fail: true}
	agents := &fakeAgents{}
	dir := filepath.Join(t.TempDir(), "dispatched")
	return st, is, tr, agents, controller.Sources{Tracker: tr, Sessions: agents, WIPLimit: 2, Dispatched: &controller.Dispatched{Dir: dir}}
}

// TestDispatchFinishedAfterRestart: the implementer is dispatched, the
// controller is gone before the issue moves to In Progress, and the
// implementer completes its phase (worker-done) before the next
// controller ticks. That controller makes the dispatch's tracker changes
// (In Progress, worker-done kept) and dispatches the reviewer next; it
// does not dispatch the implementer a second time, as it did before the
// dispatch was recorded (TestKubeTodoToDone with the controller killed
// at that dispatch found it).
func TestDispatchFinishedAfterRestart(t *testing.T) {
	ctx := t.Context()
	st, is, tr, agents, src := plannedIssue(t)

	r := controller.Tick(ctx, src, agents, discard())
	if r.Failed != 1 || !slices.Equal(agents.calls, []string{"dispatch " + is.ID + " implement"}) {
		t.Fatalf("first tick: %+v, calls %q; want the implementer dispatched and its move failed", r, agents.calls)
	}
	if _, err := os.Stat(filepath.Join(src.Dispatched.Dir, is.ID+".json")); err != nil {
		t.Fatalf("the dispatch's record: %v", err)
	}
	// The implementer completes its phase (its worker-done); the next
	// controller ticks.
	if err := st.AddLabel(ctx, is.ID, controller.LabelWorkerDone); err != nil {
		t.Fatal(err)
	}
	agents.sessions = []controller.Session{{Name: is.ID + "-implement", Issue: is.ID, Mode: controller.ModeImplement,
		State: controller.SessionExited, Completed: time.Now().Add(time.Second)}}
	tr.fail = false
	r = controller.Tick(ctx, src, agents, discard())
	if r.Failed != 0 || len(agents.calls) != 1 {
		t.Fatalf("second tick: %+v, calls %q; want the tracker changes made and no second dispatch", r, agents.calls)
	}
	got, _ := st.Issue(ctx, is.ID)
	if got.Status != controller.StatusInProgress || !slices.Contains(got.Labels, controller.LabelWorkerDone) {
		t.Errorf("after the restart: %s %v; want In Progress with the implementer's worker-done", got.Status, got.Labels)
	}
	if _, err := os.Stat(filepath.Join(src.Dispatched.Dir, is.ID+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record after its changes were made: %v; want it gone", err)
	}
	controller.Tick(ctx, src, agents, discard())
	if want := "dispatch " + is.ID + " review"; len(agents.calls) != 2 || agents.calls[1] != want {
		t.Errorf("third tick: calls %q; want %s", agents.calls, want)
	}
}

// TestDispatchFinishedSameSecond: as TestDispatchFinishedAfterRestart on
// Kubernetes, which says when a container ended only to the second: the
// implementer completes within the second of its dispatch, so its exit
// time reads as before the dispatch. The next controller still makes the
// dispatch's changes instead of running the implementer again (it did:
// TestKubeTodoToDone in CI, the second implementer's Job failing six
// times on the work already done).
func TestDispatchFinishedSameSecond(t *testing.T) {
	ctx := t.Context()
	st, is, tr, agents, src := plannedIssue(t)
	controller.Tick(ctx, src, agents, discard())
	recs, err := src.Dispatched.All(time.Now())
	if err != nil || len(recs) != 1 {
		t.Fatalf("records after the dispatch: %v, %v", recs, err)
	}
	at := recs[is.ID].At
	if err := st.AddLabel(ctx, is.ID, controller.LabelWorkerDone); err != nil {
		t.Fatal(err)
	}
	agents.sessions = []controller.Session{{Name: is.ID + "-implement", Issue: is.ID, Mode: controller.ModeImplement,
		State: controller.SessionExited, Completed: at.Truncate(time.Second)}}
	tr.fail = false
	controller.Tick(ctx, src, agents, discard())
	got, _ := st.Issue(ctx, is.ID)
	if len(agents.calls) != 1 || got.Status != controller.StatusInProgress {
		t.Errorf("after the restart: calls %q, issue %s; want no second dispatch and the dispatch's move made", agents.calls, got.Status)
	}
}

// TestDispatchRecordKnownExit: a clean exit in the dispatch's mode that
// the dispatch already knew of (a previous implementer, in the same
// second on Kubernetes) does not complete it: the worker is dispatched
// again.
func TestDispatchRecordKnownExit(t *testing.T) {
	ctx := t.Context()
	st := local.Open(t.TempDir(), "DEMO")
	is, err := st.Add(ctx, "Write a file")
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Truncate(time.Second)
	rec := &controller.Dispatched{Dir: filepath.Join(t.TempDir(), "dispatched")}
	if err := rec.Record(is.ID, controller.Dispatch{Mode: controller.ModePlan, At: old.Add(500 * time.Millisecond), Before: old}); err != nil {
		t.Fatal(err)
	}
	agents := &fakeAgents{sessions: []controller.Session{{Name: is.ID + "-plan", Issue: is.ID, Mode: controller.ModePlan,
		State: controller.SessionExited, Completed: old}}}
	controller.Tick(ctx, controller.Sources{Tracker: st, Sessions: agents, WIPLimit: 2, Dispatched: rec}, agents, discard())
	if !slices.Equal(agents.calls, []string{"dispatch " + is.ID + " plan"}) {
		t.Errorf("calls %q; want the planner dispatched again", agents.calls)
	}
}

// TestDispatchRecordLiveWorker: as TestDispatchFinishedAfterRestart, but
// the next controller ticks while the implementer, which has already
// added its worker-done, is still live (its pod or unit not ended yet).
// The issue's worker-done may then be the planner's or the implementer's:
// the tick makes none of the dispatch's changes and keeps its record, so
// that once the implementer has exited cleanly they are made without
// touching worker-done and the reviewer comes next. It used to carry
// them out at once, worker-done removal included, losing the
// implementer's, and ran the implementer again (TestKubeTodoToDone on
// two busy cores found it).
func TestDispatchRecordLiveWorker(t *testing.T) {
	ctx := t.Context()
	st, is, tr, agents, src := plannedIssue(t)
	controller.Tick(ctx, src, agents, discard())
	if !slices.Equal(agents.calls, []string{"dispatch " + is.ID + " implement"}) {
		t.Fatalf("first tick: calls %q; want the implementer dispatched", agents.calls)
	}
	// The implementer, live, has added its worker-done: the issue is as
	// the planner left it (Todo, worker-done).
	if err := st.AddLabel(ctx, is.ID, controller.LabelWorkerDone); err != nil {
		t.Fatal(err)
	}
	tr.fail = false
	r := controller.Tick(ctx, src, agents, discard())
	got, _ := st.Issue(ctx, is.ID)
	if r.Failed != 0 || len(agents.calls) != 1 || !slices.Contains(got.Labels, controller.LabelWorkerDone) {
		t.Fatalf("tick with the implementer live: %+v, calls %q, issue %s %v; want nothing done, worker-done kept", r, agents.calls, got.Status, got.Labels)
	}
	if _, err := os.Stat(filepath.Join(src.Dispatched.Dir, is.ID+".json")); err != nil {
		t.Fatalf("the dispatch's record while its worker is live: %v; want it kept", err)
	}
	// It exits cleanly.
	agents.sessions = []controller.Session{{Name: is.ID + "-implement", Issue: is.ID, Mode: controller.ModeImplement,
		State: controller.SessionExited, Completed: time.Now().Add(time.Second)}}
	controller.Tick(ctx, src, agents, discard())
	got, _ = st.Issue(ctx, is.ID)
	if got.Status != controller.StatusInProgress || !slices.Contains(got.Labels, controller.LabelWorkerDone) || len(agents.calls) != 1 {
		t.Fatalf("after the implementer exited: %s %v, calls %q; want In Progress with its worker-done, no second dispatch", got.Status, got.Labels, agents.calls)
	}
	controller.Tick(ctx, src, agents, discard())
	if want := "dispatch " + is.ID + " review"; len(agents.calls) != 2 || agents.calls[1] != want {
		t.Errorf("next tick: calls %q; want %s", agents.calls, want)
	}
}

// TestDispatchRecordNotCompleted: a record whose worker never completed
// after it (the dispatch failed, or the worker crashed) is forgotten and
// the issue decided from the tracker: the worker is dispatched again.
func TestDispatchRecordNotCompleted(t *testing.T) {
	ctx := t.Context()
	st := local.Open(t.TempDir(), "DEMO")
	is, err := st.Add(ctx, "Write a file")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "dispatched")
	rec := &controller.Dispatched{Dir: dir}
	if err := rec.Record(is.ID, controller.Dispatch{Mode: controller.ModePlan, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// An older clean exit of the planner does not count.
	agents := &fakeAgents{sessions: []controller.Session{{Name: is.ID + "-plan", Issue: is.ID, Mode: controller.ModePlan,
		State: controller.SessionExited, Completed: time.Now().Add(-time.Hour)}}}
	src := controller.Sources{Tracker: st, Sessions: agents, WIPLimit: 2, Dispatched: rec}
	controller.Tick(ctx, src, agents, discard())
	if !slices.Equal(agents.calls, []string{"dispatch " + is.ID + " plan"}) {
		t.Errorf("calls %q; want the planner dispatched again", agents.calls)
	}
}

// TestDispatchRecordCorrupt: an unreadable record is quarantined, named,
// and its issue decided from the tracker.
func TestDispatchRecordCorrupt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "DEMO-1.json"), []byte("{garbled"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	rec := &controller.Dispatched{Dir: dir, Log: slog.New(slog.NewTextHandler(&logged, nil))}
	all, err := rec.All(time.Now())
	if err == nil || !strings.Contains(err.Error(), "DEMO-1.json is unreadable") || len(all) != 0 {
		t.Errorf("All of a garbled record: %v, %v; want none and the file named", all, err)
	}
	// Collect decides the issue from the tracker and drops the error: the
	// log is where a person learns of it.
	if !strings.Contains(logged.String(), "set aside") || !strings.Contains(logged.String(), "issue=DEMO-1") || !strings.Contains(logged.String(), "quarantined as") {
		t.Errorf("the log: %q; want the record set aside, its issue and where it went", logged.String())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || !strings.Contains(entries[0].Name(), "DEMO-1.json") || entries[0].Name() == "DEMO-1.json" {
		t.Errorf("the directory after: %v; want the record quarantined beside", entries)
	}
	if err := rec.Record("../x", controller.Dispatch{Mode: controller.ModePlan, At: time.Now()}); err == nil {
		t.Error("a record named ../x: no error")
	}
}

// TestDispatchIssueHeld: a dispatch the helper refuses because a worker
// unit it cannot reach holds the issue (issue_held: it will not end by
// itself) is escalated at once, naming the unit to stop, as a new wait
// that reaches a person; the issue then waits for that person, and once
// they removed user-input-needed the phase is dispatched again. (The
// third 30-minute chaos run waited 33 minutes on issue_busy, said only
// in a log.)
func TestDispatchIssueHeld(t *testing.T) {
	ctx := t.Context()
	st, is, tr, agents, src := plannedIssue(t)
	tr.fail = false
	unit := "legion-6f1c2b9e-DEMO-1-plan.service"
	b := &busyAgents{fakeAgents: agents, held: unit}
	src.Sessions = b
	r := controller.Tick(ctx, src, b, discard())
	if r.Failed != 0 || r.Applied != 1 {
		t.Errorf("tick while held: %+v; want the escalation applied", r)
	}
	got, err := st.Issue(ctx, is.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Labels, controller.LabelInputNeeded) || got.Status != is.Status {
		t.Errorf("after the tick: %+v; want %s added, the status kept", got, controller.LabelInputNeeded)
	}
	var asked string
	if len(got.Comments) > 0 {
		asked = got.Comments[len(got.Comments)-1].Text
	}
	if !strings.Contains(asked, "systemctl --user stop '"+unit+"'") || !strings.Contains(asked, "remove the label "+controller.LabelInputNeeded) {
		t.Errorf("Legion's comment: %q; want the unit to stop and what to do then", asked)
	}
	if len(r.Waits) != 1 || !r.Waits[0].New || r.Waits[0].Issue != is.ID {
		t.Errorf("waits: %+v; want one new wait for %s (it reaches a person)", r.Waits, is.ID)
	}
	// Escalated: no dispatch until the person answered.
	controller.Tick(ctx, src, b, discard())
	if n := len(b.calls); n != 1 {
		t.Errorf("calls %q; want no dispatch while the issue waits for a person", b.calls)
	}
	b.held = ""
	if err := st.RemoveLabel(ctx, is.ID, controller.LabelInputNeeded); err != nil {
		t.Fatal(err)
	}
	r = controller.Tick(ctx, src, b, discard())
	if b.calls[len(b.calls)-1] != "dispatch "+is.ID+" implement" {
		t.Errorf("tick once the person stopped the unit: %+v, calls %q; want the implementer dispatched", r, b.calls)
	}
}

// TestDispatchNeedsPerson: a dispatch whose preparation failed for a
// cause only a person can resolve (api.PersonError: the user's
// ~/.claude.json unreadable, which Claude Code does not start on either)
// is escalated at once with the cause, not tried every tick for ever, as
// the fourth 30-minute chaos run's CC-2 was for 32 minutes.
func TestDispatchNeedsPerson(t *testing.T) {
	ctx := t.Context()
	st, is, tr, agents, src := plannedIssue(t)
	tr.fail = false
	cause := errors.New("/home/u/.claude.json: not Claude Code's JSON: invalid JSON at byte 5110; move it aside (`mv '/home/u/.claude.json' '/home/u/.claude.json.corrupt-x'`)")
	b := &busyAgents{fakeAgents: agents, person: cause}
	src.Sessions = b
	r := controller.Tick(ctx, src, b, discard())
	got, err := st.Issue(ctx, is.ID)
	if err != nil {
		t.Fatal(err)
	}
	var asked string
	if len(got.Comments) > 0 {
		asked = got.Comments[len(got.Comments)-1].Text
	}
	if r.Failed != 0 || !slices.Contains(got.Labels, controller.LabelInputNeeded) || !strings.Contains(asked, cause.Error()) ||
		len(r.Waits) != 1 || !r.Waits[0].New {
		t.Errorf("tick: %+v, labels %q, comment %q; want %s, the cause in Legion's comment, a new wait", r, got.Labels, asked, controller.LabelInputNeeded)
	}
	controller.Tick(ctx, src, b, discard())
	if len(b.calls) != 1 {
		t.Errorf("calls %q; want no dispatch while the issue waits for a person", b.calls)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// busyAgents refuses dispatches as the helper does while another worker
// unit of the issue has not ended.
type busyAgents struct {
	*fakeAgents
	busy   bool
	held   string // a unit the helper cannot reach that holds the issue
	person error  // a preparation error only a person can resolve
}

func (b *busyAgents) Dispatch(ctx context.Context, issue string, mode controller.Mode) error {
	if b.person != nil {
		b.calls = append(b.calls, "person "+issue+" "+string(mode))
		return fmt.Errorf("dispatch %s: %w", issue, &api.PersonError{Err: b.person})
	}
	if b.held != "" {
		b.calls = append(b.calls, "held "+issue+" "+string(mode))
		return api.Errorf(api.CodeIssueHeld, "spawn %s-%s: issue %s is held by unit %s: stop it with `systemctl --user stop '%s'`",
			issue, string(mode), issue, b.held, b.held)
	}
	if b.busy {
		b.calls = append(b.calls, "refused "+issue+" "+string(mode))
		return api.Errorf(api.CodeIssueBusy, "spawn %s-%s: issue %s still has a worker", issue, string(mode), issue)
	}
	return b.fakeAgents.Dispatch(ctx, issue, mode)
}

// TestDispatchIssueBusy: a dispatch the helper refuses because the
// issue's last worker unit has not ended (issue_busy) is waited for, not
// a failure (as a start refused for room is not), and the next tick after that unit ended dispatches it.
func TestDispatchIssueBusy(t *testing.T) {
	ctx := t.Context()
	_, is, tr, agents, src := plannedIssue(t)
	tr.fail = false
	b := &busyAgents{fakeAgents: agents, busy: true}
	src.Sessions = b
	var log strings.Builder
	r := controller.Tick(ctx, src, b, slog.New(slog.NewTextHandler(&log, nil)))
	if r.Failed != 0 || !slices.Equal(b.calls, []string{"refused " + is.ID + " implement"}) {
		t.Errorf("tick while busy: %+v, calls %q; want the dispatch refused, not failed (a wait, as for room)", r, b.calls)
	}
	if !strings.Contains(log.String(), "waiting for the issue's last worker to end") {
		t.Errorf("the controller's log:\n%s\nwant it to say it waits for the issue's last worker", log.String())
	}
	b.busy = false
	r = controller.Tick(ctx, src, b, discard())
	if r.Applied != 1 || b.calls[len(b.calls)-1] != "dispatch "+is.ID+" implement" {
		t.Errorf("tick once free: %+v, calls %q; want the implementer dispatched", r, b.calls)
	}
}
