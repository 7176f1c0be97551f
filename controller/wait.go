package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/legion-dev/legion/activation/api"
)

// WaitKind says what a person is asked for.
type WaitKind string

// Kinds of a Wait, named as the dashboard's needs-you queue names them.
const (
	WaitQuestion   WaitKind = "question"   // the agent asks (AskUserQuestion)
	WaitPermission WaitKind = "permission" // the agent waits to use a tool
	WaitTurn       WaitKind = "turn"       // its turn ended without worker-done
	WaitRateLimit  WaitKind = "rate_limit" // its turn failed at the model's API
	WaitUnfinished WaitKind = "unfinished" // the finisher ended, the issue is open
	WaitInput      WaitKind = "input"      // user-input-needed, with no agent waiting
	WaitFailed     WaitKind = "failed"     // systemd gave up on a worker
	WaitBudget     WaitKind = "budget"     // the issue's agents crossed its budget
)

// Wait is one thing that waits for a person after a tick: an escalated
// issue (user-input-needed and no user-feedback-given yet) or a worker
// that failed for good.
type Wait struct {
	// Key names the wait for as long as it lasts: the issue and
	// "input" for an escalation (one per episode of user-input-needed:
	// Decide escalates an issue again only after the label went), the
	// issue and the failed unit for a failed worker. It never depends on
	// text a tracker may rewrite.
	Key   string   `json:"key"`
	Issue string   `json:"issue"`
	Title string   `json:"title,omitempty"`
	Kind  WaitKind `json:"kind"`
	// Asked is what the person is asked: the escalation's comment, or
	// what a failed worker needs. AskedHash is its SHA-256 (hex), the
	// escalation's identity beside Since.
	Asked     string    `json:"asked"`
	AskedHash string    `json:"asked_hash"`
	Since     time.Time `json:"since"`
	// New says this tick's own decision escalated it: a new episode even
	// when Key was waiting before (an answer the agent was gone for,
	// escalated again in the same tick).
	New bool `json:"new,omitempty"`
}

// Waits are what waits for a person in st as collected (tracked are the
// tracker's issues it was collected from): every issue that carries
// user-input-needed without user-feedback-given, and every failed worker.
// The agent controller's host announces these, since its agent escalates
// by itself.
func Waits(st State, tracked []TrackedIssue) []Wait { return waits(st, tracked, nil) }

// waits are what waits for a person after a tick: the escalations of the
// decisions applied in it (applied), then, from the state collected before
// it, every other issue that carries user-input-needed without
// user-feedback-given (its Asked is Legion's newest comment in tracked)
// and every failed worker.
func waits(st State, tracked []TrackedIssue, applied []Decision) []Wait {
	escalated := map[string]Decision{}
	for _, d := range applied {
		if escalates(d) {
			escalated[d.Issue] = d
		}
	}
	byID := make(map[string]*TrackedIssue, len(tracked))
	for i := range tracked {
		byID[tracked[i].ID] = &tracked[i]
	}
	var out []Wait
	for _, is := range st.Issues {
		if d, ok := escalated[is.ID]; ok {
			out = append(out, newWait(is, "input", kindOf(d.Action), d.Comment, st.Now, true))
		} else if is.Status != StatusDone && is.HasLabel(LabelInputNeeded) && !is.HasLabel(LabelFeedbackGiven) {
			c := lastLegion(byID[is.ID])
			since := c.Time
			if since.IsZero() {
				since = st.Now
			}
			out = append(out, newWait(is, "input", liveKind(is), c.Text, since, false))
		}
		for _, f := range is.Failed {
			asked := fmt.Sprintf("The %s worker failed for good (%s). See `journalctl --user -u '%s'`, "+
				"then `systemctl --user reset-failed '%s'` lets Legion start it again.", f.Mode, f.why(), f.Unit, f.Unit)
			out = append(out, newWait(is, "failed:"+f.Unit, WaitFailed, asked, st.Now, false))
		}
	}
	return out
}

func newWait(is Issue, what string, kind WaitKind, asked string, since time.Time, isNew bool) Wait {
	h := sha256.Sum256([]byte(asked))
	return Wait{Key: is.ID + "/" + what, Issue: is.ID, Title: is.Title, Kind: kind, Asked: asked,
		AskedHash: hex.EncodeToString(h[:]), Since: since, New: isNew}
}

// escalates reports whether d hands its issue to a person.
func escalates(d Decision) bool {
	for _, l := range d.AddLabels {
		if l == LabelInputNeeded {
			return true
		}
	}
	return false
}

// kindOf is the wait an escalating action starts.
func kindOf(a Action) WaitKind {
	switch a {
	case ActionEscalateBlocked:
		return WaitQuestion
	case ActionEscalatePermission:
		return WaitPermission
	case ActionEscalateIdle:
		return WaitTurn
	case ActionEscalateAPIError:
		return WaitRateLimit
	case ActionEscalateUnfinished:
		return WaitUnfinished
	case ActionEscalateBudget:
		return WaitBudget
	}
	return WaitInput
}

// liveKind is the wait of an escalated issue as its live agent shows it.
func liveKind(is Issue) WaitKind {
	w := is.Worker
	switch {
	case w.agentIn(api.AgentWaitingPermission):
		return WaitPermission
	case w.agentIn(api.AgentAPIError):
		return WaitRateLimit
	case w != nil && (w.Blocked || w.agentIn(api.AgentWaitingAnswer)):
		return WaitQuestion
	case w.agentIn(api.AgentIdle):
		return WaitTurn
	case is.Status == StatusRetro && is.HasLabel(LabelFinishing):
		return WaitUnfinished
	}
	return WaitInput
}

// lastLegion is Legion's newest comment on t (nil: none), or a zero one.
func lastLegion(t *TrackedIssue) Comment {
	if t == nil {
		return Comment{}
	}
	for i := len(t.Comments) - 1; i >= 0; i-- {
		if t.Comments[i].Author == AuthorLegion {
			return t.Comments[i]
		}
	}
	return Comment{}
}
