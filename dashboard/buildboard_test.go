package dashboard

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
)

// TestBuildBoard: issues land in their phase's column (others in Other),
// each with its live session if it has one, else the one that ended last;
// sessions of other teams and of no issue are left out.
func TestBuildBoard(t *testing.T) {
	at := func(s int) *time.Time { v := time.Unix(1_700_000_000+int64(s), 0); return &v }
	rep := controller.Report{Issues: []controller.IssueState{
		{Issue: controller.Issue{ID: "D-1", Status: controller.StatusTodo, Labels: []string{}}},
		{Issue: controller.Issue{ID: "D-2", Status: controller.StatusInProgress, Labels: []string{"x"}}, Decision: controller.Decision{Action: controller.ActionNone}},
		{Issue: controller.Issue{ID: "D-3", Status: controller.StatusDone, Labels: []string{}}},
		{Issue: controller.Issue{ID: "D-4", Status: "Backlog", Labels: []string{}}},
	}}
	sessions := []api.Session{
		{Name: "D-2-plan", Team: "t", Issue: "D-2", State: api.StateExited, LastActivity: at(50)},
		{Name: "D-2-implement", Team: "t", Issue: "D-2", State: api.StateRunning, LastActivity: at(10)},
		{Name: "D-3-retro", Team: "t", Issue: "D-3", State: api.StateExited, LastActivity: at(5)},
		{Name: "D-3-finish", Team: "t", Issue: "D-3", State: api.StateExited, LastActivity: at(9)},
		{Name: "D-1-plan", Team: "other", Issue: "D-1", State: api.StateRunning},
		{Name: "adhoc", Team: "t", State: api.StateRunning},
	}
	b := buildBoard("t", rep, sessions)
	got := map[string]string{}
	where := map[string]string{}
	for _, c := range b.Columns {
		for _, is := range c.Issues {
			where[is.ID] = string(c.Status)
			if is.Session != nil {
				got[is.ID] = is.Session.Name
			}
		}
	}
	for _, is := range b.Other {
		where[is.ID] = "other"
	}
	if diff := cmp.Diff(map[string]string{"D-1": "Todo", "D-2": "In Progress", "D-3": "Done", "D-4": "other"}, where); diff != "" {
		t.Errorf("buildBoard columns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"D-2": "D-2-implement", "D-3": "D-3-finish"}, got); diff != "" {
		t.Errorf("buildBoard sessions (-want +got):\n%s", diff)
	}
	if len(b.Columns) != len(Phases) {
		t.Errorf("buildBoard has %d columns; want %d", len(b.Columns), len(Phases))
	}
}

// TestBuildBoardRoom: an issue whose dispatch waits for room carries the
// wait on its card (board.js shows "waiting for room: TEXT").
func TestBuildBoardRoom(t *testing.T) {
	w := &controller.RoomWait{Gate: controller.GateMemory, Text: "1.2 GiB available, agents here peak at 900 MiB"}
	rep := controller.Report{Issues: []controller.IssueState{
		{Issue: controller.Issue{ID: "D-1", Status: controller.StatusTodo, Labels: []string{}},
			Decision: controller.Decision{Action: controller.ActionSkip, Room: w}},
		{Issue: controller.Issue{ID: "D-2", Status: controller.StatusTodo, Labels: []string{}},
			Decision: controller.Decision{Action: controller.ActionDispatchPlanner}},
	}}
	b := buildBoard("t", rep, nil)
	todo := b.Columns[0].Issues
	if len(todo) != 2 || todo[0].Room != w || todo[1].Room != nil {
		t.Errorf("buildBoard Todo column %+v; want D-1 waiting for room (%+v), D-2 not", todo, w)
	}
}
