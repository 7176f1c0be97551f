package claudetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/hinshun/vt10x"

	"github.com/legion-dev/legion/internal/waitfor"
)

// Screen size of a Terminal: wide enough that the CLI's dialogs and
// status lines fit on one line each.
const (
	Cols = 120
	Rows = 40
)

// Wait is the generous deadline of the waits in this package (startup of
// the CLI on a loaded machine included).
const Wait = 60 * time.Second

// Terminal is a process running in a real PTY whose screen is emulated,
// so a test can read what the TUI shows and type into it.
type Terminal struct {
	cmd  *exec.Cmd
	ptmx *os.File

	mu sync.Mutex
	vt vt10x.Terminal

	done  chan struct{} // closed when the process has exited
	state *os.ProcessState
}

// Start runs the CLI (e.Binary) with args in dir in a new PTY of Cols×Rows,
// with e.Environ(extra...). The process and its process group are killed,
// if still running, when the test ends.
func (e *Env) Start(t testing.TB, dir string, args []string, extra ...string) *Terminal {
	t.Helper()
	cmd := exec.Command(e.Binary, args...)
	cmd.Dir = dir
	cmd.Env = e.Environ(extra...)
	return StartCommand(t, cmd)
}

// StartCommand runs cmd in a new PTY of Cols×Rows (see Start).
func StartCommand(t testing.TB, cmd *exec.Cmd) *Terminal {
	t.Helper()
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: Cols, Rows: Rows})
	if err != nil {
		t.Fatalf("start %s in a pty: %v", cmd.Path, err)
	}
	term := &Terminal{cmd: cmd, ptmx: ptmx, done: make(chan struct{})}
	// The emulator answers the terminal's queries (cursor position, device
	// attributes) into the PTY, as a real terminal would.
	term.vt = vt10x.New(vt10x.WithSize(Cols, Rows), vt10x.WithWriter(ptmx))
	go term.read()
	go func() {
		cmd.Wait()
		term.mu.Lock()
		term.state = cmd.ProcessState
		term.mu.Unlock()
		close(term.done)
	}()
	t.Cleanup(func() {
		select {
		case <-term.done:
		default:
			// The process leads its own session and process group (the
			// PTY's): end the group, so its tools' processes go too.
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-term.done
		}
		ptmx.Close()
	})
	return term
}

// read feeds the process's output to the emulator until the PTY closes
// (EIO once the process and its children are gone). The start of a UTF-8
// character split across reads waits for its end: the emulator drops it.
func (term *Terminal) read() {
	buf := make([]byte, 32<<10)
	var carry []byte
	for {
		n, err := term.ptmx.Read(buf)
		if n > 0 {
			data := append(carry, buf[:n]...)
			term.mu.Lock()
			used, _ := term.vt.Write(data)
			term.mu.Unlock()
			carry = append([]byte(nil), data[used:]...)
		}
		if err != nil {
			return
		}
	}
}

// Screen returns the text on the screen, a line per row, trailing spaces
// trimmed. A no-break space (U+00A0, which the CLI draws after its "❯"
// prompt) reads as a space.
func (term *Terminal) Screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	term.vt.Lock()
	defer term.vt.Unlock()
	cols, rows := term.vt.Size()
	var b strings.Builder
	for y := range rows {
		var line strings.Builder
		for x := range cols {
			c := term.vt.Cell(x, y).Char
			if c == '\u00a0' {
				c = ' '
			}
			line.WriteRune(c)
		}
		b.WriteString(strings.TrimRight(line.String(), " \x00"))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// Type writes keys to the terminal as typed: text, "\r" for Enter, "\x1b"
// for Esc.
func (term *Terminal) Type(t testing.TB, keys string) {
	t.Helper()
	if _, err := term.ptmx.Write([]byte(keys)); err != nil {
		t.Fatalf("type %q: %v", keys, err)
	}
}

// retype is how long TypeUntil waits for keys to take effect before it
// writes them again. One second was too short on busy cores: a prompt
// not yet drawn after a second was typed again, and both landed ("label
// itlabel it", TestRealCLIConversation in a clean-clone run at load 14).
const retype = 3 * time.Second

// Effect is what a screen shows of keys a test typed.
type Effect int

const (
	NoEffect Effect = iota // nothing yet: the keys may have been dropped
	Partly                 // some of it (a text half drawn): wait, do not type again
	Done                   // all of it
)

// TypeUntil writes keys and waits until effect(screen) is Done. If the
// screen shows NoEffect for retype, it writes them again: the CLI drops
// input that arrives just after its screen changed (a dialog opening or
// closing, the focus moving), and a dropped key never shows. It fails the
// test after Wait.
func (term *Terminal) TypeUntil(t testing.TB, keys, what string, effect func(screen string) Effect) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	typed := time.Now()
	term.Type(t, keys)
	for {
		s := term.Screen()
		switch e := effect(s); {
		case e == Done:
			return
		case time.Now().After(deadline):
			t.Fatalf("typed %q, waiting for %s: gave up after %v; screen:\n%s", keys, what, Wait, s)
		case e == NoEffect && time.Since(typed) >= retype:
			typed = time.Now()
			term.Type(t, keys)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// InputLine returns the CLI's input line: the last line of the screen
// that starts with its prompt "❯" (the input box is below the
// conversation), spaces trimmed.
func InputLine(screen string) string {
	lines := strings.Split(screen, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "❯") {
			return l
		}
	}
	return ""
}

// Prompt types text at the CLI's empty prompt and submits it with Enter,
// each step confirmed on the screen (see TypeUntil).
func (term *Terminal) Prompt(t testing.TB, text string) {
	t.Helper()
	line := "❯ " + text
	term.TypeUntil(t, text, "the prompt to read "+text, func(s string) Effect {
		switch l := InputLine(s); {
		case l == line:
			return Done
		case l == "❯":
			return NoEffect
		}
		return Partly
	})
	term.TypeUntil(t, "\r", "the prompt to be submitted", func(s string) Effect {
		if InputLine(s) == line {
			return NoEffect
		}
		return Done
	})
}

// WaitScreen waits until the screen shows every one of texts, and fails
// the test (with the screen) if it does not within Wait.
func (term *Terminal) WaitScreen(t testing.TB, texts ...string) {
	t.Helper()
	waitfor.Check(t, Wait, fmt.Sprintf("the screen to show %q", texts), func() error {
		s := term.Screen()
		for _, text := range texts {
			if !strings.Contains(s, text) {
				return fmt.Errorf("no %q on the screen:\n%s", text, s)
			}
		}
		return nil
	})
}

// Signal sends sig to the process.
func (term *Terminal) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := term.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// Pid is the process's id.
func (term *Terminal) Pid() int { return term.cmd.Process.Pid }

// errRunning is what ExitCode's wait reports while the process runs.
var errRunning = errors.New("still running")

// ExitCode waits until the process has exited (failing the test after
// Wait) and returns its exit code, or 128+N for a process killed by signal N.
func (term *Terminal) ExitCode(t testing.TB) int {
	t.Helper()
	waitfor.Check(t, Wait, "the CLI to exit", func() error {
		select {
		case <-term.done:
			return nil
		default:
			return errRunning
		}
	})
	term.mu.Lock()
	defer term.mu.Unlock()
	if ws, ok := term.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return term.state.ExitCode()
}

// String names the process and its screen, for failure messages.
func (term *Terminal) String() string {
	return "pid " + strconv.Itoa(term.cmd.Process.Pid) + ", screen:\n" + term.Screen()
}
