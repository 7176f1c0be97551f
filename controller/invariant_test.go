package controller

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
)

// TestDecideNoSilentStall checks, over every status × label subset ×
// worker situation × review outcome, that after any loss an issue that is
// not Done never just waits: the decision starts or resumes a worker, or a
// worker is live and working, or the issue waits on a human (it carries
// user-input-needed, or the decision adds it with a comment saying what is
// awaited), or a failed unit is reported (the reason names the unit and
// its cause). Statuses Legion does not act on (Backlog, Canceled) are left
// alone by design and are not checked. With no room for another agent,
// each start waits for room instead, saying so, and nothing else changes.
func TestDecideNoSilentStall(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	statuses := []Status{StatusTodo, StatusInProgress, StatusNeedsReview, StatusRetro}
	labels := []string{LabelWorkerDone, LabelChangesRequest, LabelApproved, LabelFinishing, LabelInputNeeded, LabelFeedbackGiven}
	modes := []Mode{ModePlan, ModeImplement, ModeReview, ModeRetro, ModeFinish}

	type situation struct {
		name   string
		worker *Worker
		failed []FailedWorker
	}
	// An exited worker (it ended, was killed, the machine rebooted, its
	// user logged out without linger) leaves no trace in Issue: it is
	// listed as its own situation so that each loss is named, and decides
	// as "none" does.
	situations := []situation{{name: "no worker"}}
	for _, m := range modes {
		situations = append(situations,
			situation{name: "live " + string(m), worker: live(m)},
			situation{name: "exited " + string(m)},
			situation{name: "failed " + string(m), failed: []FailedWorker{{Mode: m, Session: "DEMO-1-" + string(m),
				Unit: `legion-0123abcd-DEMO\x2d1-` + string(m) + ".service", Cause: "start limit hit after 5 restarts"}}},
			situation{name: "asking " + string(m), worker: &Worker{Mode: m, Session: "DEMO-1-" + string(m), Blocked: true, Question: "Which DB?"}},
		)
		// What the agent does, from its hooks.
		agent := func(a api.Agent) *Worker {
			return &Worker{Mode: m, Session: "DEMO-1-" + string(m), Agent: &a}
		}
		question := []api.Question{{Question: "Which DB?", Options: []string{"Postgres", "SQLite"}}}
		situations = append(situations,
			situation{name: "working " + string(m), worker: agent(api.Agent{State: api.AgentWorking, Since: now.Add(-time.Hour)})},
			situation{name: "idle just now " + string(m), worker: agent(api.Agent{State: api.AgentIdle, Since: now, LastMessage: "Done?"})},
			situation{name: "idle for long " + string(m), worker: agent(api.Agent{State: api.AgentIdle, Since: now.Add(-time.Hour), LastMessage: "Done?"})},
			situation{name: "idle with a subagent " + string(m), worker: agent(api.Agent{State: api.AgentIdle, Since: now.Add(-time.Hour), BackgroundTasks: 1})},
			situation{name: "permission " + string(m), worker: agent(api.Agent{State: api.AgentWaitingPermission, Since: now, Tool: "Bash", Command: "rm -rf build"})},
			situation{name: "question " + string(m), worker: agent(api.Agent{State: api.AgentWaitingAnswer, Since: now, Questions: question})},
			situation{name: "rate limited " + string(m), worker: agent(api.Agent{State: api.AgentAPIError, Since: now, Error: "rate limited"})},
		)
	}
	type source struct {
		name         string
		labelReviews bool
		review       Review // with PR reviews; label reviews derive it from the labels
	}
	sources := []source{
		{name: "label reviews", labelReviews: true},
		{name: "PR reviews, no outcome"},
		{name: "PR reviews, approved", review: ReviewApproved},
		{name: "PR reviews, changes requested", review: ReviewChangesRequested},
	}

	cases := 0
	for _, st := range statuses {
		for bits := range 1 << len(labels) {
			var ls []string
			for k, l := range labels {
				if bits&(1<<k) != 0 {
					ls = append(ls, l)
				}
			}
			for _, sit := range situations {
				for _, src := range sources {
					is := Issue{ID: "DEMO-1", Status: st, Labels: ls, Worker: sit.worker, Failed: sit.failed, Feedback: "Use Postgres"}
					is.Review = src.review
					if src.labelReviews {
						is.Review = reviewsFromLabels([]TrackedIssue{{ID: is.ID, Labels: ls}})[is.ID]
					}
					d := Decide(State{LabelReviews: src.labelReviews, Issues: []Issue{is}, Now: now, IdleGrace: time.Minute})[0]
					cases++
					if why := stalls(is, d); why != "" {
						t.Errorf("%s [%s] with %s, %s: %s: decision %s (%q)",
							st, strings.Join(ls, ","), sit.name, src.name, why, d.Action, d.Reason)
					}
					// With no room, a start waits for room, saying so,
					// and every other decision is the same: room holds
					// back only starts, and a wait for room is not a stall.
					full := Decide(State{LabelReviews: src.labelReviews, Issues: []Issue{is}, Now: now, IdleGrace: time.Minute,
						Room: Room{MachineLimit: 1, MachineLive: 1}})[0]
					switch {
					case startsWorker(d.Action) && (full.Room == nil || full.Action != ActionSkip || !strings.HasPrefix(full.Reason, "waiting for room: ")):
						t.Errorf("%s [%s] with %s, %s: no room: %s (%q), room %v; want a skip waiting for room instead of %s",
							st, strings.Join(ls, ","), sit.name, src.name, full.Action, full.Reason, full.Room, d.Action)
					case !startsWorker(d.Action) && !reflect.DeepEqual(full, d):
						t.Errorf("%s [%s] with %s, %s: no room changed %+v to %+v; want it unchanged (it starts nothing)",
							st, strings.Join(ls, ","), sit.name, src.name, d, full)
					}
				}
			}
		}
	}
	t.Logf("%d cases checked", cases)
}

// stalls returns why decision d leaves issue is stalled silently, or "".
func stalls(is Issue, d Decision) string {
	if d.Reason == "" {
		return "the decision gives no reason"
	}
	if slices.Contains(d.AddLabels, LabelInputNeeded) && d.Comment == "" {
		return "the decision adds " + LabelInputNeeded + " without a comment saying what is awaited"
	}
	switch {
	case startsWorker(d.Action):
		return ""
	case d.Action == ActionRelayFeedback && is.Worker != nil:
		return "" // the answer reaches the live agent, which goes on
	case d.Action == ActionEndWorker:
		return "" // its phase is done: the next tick moves the issue on
	case is.Worker != nil && is.Worker.Agent != nil && is.Worker.Agent.State == api.AgentIdle &&
		is.HasLabel(LabelWorkerDone) && is.Worker.Agent.BackgroundTasks == 0 && !is.HasLabel(LabelInputNeeded):
		return "the live agent is done and idle but is not ended"
	case is.Worker != nil && is.Worker.Agent != nil && is.Worker.Agent.State == api.AgentIdle &&
		!is.HasLabel(LabelWorkerDone) && !is.HasLabel(LabelInputNeeded) && !slices.Contains(d.AddLabels, LabelInputNeeded):
		if is.Worker.Agent.Since.Before(time.Date(2026, 11, 24, 11, 59, 0, 0, time.UTC)) {
			return "the live agent's turn ended unfinished past the grace and is not escalated"
		}
		return "" // within the grace: escalated on a later tick
	case is.Worker != nil && is.Worker.Agent != nil && is.Worker.Agent.State.WaitsOnHuman() &&
		!is.HasLabel(LabelInputNeeded) && !slices.Contains(d.AddLabels, LabelInputNeeded):
		return fmt.Sprintf("the live agent waits on a human (%s) but is not escalated", is.Worker.Agent.State)
	case is.Worker != nil && !is.Worker.Blocked:
		return ""
	case slices.Contains(d.AddLabels, LabelInputNeeded):
		return ""
	case is.HasLabel(LabelInputNeeded) && !slices.Contains(d.RemoveLabels, LabelInputNeeded):
		return ""
	}
	for _, f := range is.Failed {
		if strings.Contains(d.Reason, f.Unit) && strings.Contains(d.Reason, f.Cause) {
			return ""
		}
	}
	if is.Worker != nil {
		return fmt.Sprintf("the live %s agent asks a question that is neither escalated nor answered", is.Worker.Mode)
	}
	return "no live worker, none started, no human asked, no failed unit reported"
}
