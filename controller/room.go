package controller

import (
	"context"
	"fmt"
)

// Room is what the machine and the team have room for at the time of the
// collection: the inputs of the capacity gate that Decide applies to every
// decision that starts an agent, beside the WIP limit. A zero Room admits
// everything.
type Room struct {
	// SessionLimit caps the team's live agents in every mode, reviewers
	// included (session_limit); 0 is no cap.
	SessionLimit int `json:"session_limit,omitempty"`
	// MachineLimit caps the live agents of all teams on this machine
	// ([helper] session_limit); MachineLive is how many the helper lists
	// now. 0 is no cap.
	MachineLimit int `json:"machine_limit,omitempty"`
	MachineLive  int `json:"machine_live,omitempty"`
	// Memory is the machine's MemAvailable in bytes; MemoryKnown false:
	// it could not be read, and memory gates nothing.
	Memory      uint64 `json:"memory,omitempty"`
	MemoryKnown bool   `json:"memory_known,omitempty"`
	// SliceLimit is the MemoryMax= of the team's slice (memory_max) as its
	// cgroup says, and SliceLeft what its units leave under it; 0: no
	// limit, or it could not be read. The slice is checked only while an
	// agent of the team runs: with none, nothing in the slice would free
	// room by waiting, so one agent starts and the limit holds it.
	SliceLimit uint64 `json:"slice_limit,omitempty"`
	SliceLeft  uint64 `json:"slice_left,omitempty"`
	// AgentSize is the memory one more agent of the team is expected to
	// take; AgentSizeFrom says where the figure comes from.
	AgentSize     uint64   `json:"agent_size,omitempty"`
	AgentSizeFrom SizeFrom `json:"agent_size_from,omitempty"`
}

// SizeFrom says where a team's expected agent size comes from.
type SizeFrom string

// Sources of the expected agent size, in the order they are preferred.
const (
	SizeLearnt    SizeFrom = "learnt"           // the peak memory of the team's finished agents
	SizeMemoryMax SizeFrom = "agent.memory_max" // nothing learnt yet: the most an agent may take
	SizeDefault   SizeFrom = "default"          // nothing learnt, no agent.memory_max
)

// RoomSource reads the room there is for the team's agents, once per
// collection.
type RoomSource interface {
	Room(ctx context.Context) (Room, error)
}

// Gate names what a dispatch waits for.
type Gate string

// Gates of the capacity check.
const (
	GateTeamSessions    Gate = "session_limit"         // the team's session_limit
	GateMachineSessions Gate = "machine_session_limit" // [helper] session_limit
	GateMemory          Gate = "memory"                // not enough memory for one more agent
)

// RoomWait says why a decision that would start an agent waits for room.
// An issue that waits for room is not stalled: nothing is wrong with it,
// and it is dispatched as soon as there is room.
type RoomWait struct {
	Gate Gate `json:"gate"`
	// Text says it for people, e.g. "1.2 GiB available, agents here peak
	// at 900 MiB".
	Text string `json:"text"`
}

// admission applies Room to one tick's decisions in issue order, counting
// what each admitted dispatch takes.
type admission struct {
	room       Room
	teamLive   int    // live agents of the team, admitted ones included
	reserved   uint64 // memory taken by this tick's admitted dispatches
	admittedAt int    // dispatches admitted in this tick
}

func newAdmission(s State) *admission {
	a := &admission{room: s.Room}
	for _, is := range s.Issues {
		if is.Worker != nil {
			a.teamLive++
		}
	}
	return a
}

// check returns why one more agent cannot start now, or nil.
func (a *admission) check() *RoomWait {
	r := a.room
	if r.SessionLimit > 0 && a.teamLive >= r.SessionLimit {
		return &RoomWait{Gate: GateTeamSessions,
			Text: fmt.Sprintf("session_limit %d reached (%d of the team's agents live)", r.SessionLimit, a.teamLive)}
	}
	if live := r.MachineLive + a.admittedAt; r.MachineLimit > 0 && live >= r.MachineLimit {
		return &RoomWait{Gate: GateMachineSessions,
			Text: fmt.Sprintf("the machine's session_limit %d reached (%d agents of all teams live)", r.MachineLimit, live)}
	}
	if r.MemoryKnown && r.AgentSize > 0 {
		if left := minus(r.Memory, a.reserved); left < r.AgentSize {
			return &RoomWait{Gate: GateMemory, Text: fmt.Sprintf("%s available, %s", Bytes(left), r.sizeText())}
		}
	}
	if r.SliceLimit > 0 && r.AgentSize > 0 && a.teamLive > 0 {
		if left := minus(r.SliceLeft, a.reserved); left < r.AgentSize {
			return &RoomWait{Gate: GateMemory, Text: fmt.Sprintf("%s available under the team's memory_max of %s, %s",
				Bytes(left), Bytes(r.SliceLimit), r.sizeText())}
		}
	}
	return nil
}

// minus is a-b, or 0 when b is more.
func minus(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// admit counts one more agent as started.
func (a *admission) admit() {
	a.teamLive++
	a.admittedAt++
	a.reserved += a.room.AgentSize
}

// sizeText says what an agent of the team is expected to take, and why.
func (r Room) sizeText() string {
	switch r.AgentSizeFrom {
	case SizeLearnt:
		return "agents here peak at " + Bytes(r.AgentSize)
	case SizeMemoryMax:
		return "agents here may take up to " + Bytes(r.AgentSize) + " (agent.memory_max)"
	}
	return "an agent is taken to need " + Bytes(r.AgentSize) + " until one of the team's has finished"
}

// Bytes renders n bytes for people, base 1024: "900 MiB", "1.2 GiB".
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	suffix := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[exp]
	if v >= 100 || v == float64(int64(v)) {
		return fmt.Sprintf("%.0f %s", v, suffix)
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
