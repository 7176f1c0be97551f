package ptyworker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// hookAgentScript is a shell agent that fires Claude Code's hooks the way
// Claude Code does: it pipes each payload into its hook command ($HOOK_BIN,
// this test binary acting as `legion hook`). One line typed into it is
// one step: work (a prompt), stop (its turn ends), perm (a Bash
// permission request: it prints the hook's answer), notify-perm (a
// permission prompt seen only as a notification, its dialog drawn),
// gemini-own (the Gemini CLI's dialog for one of Legion's own commands,
// seen only as a notification, drawn at once),
// ask1 (a question: it prints the hook's answer), ask1k / ask2k (one or
// two questions whose hook goes away once the next line is typed, as when
// Claude Code kills it: their dialog is drawn), spin (a prompt,
// then a screen that keeps redrawing and no hook event). A dialog
// (fakeDialog) is drawn once the next line typed is "dialog" (Claude Code
// draws its dialogs a moment after their hook returned: keys typed before
// make that line another); "dialog-closed" says when it is gone. The
// steps that open a dialog clear the screen first. Anything else it echoes as got:<line>. With
// TRAP_INT=exit it exits 0 on SIGINT, as Claude Code does; with
// TRAP_INT=ignore it ignores SIGINT.
const hookAgentScript = `
case "$TRAP_INT" in exit) trap 'echo bye; exit 0' INT;; ignore) trap '' INT;; esac
hook() { printf '%s' "$1" | "$HOOK_BIN"; }
dialog() {
  IFS= read -r d
  if [ "$d" != dialog ]; then printf 'got:%s\n' "$d"; return; fi
  stty raw -echo; LEGION_TEST_DIALOG=$1 "$HOOK_BIN"; stty sane
  echo dialog-closed
}
hook '{"hook_event_name":"SessionStart","source":"startup"}'
echo agent-ready
while IFS= read -r l; do
  case "$l" in
  work) hook '{"hook_event_name":"UserPromptSubmit","prompt":"work"}'; echo working;;
  stop) hook '{"hook_event_name":"Stop","last_assistant_message":"All done.","background_tasks":[]}'; echo stopped;;
  perm) printf '\033[2J\033[H'
        hook '{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf x"}}'
        out=$(hook '{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf x"}}')
        printf 'decision:%s\n' "$out";;
  notify-perm) printf '\033[2J\033[H'
        hook '{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf y"}}'
        hook '{"hook_event_name":"Notification","notification_type":"permission_prompt","message":"Claude needs your permission"}'
        echo notified; dialog permission;;
  gemini-own) printf '\033[2J\033[H'
        hook '{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"'"'"'legion'"'"' issue show $LEGION_TEAM $LEGION_ISSUE"}}'
        hook '{"hook_event_name":"Notification","notification_type":"permission_prompt","message":"Tool Confirm Shell Command requires execution"}'
        echo notified-own; stty raw -echo; LEGION_TEST_DIALOG=gemini "$HOOK_BIN"; stty sane; echo dialog-closed;;
  ask1) printf '\033[2J\033[H'; out=$(hook '{"hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion","tool_input":{"questions":[{"question":"Proceed?","header":"Go","options":[{"label":"Yes"},{"label":"No"}],"multiSelect":false}]}}')
        printf 'answers:%s\n' "$out";;
  ask1k) printf '\033[2J\033[H'; printf '%s' '{"hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion","tool_input":{"questions":[{"question":"Proceed?","header":"Go","options":[{"label":"Yes"},{"label":"No"}],"multiSelect":false}]}}' | "$HOOK_BIN" & hp=$!
        IFS= read -r x; kill $hp; wait $hp; echo "dropped-$l"
        echo asked; dialog question:2;;
  ask2k) printf '\033[2J\033[H'; printf '%s' '{"hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion","tool_input":{"questions":[{"question":"Colour?","options":[{"label":"Red"}]},{"question":"Size?","options":[{"label":"S"},{"label":"L"}]}]}}' | "$HOOK_BIN" & hp=$!
        IFS= read -r x; kill $hp; wait $hp; echo "dropped-$l"
        echo asked-two; dialog questions;;
  spin) hook '{"hook_event_name":"UserPromptSubmit","prompt":"spin"}'
        while :; do printf '\r* thinking %s' "$(date +%N)"; sleep 0.05; done;;
  *) printf 'got:%s\n' "$l";;
  esac
done
`

// hookSpec is a spec of kind claude running hookAgentScript, its hook
// command this test binary.
func hookSpec(t *testing.T, env ...string) *proto.Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t, "/bin/sh", "-c", hookAgentScript)
	spec.Agent = proto.AgentClaude
	// GORACE: a race-enabled test binary otherwise sleeps 1 s at exit.
	spec.Env = append([]string{envTestHookRelay + "=1", "HOOK_BIN=" + exe, "GORACE=atexit_sleep_ms=0"}, env...)
	return spec
}

// logBuffer records the worker's log (and passes it to the test's).
type logBuffer struct {
	t  testing.TB
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// has reports whether a line of message msg holds attrs.
func (l *logBuffer) has(msg, attrs string) bool {
	for line := range strings.SplitSeq(l.String(), "\n") {
		if strings.Contains(line, fmt.Sprintf("msg=%q", msg)) && strings.Contains(line, attrs) {
			return true
		}
	}
	return false
}

func bufferLogger(t testing.TB) (*slog.Logger, *logBuffer) {
	lb := &logBuffer{t: t}
	return slog.New(slog.NewTextHandler(lb, nil)), lb
}

// agentIn waits until the agent's state (from info) is want, and returns it.
func agentIn(t *testing.T, c *proto.Client, want api.AgentState) *api.Agent {
	t.Helper()
	return agentInAfter(t, c, want, time.Time{})
}

// agentInAfter waits for the agent state want set by an event after
// since: not one left from before.
func agentInAfter(t *testing.T, c *proto.Client, want api.AgentState, since time.Time) *api.Agent {
	t.Helper()
	var a *api.Agent
	waitFor(t, "agent state "+string(want), func() bool {
		in, err := c.Info(ctxT(t))
		if err != nil {
			t.Fatalf("info: %v", err)
		}
		a = in.Agent
		return a != nil && a.State == want && a.LastEvent.After(since)
	})
	return a
}

// agentEnviron is the environment of the session's agent, as
// /proc/PID/environ holds it: KEY=VALUE entries, each ended by a NUL.
func agentEnviron(t testing.TB, c *proto.Client) string {
	t.Helper()
	in, err := c.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", in.ChildPID))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hookToken reads the hook token from the agent's environment.
func hookToken(t *testing.T, c *proto.Client) string {
	t.Helper()
	for kv := range strings.SplitSeq(agentEnviron(t, c), "\x00") {
		if v, ok := strings.CutPrefix(kv, proto.EnvHookToken+"="); ok {
			return v
		}
	}
	t.Fatalf("the agent's environment has no %s", proto.EnvHookToken)
	return ""
}

func TestHookStateReachesWatchersStatusAndJournal(t *testing.T) {
	ns := listenNotify(t)
	log, logs := bufferLogger(t)
	spec := hookSpec(t)
	tw := startWorker(t, spec, Options{Logger: log, Tick: time.Hour})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Watch(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	agentIn(t, c, api.AgentStarting)
	if err := c.Input(ctxT(t), []byte("work\r")); err != nil {
		t.Fatal(err)
	}
	agentIn(t, c, api.AgentWorking)
	if err := c.Input(ctxT(t), []byte("stop\r")); err != nil {
		t.Fatal(err)
	}
	a := agentIn(t, c, api.AgentIdle)
	if a.LastMessage != "All done." || a.Event != HookStop {
		t.Errorf("idle agent = %+v; want its last message and the Stop event", a)
	}
	waitFor(t, "state events for working and idle", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		var seen []api.AgentState
		for _, st := range s.states {
			if st.Agent != nil {
				seen = append(seen, st.Agent.State)
			}
		}
		return strings.Contains(fmt.Sprint(seen), "working idle")
	})
	waitFor(t, "STATUS= to say idle", func() bool { return ns.last("STATUS") == "implement ENG-1: idle at its prompt" })
	for _, want := range []string{`state=working event=UserPromptSubmit`, `state=idle event=Stop background_tasks=0 last_message="All done."`} {
		if !logs.has("agent state", want) {
			t.Errorf("journal lacks an agent state line with %q", want)
		}
	}
	tok := hookToken(t, c)
	tw.cancel()
	tw.wait()
	for what, text := range map[string]string{"log": logs.String(), "transcript": readTranscript(t, spec)} {
		if strings.Contains(text, tok) {
			t.Errorf("the hook token is in the %s", what)
		}
	}
	if r, err := proto.ReadRegistry(spec.RegistryPath()); err != nil || strings.Contains(fmt.Sprintf("%+v", r), tok) {
		t.Errorf("registry %v holds the hook token (or: %v)", r, err)
	}
}

func TestHookConnectionAuth(t *testing.T) {
	spec := hookSpec(t)
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	agentIn(t, c, api.AgentStarting)
	tok := hookToken(t, c)

	wrong := tw.raw()
	wrong.request(1, proto.MethodHello, proto.HelloParams{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, Token: tok + "x"})
	if m := wrong.next(); m == nil || m.Error == nil || m.Error.Code != proto.CodeUnauthorized {
		t.Errorf("hello with a wrong hook token = %+v; want unauthorized", m)
	}

	h := tw.raw()
	h.request(1, proto.MethodHello, proto.HelloParams{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, Token: tok, Client: "test hook"})
	if m := h.next(); m == nil || m.Error != nil {
		t.Fatalf("hello with the hook token = %+v; want a hook connection", m)
	}
	for i, method := range []string{proto.MethodInfo, proto.MethodInput, proto.MethodAttach, proto.MethodWatch, proto.MethodRespond, proto.MethodEnd, proto.MethodRemove, proto.MethodSignal} {
		id := uint64(10 + i)
		var p any
		switch method {
		case proto.MethodInput:
			p = proto.InputParams{Data: []byte("rm -rf /\r")}
		case proto.MethodSignal:
			p = proto.SignalParams{Signal: "KILL"}
		}
		h.request(id, method, p)
		if m := h.next(); m == nil || m.ID != id || m.Error == nil || m.Error.Code != proto.CodeUnauthorized {
			t.Errorf("%s on a hook connection = %+v; want unauthorized", method, m)
		}
	}
	h.send(proto.FrameData, []byte("typed\r"))
	if m := h.next(); m == nil || m.Error == nil || m.Error.Code != proto.CodeUnauthorized {
		t.Errorf("a data frame on a hook connection = %+v; want unauthorized", m)
	}
	h.send(proto.FrameControl, []byte(`{"id":30,"method":"hook","params":{"hook_event_name":7}}`))
	if m := h.next(); m == nil || m.ID != 30 || m.Error == nil || m.Error.Code != proto.CodeBadRequest || !strings.Contains(m.Error.Message, "hook_event_name") {
		t.Errorf("a malformed hook payload = %+v; want bad_request naming the field", m)
	}
	if a := agentIn(t, c, api.AgentStarting); a.Event != HookSessionStart {
		t.Errorf("after a malformed payload the agent = %+v; want it unchanged", a)
	}
	h.request(31, proto.MethodHook, json.RawMessage(`{"hook_event_name":"UserPromptSubmit","prompt":"x"}`))
	if m := h.next(); m == nil || m.ID != 31 || m.Error != nil || string(m.Result) != "{}" {
		t.Errorf("a hook call = %+v; want an empty result", m)
	}
	agentIn(t, c, api.AgentWorking)

	ctl := tw.raw()
	ctl.hello(spec)
	ctl.request(2, proto.MethodHook, json.RawMessage(`{"hook_event_name":"Stop"}`))
	if m := ctl.next(); m == nil || m.Error == nil || m.Error.Code != proto.CodeUnauthorized {
		t.Errorf("hook on a control connection = %+v; want unauthorized", m)
	}
	if tok == spec.Token {
		t.Error("the hook token is the control token")
	}
}

func TestPermissionHeldAndDecided(t *testing.T) {
	log, logs := bufferLogger(t)
	spec := hookSpec(t)
	tw := startWorker(t, spec, Options{Logger: log})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "agent-ready")
	ctx := ctxT(t)
	if _, err := c.Respond(ctx, proto.RespondParams{Decision: api.DecisionAllow}); !proto.IsCode(err, proto.CodeBadRequest) {
		t.Errorf("respond with a decision while nothing waits = %v; want bad_request", err)
	}

	tests := []struct {
		name   string
		p      proto.RespondParams
		output string
	}{
		{"allowed", proto.RespondParams{Decision: api.DecisionAllow, By: "alice"},
			`decision:{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`},
		{"denied with a reason", proto.RespondParams{Decision: api.DecisionDeny, Text: "not in this repo", By: "bob"},
			`decision:{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"not in this repo"}}}`},
		{"denied without one", proto.RespondParams{Decision: api.DecisionDeny, By: "carol"},
			`"decision":{"behavior":"deny","message":"denied by carol"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.Input(ctx, []byte("perm\r")); err != nil {
				t.Fatal(err)
			}
			a := agentIn(t, c, api.AgentWaitingPermission)
			if a.Tool != "Bash" || a.Command != "rm -rf x" || string(a.ToolInput) != `{"command":"rm -rf x"}` {
				t.Errorf("waiting agent = %+v; want Bash, its command and input", a)
			}
			in, err := c.Info(ctx)
			if err != nil || !in.Waiting || in.Question != "permission to use Bash: rm -rf x" {
				t.Errorf("info = waiting %v, question %q, %v; want waiting for permission to use Bash: rm -rf x", in.Waiting, in.Question, err)
			}
			if _, err := c.Respond(ctx, proto.RespondParams{Text: "yes"}); !proto.IsCode(err, proto.CodeBadRequest) {
				t.Errorf("respond without a decision to a permission request = %v; want bad_request", err)
			}
			res, err := c.Respond(ctx, tt.p)
			if err != nil || res.Delivered != proto.DeliveredHook || res.Agent == nil || res.Agent.State != api.AgentWorking {
				t.Fatalf("respond = %+v, %v; want delivered by the hook, the agent working", res, err)
			}
			s.waitOutput(t, tt.output)
			want := fmt.Sprintf(`by=%s what=%s tool=Bash command="rm -rf x"`, tt.p.By, tt.p.Decision)
			if !logs.has("respond: permission", want) {
				t.Errorf("journal lacks a respond line with %q", want)
			}
		})
	}
}

// TestQuestionAnsweredByHook answers an AskUserQuestion through its held
// PermissionRequest hook call: an allow whose updatedInput holds the
// person's words as the answer to every question (FACTS F3j), no key typed.
func TestQuestionAnsweredByHook(t *testing.T) {
	log, logs := bufferLogger(t)
	tw := startWorker(t, hookSpec(t), Options{Logger: log})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "agent-ready")
	ctx := ctxT(t)
	if err := c.Input(ctx, []byte("ask1\r")); err != nil {
		t.Fatal(err)
	}
	a := agentIn(t, c, api.AgentWaitingAnswer)
	if len(a.Questions) != 1 || a.Questions[0].Question != "Proceed?" {
		t.Fatalf("questions = %+v; want Proceed?", a.Questions)
	}
	if _, err := c.Respond(ctx, proto.RespondParams{Decision: api.DecisionAllow}); !proto.IsCode(err, proto.CodeBadRequest) {
		t.Errorf("respond with a decision to a question = %v; want bad_request", err)
	}
	res, err := c.Respond(ctx, proto.RespondParams{Text: "Yes, but 2 of them", By: "dana"})
	if err != nil || res.Delivered != proto.DeliveredHook || res.Agent == nil || res.Agent.State != api.AgentWorking {
		t.Fatalf("respond = %+v, %v; want delivered by the hook, the agent working", res, err)
	}
	s.waitOutput(t, `answers:{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":{"answers":{"Proceed?":"Yes, but 2 of them"},"questions":[{"question":"Proceed?","header":"Go","options":[{"label":"Yes"},{"label":"No"}],"multiSelect":false}]}}}}`)
	if !logs.has("respond: answer", `by=dana what=answer question=Proceed?`) {
		t.Errorf("journal lacks the answer with who gave it")
	}
}

func TestRespondByKeys(t *testing.T) {
	spec := hookSpec(t)
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "agent-ready")
	ctx := ctxT(t)
	if _, err := c.Respond(ctx, proto.RespondParams{By: "alice"}); !proto.IsCode(err, proto.CodeBadRequest) {
		t.Errorf("respond with neither text nor decision = %v; want bad_request", err)
	}
	tests := []struct {
		name, step string
		state      api.AgentState
		p          proto.RespondParams
		drop       bool   // the hook call goes away (the step reads a line) before the answer
		dialog     bool   // keys wait for a dialog on the screen
		then       string // typed after the answer
		typed      string // what the agent reads
		after      api.AgentState
	}{
		{"one question: the digit of Type something, the text, Enter", "ask1k", api.AgentWaitingAnswer,
			proto.RespondParams{Text: "ship it on Friday, 2 reviewers"}, true, true, "", "answered:ship it on Friday, 2 reviewers", api.AgentWorking},
		{"several questions: Esc, the text, Enter", "ask2k", api.AgentWaitingAnswer,
			proto.RespondParams{Text: "red and large"}, true, true, "", "got:red and large", api.AgentWorking},
		{"a permission dialog without its hook, allowed: 1", "notify-perm", api.AgentWaitingPermission,
			proto.RespondParams{Decision: api.DecisionAllow}, false, true, "", "answered-option:1", api.AgentWorking},
		{"a permission dialog without its hook, denied: Esc and the reason", "notify-perm", api.AgentWaitingPermission,
			proto.RespondParams{Decision: api.DecisionDeny, Text: "not that one"}, false, true, "", "got:not that one", api.AgentWorking},
		{"a permission dialog without its hook, denied without a reason: Esc, the agent idle", "notify-perm", api.AgentWaitingPermission,
			proto.RespondParams{Decision: api.DecisionDeny}, false, true, "", "declined", api.AgentIdle},
		// Working from the prompt on, though this agent sends no hook for it.
		{"idle: its next prompt", "stop", api.AgentIdle, proto.RespondParams{Text: "now the docs"}, false, false, "", "got:now the docs", api.AgentWorking},
		{"working: queued as the next prompt", "work", api.AgentWorking, proto.RespondParams{Text: "and the tests"}, false, false, "", "got:and the tests", api.AgentWorking},
	}
	rc := tw.dial()
	dialogs := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent := time.Now()
			if err := c.Input(ctx, []byte(tt.step+"\r")); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the agent's output:\n%q", s.output())
				}
			})
			agentInAfter(t, c, tt.state, sent)
			if tt.drop {
				if err := c.Input(ctx, []byte("drop\r")); err != nil {
					t.Fatal(err)
				}
				s.waitOutput(t, "dropped-"+tt.step)
			}
			tt.p.By = "alice"
			type result struct {
				res *proto.RespondResult
				err error
			}
			// On a connection of its own, as the helper does: a worker
			// answers a connection's requests in order, and this one waits
			// for the dialog.
			done := make(chan result, 1)
			go func() {
				res, err := rc.Respond(ctx, tt.p)
				done <- result{res, err}
			}()
			if tt.dialog {
				// Typed while respond waits for the dialog: keys typed
				// before it would make this line another one.
				if err := c.Input(ctx, []byte("dialog\r")); err != nil {
					t.Fatal(err)
				}
			}
			r := <-done
			if r.err != nil || r.res.Delivered != proto.DeliveredKeys || r.res.Agent == nil || r.res.Agent.State != tt.after {
				t.Fatalf("respond = %+v, %v; want delivered by keys, the agent %s after", r.res, r.err, tt.after)
			}
			if tt.then != "" {
				if err := c.Input(ctx, []byte(tt.then)); err != nil {
					t.Fatal(err)
				}
			}
			s.waitOutput(t, tt.typed)
			if tt.dialog {
				dialogs++
				waitFor(t, "the dialog closed", func() bool { return strings.Count(s.output(), "dialog-closed") == dialogs })
			}
		})
	}
}

func TestEndCompletesTheSession(t *testing.T) {
	tests := []struct {
		name, trap string
		exit       string // the agent's end
	}{
		{"the agent exits 0 on SIGINT, as Claude Code does", "exit", "code 0"},
		{"an agent that ignores SIGINT is hung up on", "ignore", "signal SIGHUP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := hookSpec(t, "TRAP_INT="+tt.trap)
			tw := startWorker(t, spec, Options{KillGrace: 300 * time.Millisecond, EndGrace: 300 * time.Millisecond})
			c := tw.dial()
			s := follow(c, 0, 0)
			if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
				t.Fatal(err)
			}
			s.waitOutput(t, "agent-ready")
			if err := c.End(ctxT(t), "  "); !proto.IsCode(err, proto.CodeBadRequest) {
				t.Errorf("end without a reason = %v; want bad_request", err)
			}
			if err := c.End(ctxT(t), "worker-done and its turn ended"); err != nil {
				t.Fatalf("end: %v", err)
			}
			if err := tw.wait(); err != nil {
				t.Errorf("Run() after end = %v; want nil (the unit ends as a success)", err)
			}
			r, err := proto.ReadRegistry(spec.RegistryPath())
			if err != nil || r.State != proto.StateCompleted || r.LastExit == nil || r.LastExit.Reason != "completed: worker-done and its turn ended" || r.LastExit.String() != tt.exit {
				t.Errorf("registry = %+v (exit %+v), %v; want completed with the reason, the agent's %s", r, r.LastExit, err, tt.exit)
			}
			if ex := s.exitInfo(); ex == nil || ex.Reason != "completed: worker-done and its turn ended" {
				t.Errorf("exit event = %+v; want the completed reason", ex)
			}
			if tr := readTranscript(t, spec); !strings.Contains(tr, "run 1 ended: worker-done and its turn ended") {
				t.Errorf("transcript lacks the end marker:\n%s", tr)
			}
			// A start on the same spec does not run the agent again.
			if err := Run(ctxT(t), spec, Options{Logger: testLogger(t), Notify: func(string) error { return nil }}); err != nil {
				t.Errorf("Run() of a completed session = %v; want nil, not started", err)
			}
			if r, _ := proto.ReadRegistry(spec.RegistryPath()); r == nil || r.Run != 1 {
				t.Errorf("registry after a second start = %+v; want run 1 still", r)
			}
		})
	}
}

func TestWatchdogByAgentState(t *testing.T) {
	// A hook event takes a process start: stale_after leaves room for a
	// slow machine between two, and startup_grace covers the start.
	const stale = time.Second
	tests := []struct {
		name    string
		steps   []string
		state   api.AgentState
		verdict string
	}{
		{"fed while idle at its prompt", []string{"work", "stop"}, api.AgentIdle, proto.WatchIdle},
		{"fed while a permission waits", []string{"perm"}, api.AgentWaitingPermission, proto.WatchWaiting},
		{"fed while a question waits", []string{"ask1"}, api.AgentWaitingAnswer, proto.WatchWaiting},
		{"stale while working with no sign of life, its screen redrawing", []string{"spin"}, api.AgentWorking, proto.WatchStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := listenNotify(t)
			spec := hookSpec(t)
			spec.StaleAfter, spec.StartupGrace = proto.Duration(stale), proto.Duration(waitTimeout)
			tw := startWorker(t, spec, Options{Tick: 50 * time.Millisecond})
			c := tw.dial()
			agentIn(t, c, api.AgentStarting)
			for _, step := range tt.steps {
				if err := c.Input(ctxT(t), []byte(step+"\r")); err != nil {
					t.Fatal(err)
				}
			}
			a := agentIn(t, c, tt.state)
			waitFor(t, fmt.Sprintf("watchdog %s for three stale periods after the last hook event", tt.verdict), func() bool {
				h, err := c.Health(ctxT(t))
				return err == nil && h.Watchdog == tt.verdict && time.Since(a.LastEvent) > 3*stale
			})
			in, err := c.Info(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if tt.verdict == proto.WatchStale {
				waitFor(t, "WATCHDOG=trigger", func() bool { return ns.count("WATCHDOG=trigger") == 1 })
				if !in.Stale || !strings.Contains(ns.last("STATUS"), "stale, working, no sign of life since") {
					t.Errorf("info stale %v, STATUS=%q; want stale, saying the agent was working", in.Stale, ns.last("STATUS"))
				}
				if in.Head < 100 {
					t.Errorf("the agent printed %d bytes; want a screen that kept redrawing", in.Head)
				}
				return
			}
			if n := ns.count("WATCHDOG=trigger"); n != 0 {
				t.Errorf("WATCHDOG=trigger sent %d times while %s", n, tt.state)
			}
			if in.Stale {
				t.Errorf("info says stale while %s", tt.state)
			}
		})
	}
}

// TestWatchdogCustomAgentByOutput: a custom agent with stale_after (and no
// session file) is fresh while it prints, and stale once it stops.
func TestWatchdogCustomAgentByOutput(t *testing.T) {
	ns := listenNotify(t)
	const stale = 500 * time.Millisecond
	spec := testSpec(t, "/bin/sh", "-c", `i=0; while [ $i -lt 40 ]; do echo tick $i; i=$((i+1)); sleep 0.05; done; echo quiet; exec sleep 600`)
	spec.StaleAfter = proto.Duration(stale)
	tw := startWorker(t, spec, Options{Tick: 50 * time.Millisecond})
	c := tw.dial()
	waitFor(t, "fresh while it prints", func() bool {
		h, err := c.Health(ctxT(t))
		return err == nil && h.Watchdog == proto.WatchFresh
	})
	waitFor(t, "WATCHDOG=trigger once it is quiet", func() bool { return ns.count("WATCHDOG=trigger") == 1 })
	in, err := c.Info(ctxT(t))
	if err != nil || !in.Stale || in.Agent != nil {
		t.Errorf("info = stale %v, agent %+v, %v; want stale, no agent state", in.Stale, in.Agent, err)
	}
}

// TestPermissionHookGone: Claude Code kills a held hook when a person
// answers its dialog in the terminal; the agent is then idle until an
// event says otherwise, and a second held request shows once the first
// is gone.
func TestPermissionHookGone(t *testing.T) {
	spec := hookSpec(t)
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	agentIn(t, c, api.AgentStarting)
	tok := hookToken(t, c)
	hookConn := func(tool string) *rawConn {
		h := tw.raw()
		h.request(1, proto.MethodHello, proto.HelloParams{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, Token: tok})
		if m := h.next(); m == nil || m.Error != nil {
			t.Fatalf("hook hello: %+v", m)
		}
		h.request(2, proto.MethodHook, map[string]any{"hook_event_name": "PermissionRequest", "tool_name": tool, "tool_input": map[string]string{"command": tool + " x"}})
		return h
	}
	first := hookConn("Bash")
	if a := agentIn(t, c, api.AgentWaitingPermission); a.Tool != "Bash" {
		t.Errorf("waiting for %s; want Bash", a.Tool)
	}
	second := hookConn("Edit")
	first.nc.Close()
	waitFor(t, "the second request shown", func() bool {
		in, err := c.Info(ctxT(t))
		return err == nil && in.Agent != nil && in.Agent.State == api.AgentWaitingPermission && in.Agent.Tool == "Edit"
	})
	second.nc.Close()
	if a := agentIn(t, c, api.AgentIdle); a.Event != "dialog answered in the terminal" {
		t.Errorf("agent after its hook went away = %+v", a)
	}
}

// TestCustomAgentHasNoHooks: an agent of another kind gets no hook
// socket or token (not even one its spec or the worker's environment
// holds), and so no hook connection.
func TestCustomAgentHasNoHooks(t *testing.T) {
	t.Setenv(proto.EnvHookToken, "from-the-environment-0123456789")
	spec := testSpec(t, "sleep", "600")
	spec.Env = []string{proto.EnvHookSocket + "=/tmp/elsewhere.sock", proto.EnvHookToken + "=from-the-spec-0123456789"}
	tw := startWorker(t, spec, Options{})
	c := tw.dial()
	if env := agentEnviron(t, c); strings.Contains(env, "LEGION_HOOK_") {
		t.Errorf("the custom agent's environment has hook variables: %q", strings.ReplaceAll(env, "\x00", " "))
	}
	for _, tok := range []string{"from-the-environment-0123456789", "from-the-spec-0123456789", ""} {
		r := tw.raw()
		r.request(1, proto.MethodHello, proto.HelloParams{RPCMajor: proto.RPCMajor, RPCMinor: proto.RPCMinor, Token: tok})
		if m := r.next(); m == nil || m.Error == nil || m.Error.Code != proto.CodeUnauthorized {
			t.Errorf("hello with token %q = %+v; want unauthorized", tok, m)
		}
	}
}
