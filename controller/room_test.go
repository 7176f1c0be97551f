package controller

import (
	"fmt"
	"testing"
)

func TestDecideRoom(t *testing.T) {
	const gib = 1 << 30
	todo := func(id string) Issue { return Issue{ID: id, Status: StatusTodo, Labels: []string{}} }
	reviewing := Issue{ID: "R", Status: StatusNeedsReview, Labels: []string{}, Worker: live(ModeReview)}
	tests := []struct {
		name   string
		room   Room
		wip    int
		issues []Issue
		// want is, per issue, the gate it waits for ("" when admitted) or
		// "wip" for the WIP limit.
		want []Gate
	}{
		{"zero room admits all", Room{}, 0,
			[]Issue{todo("A"), todo("B")}, []Gate{"", ""}},
		{"team session limit counts reviewers", Room{SessionLimit: 2}, 0,
			[]Issue{reviewing, todo("A"), todo("B")}, []Gate{"", "", GateTeamSessions}},
		{"machine limit counts this tick's dispatches", Room{MachineLimit: 3, MachineLive: 1}, 0,
			[]Issue{todo("A"), todo("B"), todo("C")}, []Gate{"", "", GateMachineSessions}},
		{"machine limit already reached by other teams", Room{MachineLimit: 2, MachineLive: 2}, 0,
			[]Issue{todo("A")}, []Gate{GateMachineSessions}},
		{"memory for one agent of two", Room{MemoryKnown: true, Memory: 3 * gib / 2, AgentSize: gib, AgentSizeFrom: SizeLearnt}, 0,
			[]Issue{todo("A"), todo("B")}, []Gate{"", GateMemory}},
		{"memory below one agent", Room{MemoryKnown: true, Memory: gib / 2, AgentSize: gib, AgentSizeFrom: SizeMemoryMax}, 0,
			[]Issue{todo("A")}, []Gate{GateMemory}},
		{"memory unknown gates nothing", Room{Memory: 0, AgentSize: gib}, 0,
			[]Issue{todo("A")}, []Gate{""}},
		{"slice checked while the team's agents run", Room{SliceLimit: 4 * gib, SliceLeft: 3 * gib / 2, AgentSize: gib, AgentSizeFrom: SizeLearnt}, 0,
			[]Issue{reviewing, todo("A"), todo("B")}, []Gate{"", "", GateMemory}},
		// With none of the team's agents running, waiting frees nothing in
		// its slice: one starts, and the slice's limit holds it.
		{"slice full with no agent of the team", Room{SliceLimit: gib, SliceLeft: gib / 2, AgentSize: gib, AgentSizeFrom: SizeLearnt}, 0,
			[]Issue{todo("A"), todo("B")}, []Gate{"", GateMemory}},
		// The WIP limit is checked first; a dispatch it holds takes no room.
		{"wip before room", Room{SessionLimit: 1}, 1,
			[]Issue{todo("A"), todo("B")}, []Gate{"", "wip"}},
		// A live worker is left alone: the room gates only starts.
		{"live workers are not gated", Room{SessionLimit: 1, MemoryKnown: true, AgentSize: gib}, 0,
			[]Issue{reviewing}, []Gate{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := State{WIPLimit: tt.wip, Room: tt.room, Issues: tt.issues}
			ds := Decide(s)
			for i, d := range ds {
				var got Gate
				switch {
				case d.Room != nil:
					got = d.Room.Gate
					if d.Action != ActionSkip || d.MoveTo != "" || len(d.AddLabels)+len(d.RemoveLabels) > 0 {
						t.Errorf("%s waits for room with %+v; want a skip that changes nothing", d.Issue, d)
					}
				case d.Action == ActionSkip && tt.issues[i].Worker == nil:
					got = "wip"
				}
				if got != tt.want[i] {
					t.Errorf("Decide(%+v) for %s = %s (%s); want gate %q", tt.room, d.Issue, d.Action, d.Reason, tt.want[i])
				}
			}
		})
	}
}

func TestRoomReason(t *testing.T) {
	slice := State{Room: Room{SliceLimit: 2 << 30, SliceLeft: 512 << 20, AgentSize: 1 << 30, AgentSizeFrom: SizeMemoryMax},
		Issues: []Issue{{ID: "A", Status: StatusTodo, Worker: live(ModePlan)}, {ID: "B", Status: StatusTodo}}}
	if got, want := Decide(slice)[1].Reason, "waiting for room: 512 MiB available under the team's memory_max of 2 GiB, "+
		"agents here may take up to 1 GiB (agent.memory_max); would dispatch_planner"; got != want {
		t.Errorf("Decide(...)[1].Reason = %q; want %q", got, want)
	}
	s := State{Room: Room{MemoryKnown: true, Memory: 1288490188, AgentSize: 900 << 20, AgentSizeFrom: SizeLearnt},
		Issues: []Issue{{ID: "A", Status: StatusTodo}, {ID: "B", Status: StatusTodo}}}
	d := Decide(s)[1]
	want := "waiting for room: 329 MiB available, agents here peak at 900 MiB; would dispatch_planner"
	if d.Reason != want {
		t.Errorf("Decide(...)[1].Reason = %q; want %q", d.Reason, want)
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 900 << 20: "900 MiB", 1288490188: "1.2 GiB", 3 << 30: "3 GiB", 1 << 50: "1 PiB",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q; want %q", n, got, want)
		}
	}
}

// BenchmarkAdmission is the capacity check's cost in Decide per tick at
// 1,000 Todo issues (every one a dispatch to check): with a room whose
// machine limit and memory admit half of them, against the zero Room
// (the baseline: no check beyond the WIP limit). The room's reading is
// capacity's BenchmarkRoom.
func BenchmarkAdmission(b *testing.B) {
	issues := make([]Issue, 1000)
	for i := range issues {
		issues[i] = Issue{ID: fmt.Sprintf("I-%d", i), Status: StatusTodo, Labels: []string{}}
	}
	for _, bc := range []struct {
		name string
		room Room
	}{
		{"none", Room{}},
		{"room", Room{SessionLimit: 800, MachineLimit: 600, MachineLive: 100, MemoryKnown: true, Memory: 500 << 30,
			SliceLimit: 1 << 40, SliceLeft: 1 << 40, AgentSize: 1 << 30, AgentSizeFrom: SizeLearnt}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := State{Room: bc.room, Issues: issues}
			for b.Loop() {
				Decide(s)
			}
		})
	}
}

// TestRoomWaitIsNotAWait: an issue waiting for room is not among what
// waits for a person (nothing is notified or escalated for it), however
// long it waits.
func TestRoomWaitIsNotAWait(t *testing.T) {
	s := State{Room: Room{SessionLimit: 1}, Issues: []Issue{
		{ID: "A", Status: StatusInProgress, Labels: []string{}, Worker: live(ModeImplement)},
		{ID: "B", Status: StatusTodo, Labels: []string{}},
	}}
	ds := Decide(s)
	if ds[1].Room == nil {
		t.Fatalf("Decide(...)[1] = %+v; want B waiting for room", ds[1])
	}
	if w := waits(s, []TrackedIssue{{ID: "A"}, {ID: "B"}}, ds); len(w) != 0 {
		t.Errorf("waits = %+v; want none", w)
	}
}
