package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Hook events the agent fires, as Claude Code names them.
const (
	EventSessionStart       = "SessionStart"
	EventUserPromptSubmit   = "UserPromptSubmit"
	EventPreToolUse         = "PreToolUse"
	EventPostToolUse        = "PostToolUse"
	EventPostToolUseFailure = "PostToolUseFailure"
	EventPermissionRequest  = "PermissionRequest"
	EventNotification       = "Notification"
	EventStop               = "Stop"
	EventStopFailure        = "StopFailure"
	EventSubagentStart      = "SubagentStart"
	EventSubagentStop       = "SubagentStop"
	EventSessionEnd         = "SessionEnd"
)

// Default hook timeouts, as Claude Code's: ten minutes for a command hook,
// less for the events that hold up a prompt or the exit.
const (
	defaultHookTimeout       = 10 * time.Minute
	promptHookTimeout        = 30 * time.Second
	sessionEndHookTimeout    = 1500 * time.Millisecond
	maxHookOutput            = 1 << 20 // bytes of a hook's stdout kept
	hookOutputCloseWaitDelay = 2 * time.Second
)

// field is one key of a payload; payloads keep their keys in the order of
// Claude Code's own, so that they read like the real samples.
type field struct {
	key   string
	value any
}

// object is a JSON object with ordered keys.
type object []field

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", f.key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Decision is a PermissionRequest hook's answer: its stdout's
// {"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{...}}}.
type Decision struct {
	Behavior  string `json:"behavior"` // "allow" or "deny"
	Message   string `json:"message"`  // deny: what the agent is told
	Interrupt bool   `json:"interrupt"`
	// UpdatedInput, with allow, replaces the tool's input; for
	// AskUserQuestion its answers (question text → answer) answer the
	// questions with no dialog.
	UpdatedInput *struct {
		Questions []any             `json:"questions"`
		Answers   map[string]string `json:"answers"`
	} `json:"updatedInput"`
}

// hookOutput is the JSON a hook may print.
type hookOutput struct {
	HookSpecificOutput *struct {
		HookEventName string    `json:"hookEventName"`
		Decision      *Decision `json:"decision"`
	} `json:"hookSpecificOutput"`
}

// hookRunner runs the hooks of a settings file for one session.
type hookRunner struct {
	settings *Settings // nil: no hooks
	env      []string  // the agent's environment plus CLAUDE_PROJECT_DIR
	cwd      string
	log      func(format string, args ...any) // a line on the agent's terminal
}

// fire runs every hook of event whose matcher matches subject, all at
// once, each with the payload on stdin, and waits for them (each up to its
// timeout, or until ctx ends). It returns the PermissionRequest decision
// the hooks printed, if any: a deny wins over an allow. A hook that fails,
// times out or prints no JSON only gets a line on the terminal, as in
// Claude Code a failing hook does not stop the agent.
func (h *hookRunner) fire(ctx context.Context, event, subject string, payload object) *Decision {
	if h == nil || h.settings == nil {
		return nil
	}
	var hooks []Hook
	for _, m := range h.settings.Hooks[event] {
		if m.matches(subject) {
			hooks = append(hooks, m.Hooks...)
		}
	}
	if len(hooks) == 0 {
		return nil
	}
	stdin, err := json.Marshal(payload)
	if err != nil {
		h.log("hook %s: %v", event, err)
		return nil
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		decision *Decision
	)
	for _, hk := range hooks {
		wg.Add(1)
		go func() { // ends when the hook has ended or been killed
			defer wg.Done()
			d, err := h.run(ctx, event, hk, stdin)
			if err != nil {
				h.log("hook %s %q: %v", event, hk.Command, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if d != nil && (decision == nil || d.Behavior == "deny") {
				decision = d
			}
		}()
	}
	wg.Wait()
	return decision
}

// timeoutFor is a hook's timeout: its own, else the event's default.
func timeoutFor(event string, hk Hook) time.Duration {
	switch {
	case hk.Timeout > 0:
		return hk.Timeout
	case event == EventUserPromptSubmit:
		return promptHookTimeout
	case event == EventSessionEnd:
		return sessionEndHookTimeout
	}
	return defaultHookTimeout
}

// run runs one hook with sh -c in its own process group (killed whole on
// timeout or when ctx ends) and parses what it prints.
func (h *hookRunner) run(ctx context.Context, event string, hk Hook, stdin []byte) (*Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, timeoutFor(event, hk))
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", hk.Command)
	if _, err := os.Stat(h.cwd); err == nil {
		// A finisher's worktree is gone once it is merged: the hook then
		// runs where the agent is, as Claude Code's do.
		cmd.Dir = h.cwd
	}
	cmd.Env = h.env
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout limitedBuffer
	var stderr limitedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = hookOutputCloseWaitDelay
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("killed after its timeout of %v", timeoutFor(event, hk))
	}
	if ctx.Err() != nil {
		return nil, nil // the agent no longer waits for it (a key decided, or it is ending)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		return nil, fmt.Errorf("%w: %s", err, msg)
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if len(out) == 0 || out[0] != '{' {
		return nil, nil // plain text output: shown by Claude Code, no decision
	}
	var o hookOutput
	if err := json.Unmarshal(out, &o); err != nil {
		return nil, fmt.Errorf("output is not valid JSON: %w", err)
	}
	if o.HookSpecificOutput == nil || o.HookSpecificOutput.Decision == nil || event != EventPermissionRequest {
		return nil, nil
	}
	d := o.HookSpecificOutput.Decision
	if d.Behavior != "allow" && d.Behavior != "deny" {
		return nil, fmt.Errorf("decision.behavior %q: want allow or deny", d.Behavior)
	}
	return d, nil
}

// limitedBuffer keeps the first maxHookOutput bytes written to it and
// drops the rest, so a noisy hook cannot fill memory.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxHookOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

var _ io.Writer = (*limitedBuffer)(nil)
