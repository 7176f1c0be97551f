package activation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/internal/waitfor"
	"github.com/legion-dev/legion/units/sdtest"
)

// hookedAgent is a shell agent of kind claude: it reports its state
// through the real `legion hook` ($LEGION_BIN), as Claude Code does. It
// starts and ends a turn; a line "perm" asks for permission to run a Bash
// command and prints the answer; any other line is a prompt it answers
// with got:<line>. SIGINT ends it with code 0, as it does Claude Code.
const hookedAgent = `
trap 'exit 0' INT
hook() { printf '%s' "$1" | "$LEGION_BIN" hook; }
hook '{"hook_event_name":"SessionStart","source":"startup"}'
hook '{"hook_event_name":"Stop","last_assistant_message":"Ready.","background_tasks":[]}'
while IFS= read -r l; do
  case "$l" in
  perm) out=$(hook '{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf build"}}')
        printf 'decision:%s\n' "$out";;
  *) hook '{"hook_event_name":"UserPromptSubmit","prompt":"x"}'; printf 'got:%s\n' "$l";;
  esac
  hook '{"hook_event_name":"Stop","last_assistant_message":"Done.","background_tasks":[]}'
done
`

// agentIs matches an event about session name whose agent is in state.
func agentIs(name string, state api.AgentState) func(api.SessionEvent) bool {
	return func(ev api.SessionEvent) bool {
		return ev.Session != nil && ev.Session.Name == name && ev.Session.Agent != nil && ev.Session.Agent.State == state
	}
}

// TestRespondAndEnd drives an agent of kind claude through the helper:
// its hook events reach sessions.watch as its Agent; sessions.respond
// types a prompt while it idles and answers its held permission request;
// sessions.end ends it as completed, with no restart.
func TestRespondAndEnd(t *testing.T) {
	ip := startInProcess(t, true, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := ip.client(t)
	es := watchEvents(t, ip.socket, api.WatchArgs{})
	es.next(t, "the snapshot", func(ev api.SessionEvent) bool { return ev.Type == api.EventSnapshot })

	a := testLaunch("hooked", "/bin/sh", "-c", hookedAgent)
	a.Agent, a.Env = "claude", []string{"LEGION_BIN=" + sdtest.LegionBinary(t)}
	if _, err := c.Spawn(ctx, a); err != nil {
		t.Fatal(err)
	}
	ev := es.next(t, "hooked idle at its prompt", agentIs("hooked", api.AgentIdle))
	if ev.Session.Agent.LastMessage != "Ready." {
		t.Errorf("idle event's agent = %+v; want its last message", ev.Session.Agent)
	}

	if _, err := c.Respond(ctx, api.RespondArgs{Name: "hooked", Text: "write the docs", By: "alice"}); err != nil {
		t.Fatalf("respond to an idle agent: %v", err)
	}
	es.next(t, "hooked working on the prompt", agentIs("hooked", api.AgentWorking))
	es.next(t, "hooked idle again", agentIs("hooked", api.AgentIdle))
	waitTranscript(t, c, "hooked", "got:write the docs")

	if _, err := c.Send(ctx, "hooked", "perm", false); err != nil {
		t.Fatal(err)
	}
	ev = es.next(t, "hooked waiting for permission", agentIs("hooked", api.AgentWaitingPermission))
	if s := ev.Session; s.State != api.StateWaitingInput || s.Question != "permission to use Bash: rm -rf build" || s.Agent.Command != "rm -rf build" {
		t.Errorf("waiting event = state %s, question %q, agent %+v; want waiting_input for the Bash command", s.State, s.Question, s.Agent)
	}
	s, err := c.Status(ctx, "hooked")
	if err != nil || s.Agent == nil || s.Agent.State != api.AgentWaitingPermission {
		t.Errorf("status = %+v, %v; want the agent waiting for permission", s.Agent, err)
	}
	for _, bad := range []api.RespondArgs{
		{Name: "hooked"},
		{Name: "hooked", Decision: "maybe"},
		{Name: "hooked", Text: "yes please"}, // a permission needs a decision
	} {
		if _, err := c.Respond(ctx, bad); !errors.Is(err, api.ErrBadRequest) {
			t.Errorf("Respond(%+v) = %v; want bad_request", bad, err)
		}
	}
	if _, err := c.Respond(ctx, api.RespondArgs{Name: "nosuch", Text: "x"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("respond to an unknown session = %v; want not_found", err)
	}
	s, err = c.Respond(ctx, api.RespondArgs{Name: "hooked", Decision: api.DecisionAllow, By: "alice"})
	if err != nil {
		t.Fatalf("respond allow: %v", err)
	}
	if s.Agent == nil || s.Agent.State == api.AgentWaitingPermission {
		t.Errorf("session after the decision = %+v; want the agent no longer waiting", s.Agent)
	}
	waitTranscript(t, c, "hooked", `decision:{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`)
	es.next(t, "hooked idle after the tool", agentIs("hooked", api.AgentIdle))

	if _, err := c.End(ctx, "hooked", ""); !errors.Is(err, api.ErrBadRequest) {
		t.Errorf("end without a reason = %v; want bad_request", err)
	}
	if _, err := c.End(ctx, "hooked", "worker-done and its turn ended"); err != nil {
		t.Fatalf("end: %v", err)
	}
	ev = es.next(t, "hooked exited", is(api.EventExited, "hooked"))
	if x := ev.Session.Exit; x == nil || x.Code == nil || *x.Code != 0 || x.Reason != "completed: worker-done and its turn ended" {
		t.Errorf("exited event's exit = %v; want code 0, completed with the reason", x)
	}
	if s, err := c.Status(ctx, "hooked"); err != nil || s.State != api.StateExited || s.Restarts != 0 {
		t.Errorf("status after end = %+v, %v; want exited, no restart", s, err)
	}
	if _, err := c.End(ctx, "hooked", "again"); !errors.Is(err, api.ErrNotRunning) {
		t.Errorf("end of an ended session = %v; want not_running", err)
	}
	if _, err := c.Respond(ctx, api.RespondArgs{Name: "hooked", Text: "x"}); !errors.Is(err, api.ErrNotRunning) {
		t.Errorf("respond to an ended session = %v; want not_running", err)
	}
}

// waitTranscript waits until the session's transcript holds want.
func waitTranscript(t *testing.T, c *api.Client, name, want string) {
	t.Helper()
	waitfor.Check(t, waitFor, fmt.Sprintf("the transcript of %s to show %q", name, want), func() error {
		var b strings.Builder
		if _, err := c.Logs(t.Context(), api.LogsArgs{Name: name}, &b); err != nil {
			t.Fatalf("logs: %v", err)
		}
		if !strings.Contains(b.String(), want) {
			return fmt.Errorf("transcript:\n%s", b.String())
		}
		return nil
	})
}
