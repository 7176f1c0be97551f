package scripted

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/legion-dev/legion/ptyworker/claude"
)

// Environment variables the agent reads its script from.
const (
	EnvScript     = "LEGION_SCRIPT"      // the script text
	EnvScriptFile = "LEGION_SCRIPT_FILE" // a file holding the script
)

// defaultTick is the interval of work and subagent lines.
const defaultTick = 200 * time.Millisecond

// prefix starts every line the agent prints about itself.
const prefix = "legion-scripted: "

// ExitError ends the agent with an exit code other than 0 (exit and crash
// steps). The command running Main exits with Code.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("scripted agent exits with code %d", e.Code) }

// Options is one run of the agent.
type Options struct {
	Args   Args
	Script string // script text; "" runs the default script
	Home   string // for ~/.claude
	Cwd    string // the working directory, as Claude Code would see it
	Stdin  io.Reader
	Stdout io.Writer
	Getenv func(string) string // for $NAME in scripts; nil means os.Getenv
}

// Main runs the agent as a command: args as Claude Code takes them, the
// script from $LEGION_SCRIPT or $LEGION_SCRIPT_FILE, $HOME and the physical
// working directory. It returns ErrHelp after printing usage for --help, an
// *ExitError for a non-zero exit, and ctx.Err() when ctx ends first.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	a, err := ParseArgs(args)
	if errors.Is(err, ErrHelp) {
		fmt.Fprint(stdout, Usage)
		return err
	}
	if err != nil {
		return err
	}
	script := os.Getenv(EnvScript)
	if script == "" {
		if path := os.Getenv(EnvScriptFile); path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("read script: %w", err)
			}
			script = string(b)
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("find home directory: %w", err)
	}
	cwd, err := syscall.Getwd() // physical, as Node's process.cwd()
	if err != nil {
		return fmt.Errorf("find working directory: %w", err)
	}
	return Run(ctx, Options{Args: a, Script: script, Home: home, Cwd: cwd, Stdin: stdin, Stdout: stdout})
}

// Run runs the agent. See Main for the errors.
//
// The first ask step starts a goroutine reading lines from o.Stdin (see
// readLines for its end); a process running Run exits right after it.
func Run(ctx context.Context, o Options) error {
	if o.Script == "" {
		o.Script = "say Got it: $PROMPT\nexit 0"
	}
	steps, err := parseScript(o.Script)
	if err != nil {
		return err
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	path := claude.SessionFile(o.Home, o.Cwd, o.Args.SessionID)
	sess, once, err := openSession(path, o.Args.SessionID, o.Cwd, o.Args.Resume)
	if err != nil {
		return err
	}
	defer sess.Close()
	a := &agent{o: o, sess: sess, path: path, once: once, tick: defaultTick}
	mode := "new"
	if o.Args.Resume {
		mode = "resumed"
	}
	a.say("session %s (%s) file %s", o.Args.SessionID, mode, path)
	if o.Args.Prompt != "" {
		if err := sess.user(o.Args.Prompt); err != nil {
			return err
		}
	}
	for _, s := range steps {
		if !a.holds(s) {
			continue
		}
		if err := a.run(ctx, s); errors.Is(err, errExit0) {
			return nil
		} else if err != nil {
			return err
		}
	}
	a.say("done")
	return nil
}

// agent is the state of one run.
type agent struct {
	o      Options
	sess   *transcript
	path   string
	once   map[string]bool // script lines whose once-step already ran
	tick   time.Duration
	answer string
	lines  <-chan string // from o.Stdin, started by the first ask
}

// say prints a line about the agent on its terminal.
func (a *agent) say(format string, args ...any) {
	fmt.Fprintf(a.o.Stdout, prefix+format+"\n", args...)
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
			ok = strings.Contains(a.o.Args.Prompt, c.arg)
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
			return a.o.Args.Prompt
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
	if s.text != "" {
		desc += " " + a.expand(s.text)
	}
	a.say("step %d: %s", s.line, desc)
	if err := a.sess.system(subtypeStep, fmt.Sprintf("%d: %s", s.line, desc)); err != nil {
		return err
	}
	for _, c := range s.conds {
		if c.kind == "once" {
			if err := a.sess.system(subtypeOnce, strconv.Itoa(s.line)); err != nil {
				return err
			}
		}
	}
	switch s.kind {
	case stepSay:
		return a.sess.assistant(textBlock{Type: "text", Text: a.expand(s.text)})
	case stepWork:
		return a.work(ctx, s.dur)
	case stepSubagent:
		return a.subagent(ctx, s.dur)
	case stepAsk:
		return a.ask(ctx, s)
	case stepRun:
		return a.runCmd(ctx, s)
	case stepTick:
		a.tick = s.dur
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
				return fmt.Errorf("crash with %v: %w", s.signal, err)
			}
			<-ctx.Done() // the signal ends the process, unless it is ignored
			return ctx.Err()
		}
		a.say("crash: exit %d", s.code)
		return &ExitError{Code: s.code}
	}
	return fmt.Errorf("script line %d: unknown step %q", s.line, s.kind)
}

// errExit0 ends the script early with success; Run's caller never sees it.
var errExit0 = errors.New("exit 0")

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

// work is a Bash tool call that appends a progress line every tick.
func (a *agent) work(ctx context.Context, d time.Duration) error {
	id, err := a.sess.toolUse("Bash", map[string]string{"command": "sleep " + d.String(), "description": "scripted work"})
	if err != nil {
		return err
	}
	start := time.Now()
	for n := 1; time.Since(start) < d; n++ {
		if err := sleep(ctx, min(a.tick, d-time.Since(start))); err != nil {
			return err
		}
		err := a.sess.progress(id, map[string]any{"type": "bash_progress", "output": fmt.Sprintf("working %d", n), "elapsedTimeSeconds": int(time.Since(start).Seconds())})
		if err != nil {
			return err
		}
	}
	return a.sess.toolResult(id, "work done", map[string]string{"stdout": "work done", "stderr": ""})
}

// subagent is a Task tool call whose subagent writes its own file every
// tick while the session file stays quiet.
func (a *agent) subagent(ctx context.Context, d time.Duration) error {
	prompt := "scripted subagent for " + d.String()
	id, err := a.sess.toolUse("Task", map[string]string{"description": "scripted subagent", "prompt": prompt, "subagent_type": "general-purpose"})
	if err != nil {
		return err
	}
	sub, err := openSubagent(a.path, a.sess.sessionID, a.o.Cwd)
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := sub.user(prompt); err != nil {
		return err
	}
	start := time.Now()
	for n := 1; time.Since(start) < d; n++ {
		if err := sleep(ctx, min(a.tick, d-time.Since(start))); err != nil {
			return err
		}
		if err := sub.assistant(textBlock{Type: "text", Text: fmt.Sprintf("subagent step %d", n)}); err != nil {
			return err
		}
	}
	return a.sess.toolResult(id, "subagent done", map[string]string{"status": "completed"})
}

// ask writes an AskUserQuestion tool call, reads the answer from the
// terminal and writes it as the tool result.
func (a *agent) ask(ctx context.Context, s step) error {
	question := a.expand(s.text)
	labels := s.options
	if len(labels) == 0 {
		labels = []string{"Yes", "No"}
	}
	var options []map[string]string
	for _, l := range labels {
		options = append(options, map[string]string{"label": a.expand(l), "description": ""})
	}
	item := map[string]any{"question": question, "header": "Question", "options": options, "multiSelect": false}
	id, err := a.sess.toolUse(claude.AskUserQuestion, map[string]any{"questions": []any{item}})
	if err != nil {
		return err
	}
	a.say("question: %s", question)
	for i, o := range options {
		a.say("  %d. %s", i+1, o["label"])
	}
	fmt.Fprint(a.o.Stdout, prefix+"answer> ")
	if a.lines == nil {
		a.lines = readLines(a.o.Stdin)
	}
	var answer string
	select {
	case l, ok := <-a.lines:
		if !ok {
			return fmt.Errorf("ask %q: the terminal closed before an answer", question)
		}
		answer = strings.TrimRight(l, "\r\n")
	case <-ctx.Done():
		return ctx.Err()
	}
	a.answer = answer
	a.say("answered: %s", answer)
	content := fmt.Sprintf("User has answered your questions: %q=%q. You can now continue with the user's answers in mind.", question, answer)
	return a.sess.toolResult(id, content, map[string]any{"questions": []any{item}, "answers": map[string]string{question: answer}})
}

// readLines reads r line by line into the returned channel, which is closed
// at EOF or on a read error. The goroutine ends then; a line nobody takes
// (the agent ended first) keeps it blocked until the process exits, which
// for the agent's command is at once.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			l, err := br.ReadString('\n')
			if l != "" && (err == nil || errors.Is(err, io.EOF)) {
				ch <- l
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// runCmd runs a command in the working directory, its output on the
// terminal, recorded as a Bash tool call.
func (a *agent) runCmd(ctx context.Context, s step) error {
	argv := make([]string, len(s.words))
	for i, w := range s.words {
		argv[i] = a.expand(w)
	}
	id, err := a.sess.toolUse("Bash", map[string]string{"command": strings.Join(argv, " "), "description": "scripted run"})
	if err != nil {
		return err
	}
	var out strings.Builder
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = a.o.Cwd
	cmd.Stdout = io.MultiWriter(a.o.Stdout, &out)
	cmd.Stderr = io.MultiWriter(a.o.Stdout, &out)
	runErr := cmd.Run()
	if err := a.sess.toolResult(id, out.String(), map[string]string{"stdout": out.String()}); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("script line %d: run %s: %w", s.line, argv[0], runErr)
	}
	return nil
}
