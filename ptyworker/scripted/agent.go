package scripted

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/legion-dev/legion/agent/claude/claudecode"
)

// Environment variables the agent reads its script from.
const (
	EnvScript     = "LEGION_SCRIPT"      // the script text
	EnvScriptFile = "LEGION_SCRIPT_FILE" // a file holding the script
)

// Defaults of the settings steps.
const (
	defaultTick             = 200 * time.Millisecond // work and subagent lines
	defaultPermissionNotify = 6 * time.Second        // Notification permission_prompt after a dialog opens
	defaultIdleNotify       = 60 * time.Second       // Notification idle_prompt after a turn ends
)

// prefix starts every line the agent prints about itself.
const prefix = "legion-scripted: "

// exitCommand ends the agent at its prompt, as in Claude Code.
const exitCommand = "/exit"

// ExitError ends the agent with an exit code (exit and crash steps, a
// signal, a session that cannot start). The command running Main prints
// Message, if any, on stderr and exits with Code, which may be 0 (SIGINT).
type ExitError struct {
	Code    int
	Message string
}

func (e *ExitError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("scripted agent exits with code %d", e.Code)
}

// Options is one run of the agent.
type Options struct {
	Args     Args
	Script   string    // script text; "" runs the default script
	Settings *Settings // from Args.Settings; nil for none
	Home     string    // for ~/.claude
	Cwd      string    // the working directory, as Claude Code would see it
	Stdin    io.Reader
	Terminal bool // Stdin is a terminal in raw mode (see readKeys)
	Stdout   io.Writer
	Getenv   func(string) string // for $NAME in scripts; nil means os.Getenv
	Environ  []string            // the hooks' environment; nil means os.Environ()
}

// Exit codes of the signals that end Claude Code: SIGINT ends it as a
// success, at once, even mid-turn.
var signalExit = map[os.Signal]int{syscall.SIGINT: 0, syscall.SIGTERM: 143, syscall.SIGHUP: 129}

// signalCause is the cause of the run's cancellation by a signal.
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return "got " + s.sig.String() }

// Main runs the agent as a command: args as Claude Code takes them, the
// script from $LEGION_SCRIPT or $LEGION_SCRIPT_FILE, $HOME and the physical
// working directory; when stdin is a terminal it reads it key by key. It
// handles SIGINT, SIGTERM and SIGHUP as Claude Code does (exit 0, 143,
// 129). It returns ErrHelp after printing usage for --help, an *ExitError
// for an exit code the agent chose (print its Message, exit with its Code,
// even 0), other errors for an agent that failed, and ctx.Err() when ctx
// ends first.
func Main(ctx context.Context, args []string, stdin *os.File, stdout io.Writer) error {
	a, err := ParseArgs(args)
	if errors.Is(err, ErrHelp) {
		fmt.Fprint(stdout, Usage)
		return err
	}
	if err != nil {
		return err
	}
	o := Options{Args: a, Stdin: stdin, Stdout: stdout}
	if a.Settings != "" {
		if o.Settings, err = ReadSettings(a.Settings); err != nil {
			return err
		}
	}
	o.Script = os.Getenv(EnvScript)
	if o.Script == "" {
		if path := os.Getenv(EnvScriptFile); path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("read script: %w", err)
			}
			o.Script = string(b)
		}
	}
	if o.Home, err = os.UserHomeDir(); err != nil {
		return fmt.Errorf("find home directory: %w", err)
	}
	if o.Cwd, err = syscall.Getwd(); err != nil { // physical, as Node's process.cwd()
		return fmt.Errorf("find working directory: %w", err)
	}

	// The signals: recorded by the goroutine, which ends once sigs is
	// closed below (after signal.Stop no signal is sent on it).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var got os.Signal
	caught := make(chan struct{})
	go func() {
		defer close(caught)
		for s := range sigs {
			if got == nil {
				got = s
				cancel(signalCause{s})
			}
		}
	}()
	restore, tty := rawTerminal(stdin)
	defer restore()
	o.Terminal = tty
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, o) }() // ends with Run; left behind only if a signal's exit has to go first
	select {
	case err = <-ran:
	case <-ctx.Done():
		// A signal (or the caller) ends the agent at once: Run gets the
		// time of its SessionEnd hook and a little more, no longer.
		t := time.NewTimer(sessionEndHookTimeout + time.Second)
		defer t.Stop()
		select {
		case err = <-ran:
		case <-t.C:
			err = context.Cause(ctx)
		}
	}
	signal.Stop(sigs)
	close(sigs)
	<-caught
	if got != nil {
		return &ExitError{Code: signalExit[got]}
	}
	return err
}

// Run runs the agent: it starts the session, runs the script for the
// prompt, if any, and then waits at its prompt for the next one, until
// /exit, the end of its input, an exit or crash step, or ctx ends. See
// Main for the errors.
//
// Reading the terminal starts a goroutine reading o.Stdin (see readKeys
// for its end); a process running Run exits right after it.
func Run(ctx context.Context, o Options) error {
	if o.Script == "" {
		o.Script = "say Got it: $PROMPT_TITLE"
	}
	steps, err := parseScript(o.Script)
	if err != nil {
		return err
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Stdin == nil {
		o.Stdin = strings.NewReader("")
	}
	path := claudecode.SessionFile(o.Home, o.Cwd, o.Args.SessionID)
	sess, once, err := openSession(path, o.Args.SessionID, o.Cwd, o.Args.Resume)
	if err != nil {
		return err
	}
	defer sess.Close()
	a := &agent{
		o: o, steps: steps, sess: sess, path: path, once: once,
		tick: defaultTick, permNotify: defaultPermissionNotify, idleNotify: defaultIdleNotify,
		policy: newPolicy(o.Args, o.Settings),
		term:   &terminal{in: o.Stdin, tty: o.Terminal, out: o.Stdout},
		bgWake: make(chan struct{}, 1),
	}
	a.hooks = &hookRunner{
		settings: o.Settings, cwd: o.Cwd, log: a.say,
		env: append(append([]string(nil), o.Environ...), "CLAUDE_PROJECT_DIR="+o.Cwd),
	}
	defer a.bgWG.Wait()
	ctx, stopBackground := context.WithCancel(ctx)
	defer stopBackground() // before the Wait above: subagents end with ctx

	mode, source := "new", "startup"
	if o.Args.Resume {
		mode, source = "resumed", "resume"
	}
	a.say("session %s (%s) file %s", o.Args.SessionID, mode, path)
	a.fire(ctx, EventSessionStart, source, object{{"source", source}, {"model", model}})
	err = a.loop(ctx)
	var crash *crashError
	if errors.As(err, &crash) {
		return crash.err // no SessionEnd: the process dies
	}
	reason := "other"
	if errors.Is(err, errPromptExit) {
		reason, err = "prompt_input_exit", nil
	}
	// SessionEnd gets its own short time even when ctx ended (a signal).
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionEndHookTimeout)
	defer cancel()
	a.fire(endCtx, EventSessionEnd, reason, object{{"prompt_id", a.promptID}, {"reason", reason}})
	switch {
	case errors.Is(err, errExit0), errors.Is(err, errTerminalClosed):
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return context.Cause(ctx)
	}
	return err
}

// model is the model name the agent gives in its hooks.
const model = "legion-scripted"

// Errors that end the loop.
var (
	errExit0      = errors.New("exit 0")              // an exit 0 step; Run's caller never sees it
	errPromptExit = errors.New("/exit at the prompt") // Run's caller never sees it
	errTurnOver   = errors.New("the turn is over")    // a dialog was declined or the API failed: no Stop
)

// crashError is a crash step's end: the process ends without its hooks.
type crashError struct{ err error }

func (c *crashError) Error() string { return c.err.Error() }
func (c *crashError) Unwrap() error { return c.err }

// agent is the state of one run.
type agent struct {
	o     Options
	steps []step
	sess  *transcript
	path  string
	once  map[string]bool // script lines whose once-step already ran
	hooks *hookRunner
	// policy and term are used by the turn only (the main goroutine).
	policy *policy
	term   *terminal

	// Settings steps.
	tick, permNotify, idleNotify time.Duration

	// The current turn, and what the last ones left.
	prompt    string
	promptID  string
	lastText  string // the turn's last assistant text
	answer    string // the last question's answer
	denied    bool   // the last bash or ask step was denied (if-denied)
	turnStart time.Time
	queued    []string // prompts submitted during the turn, already announced by UserPromptSubmit

	// Background subagents: bg* guarded by bgMu; bgWake has a value when
	// bgDone holds finished ones; bgWG counts their goroutines.
	bgMu   sync.Mutex
	bgRun  []*subagentTask
	bgDone []*subagentTask
	bgWake chan struct{}
	bgWG   sync.WaitGroup
}

// say prints a line about the agent on its terminal.
func (a *agent) say(format string, args ...any) {
	a.term.printf(prefix+format+"\n", args...)
}

// loop runs the turns: the prompt of the command line, then each one typed
// at the prompt.
func (a *agent) loop(ctx context.Context) error {
	prompt, submitted := a.o.Args.Prompt, false
	for {
		if prompt != "" {
			if err := a.turn(ctx, prompt, submitted); err != nil {
				return err
			}
		}
		if len(a.queued) > 0 {
			prompt, submitted = a.queued[0], true
			a.queued = a.queued[1:]
			continue
		}
		var err error
		if prompt, err = a.idle(ctx); err != nil {
			return err
		}
		submitted = false
	}
}

// turn runs the script for one prompt and ends the turn with Stop, unless
// a step ended it otherwise. UserPromptSubmit fires first unless the
// prompt was submitted (and announced) during the last turn.
func (a *agent) turn(ctx context.Context, prompt string, submitted bool) error {
	a.begin(prompt)
	if err := a.sess.user(prompt); err != nil {
		return err
	}
	if !submitted {
		a.fire(ctx, EventUserPromptSubmit, "", object{{"prompt_id", a.promptID}, {"permission_mode", a.policy.mode}, {"prompt", prompt}})
	}
	for _, s := range a.steps {
		if !a.holds(s) {
			continue
		}
		if err := a.run(ctx, s); errors.Is(err, errTurnOver) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return a.stop(ctx)
}

// begin starts a turn for prompt.
func (a *agent) begin(prompt string) {
	a.prompt, a.promptID, a.lastText = prompt, uuid.NewString(), ""
	a.sess.promptID = a.promptID
	a.turnStart = time.Now()
}

// stop ends a turn normally: its duration in the session file, then the
// Stop hook with the last message and the subagents still running.
func (a *agent) stop(ctx context.Context) error {
	if err := a.sess.turnDuration(time.Since(a.turnStart)); err != nil {
		return err
	}
	a.say("turn ended")
	a.fire(ctx, EventStop, "", object{
		{"prompt_id", a.promptID}, {"permission_mode", a.policy.mode}, {"effort", effort},
		{"stop_hook_active", false}, {"last_assistant_message", a.lastText},
		{"background_tasks", a.backgroundTasks()}, {"session_crons", []any{}},
	})
	return nil
}

// effort is the effort the agent reports in its hooks.
var effort = map[string]string{"level": "medium"}

// idle waits at the prompt: it returns the next prompt typed (Enter ends
// it; an empty line is ignored), errPromptExit for /exit, and
// errTerminalClosed at the end of the input. Meanwhile it runs the turn
// each finished background subagent starts, and fires the idle_prompt
// Notification after idleNotify.
func (a *agent) idle(ctx context.Context) (string, error) {
	var (
		buf  []rune
		idle = time.NewTimer(a.idleNotify)
	)
	defer idle.Stop()
	a.term.printf("\n> ")
	for {
		select {
		case k, ok := <-a.term.input():
			if !ok {
				a.term.printf("\n")
				return "", errTerminalClosed
			}
			var done bool
			if buf, done = a.term.edit(buf, k); !done {
				continue
			}
			line := strings.TrimSpace(string(buf))
			buf = buf[:0]
			switch line {
			case "":
				a.term.printf("> ")
				continue
			case exitCommand:
				return "", errPromptExit
			}
			return line, nil
		case <-a.bgWake:
			if err := a.subagentsDone(ctx); err != nil {
				return "", err
			}
			idle.Reset(a.idleNotify)
			a.term.printf("\n> %s", string(buf))
		case <-idle.C:
			a.fire(ctx, EventNotification, "idle_prompt", object{
				{"prompt_id", a.promptID}, {"message", "Claude is waiting for your input"}, {"notification_type", "idle_prompt"},
			})
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// fire fires a hook event: the common fields, then fields, with
// hook_event_name where Claude Code puts it (after the prompt, mode,
// subagent and effort fields, before the event's own).
func (a *agent) fire(ctx context.Context, event, subject string, fields object) *Decision {
	payload := object{{"session_id", a.o.Args.SessionID.String()}, {"transcript_path", a.path}, {"cwd", a.o.Cwd}}
	at := len(payload)
	for i, f := range fields {
		switch f.key {
		case "prompt_id", "permission_mode", "agent_id", "agent_type", "effort":
			at = len(payload) + i + 1
		}
	}
	payload = append(payload, fields...)
	payload = append(payload[:at], append(object{{"hook_event_name", event}}, payload[at:]...)...)
	return a.hooks.fire(ctx, event, subject, payload)
}

// holds reports whether all conditions of s hold.
func (a *agent) holds(s step) bool {
	for _, c := range s.conds {
		ok := true
		switch c.kind {
		case "if-new":
			ok = !a.o.Args.Resume
		case "if-resumed":
			ok = a.o.Args.Resume
		case "if-prompt":
			title, _, _ := strings.Cut(a.prompt, "\n")
			ok = strings.Contains(title, c.arg)
		case "if-answer":
			ok = strings.Contains(a.answer, c.arg)
		case "if-denied":
			ok = a.denied
		case "if-allowed":
			ok = !a.denied
		case "if-env":
			name, value, _ := strings.Cut(c.arg, "=")
			ok = a.o.Getenv(name) == value
		case "once":
			ok = !a.once[strconv.Itoa(s.line)]
		}
		if !ok {
			return false
		}
	}
	return true
}

// expand replaces $NAME and ${NAME} with the agent's values or the
// environment.
func (a *agent) expand(s string) string {
	return os.Expand(s, func(name string) string {
		switch name {
		case "PROMPT":
			return a.prompt
		case "PROMPT_TITLE": // the prompt's first line: Legion's instructions are long
			title, _, _ := strings.Cut(a.prompt, "\n")
			return title
		case "SESSION_ID":
			return a.o.Args.SessionID.String()
		case "ANSWER":
			return a.answer
		case "CWD":
			return a.o.Cwd
		case "RESUMED":
			if a.o.Args.Resume {
				return "1"
			}
			return ""
		case "$":
			return "$"
		}
		return a.o.Getenv(name)
	})
}

// run announces and runs one step.
func (a *agent) run(ctx context.Context, s step) error {
	desc := s.kind
	if s.errKind != "" {
		desc += " " + s.errKind
	}
	if s.text != "" {
		desc += " " + a.expand(s.text)
	}
	a.say("step %d: %s", s.line, desc)
	if err := a.sess.system(subtypeStep, fmt.Sprintf("%d: %s", s.line, desc)); err != nil {
		return err
	}
	for _, c := range s.conds {
		if c.kind == "once" {
			a.once[strconv.Itoa(s.line)] = true
			if err := a.sess.system(subtypeOnce, strconv.Itoa(s.line)); err != nil {
				return err
			}
		}
	}
	switch s.kind {
	case stepSay:
		a.lastText = a.expand(s.text)
		return a.sess.assistant(textBlock{Type: "text", Text: a.lastText})
	case stepWork:
		return a.work(ctx, s.dur)
	case stepSubagent:
		return a.subagent(ctx, s.dur)
	case stepAsk:
		return a.ask(ctx, s)
	case stepBash:
		return a.bash(ctx, a.expand(s.text))
	case stepRun:
		return a.runCmd(ctx, s)
	case stepAPIError:
		return a.apiError(ctx, s.errKind, a.expand(s.text))
	case stepTick:
		a.tick = s.dur
		return nil
	case stepPermNote:
		a.permNotify = s.dur
		return nil
	case stepIdleNote:
		a.idleNotify = s.dur
		return nil
	case stepSleep:
		return sleep(ctx, s.dur)
	case stepHang:
		<-ctx.Done()
		return ctx.Err()
	case stepExit:
		a.say("exit %d", s.code)
		if s.code == 0 {
			return errExit0
		}
		return &ExitError{Code: s.code}
	case stepCrash:
		if s.signal != 0 {
			a.say("crash: killed by %v", s.signal)
			signal.Reset(s.signal)
			if err := syscall.Kill(os.Getpid(), s.signal); err != nil {
				return &crashError{fmt.Errorf("crash with %v: %w", s.signal, err)}
			}
			<-ctx.Done() // the signal ends the process, unless it is ignored
			return &crashError{ctx.Err()}
		}
		a.say("crash: exit %d", s.code)
		return &crashError{&ExitError{Code: s.code}}
	}
	return fmt.Errorf("script line %d: unknown step %q", s.line, s.kind)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
