package proto

// What a worker tells of its agent, for people and watchers.

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legion-dev/legion/activation/api"
)

// The agent's environment variables for `legion hook`.
const (
	EnvHookSocket = "LEGION_HOOK_SOCKET"
	EnvHookToken  = "LEGION_HOOK_TOKEN"
)

// Watchdog verdicts, in HealthResult.Watchdog.
const (
	WatchFresh     = "fresh"     // a sign of life came within stale_after
	WatchGrace     = "grace"     // within startup_grace of the start
	WatchWaiting   = "waiting"   // the agent waits on a human
	WatchIdle      = "idle"      // the agent idles at its prompt or is ending (from its hooks)
	WatchStale     = "stale"     // none of the above: the watchdog is not fed
	WatchUnwatched = "unwatched" // no liveness configured: fed while the agent runs
)

// SameAgentState reports whether a and b (nil: no state) say the same to
// a watcher: the times and the event's name aside. The worker pushes a
// state event when it is false.
func SameAgentState(a, b *api.Agent) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.State == b.State && a.Tool == b.Tool && a.Command == b.Command &&
		bytes.Equal(a.ToolInput, b.ToolInput) &&
		slices.EqualFunc(a.Questions, b.Questions, func(x, y api.Question) bool {
			return x.Question == y.Question && x.Header == y.Header && x.MultiSelect == y.MultiSelect && slices.Equal(x.Options, y.Options)
		}) &&
		a.LastMessage == b.LastMessage && a.BackgroundTasks == b.BackgroundTasks && a.Error == b.Error &&
		((a.ResetAt == nil) == (b.ResetAt == nil)) && (a.ResetAt == nil || a.ResetAt.Equal(*b.ResetAt))
}

// DescribeAgent is the agent's state for people, as STATUS= and `legion
// sessions` show it: "working (Bash)", "idle at its prompt", "waiting for
// permission: Bash rm -rf x", ...; "-" for nil (no hook event seen).
func DescribeAgent(a *api.Agent) string {
	if a == nil {
		return "-"
	}
	switch a.State {
	case api.AgentWorking:
		if a.Tool != "" {
			return "working (" + a.Tool + ")"
		}
		return "working"
	case api.AgentIdle:
		if a.BackgroundTasks > 0 {
			return fmt.Sprintf("idle at its prompt, %d background tasks running", a.BackgroundTasks)
		}
		return "idle at its prompt"
	case api.AgentWaitingPermission:
		return strings.TrimSpace("waiting for permission: " + a.Tool + " " + a.Command)
	case api.AgentWaitingAnswer:
		return "waiting for an answer: " + WaitText(a)
	case api.AgentAPIError:
		t := "failed at the API: " + a.Error
		if a.ResetAt != nil {
			t += " (the limit lifts at " + a.ResetAt.Local().Format(time.TimeOnly) + ")"
		}
		return t
	}
	return string(a.State)
}

// WaitText says what an agent that waits on a human waits for (a
// session's Question).
func WaitText(a *api.Agent) string {
	switch a.State {
	case api.AgentWaitingPermission:
		t := "permission to use " + cmp.Or(a.Tool, "a tool")
		if a.Command != "" {
			t += ": " + a.Command
		}
		return t
	case api.AgentWaitingAnswer:
		if len(a.Questions) == 0 {
			return "an answer to its question"
		}
		t := a.Questions[0].Question
		if n := len(a.Questions) - 1; n > 0 {
			t += fmt.Sprintf(" (and %d more questions)", n)
		}
		return t
	case api.AgentAPIError:
		t := "its turn failed at the API: " + a.Error
		if a.ResetAt != nil {
			t += "; the limit lifts at " + a.ResetAt.Format(time.RFC3339)
		}
		return t
	}
	return ""
}
