// Package attachterm is the terminal side of `legion attach`: it asks the
// helper (through package activation/api) for a session's worker socket,
// puts the terminal in raw mode, relays keystrokes and screen output with
// the worker protocol (package ptyworker/proto), detaches on the detach key, and
// follows the session across restarts of its agent. It must never leave
// the terminal in raw mode, on any way out.
package attachterm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/ptyworker/termkeys"
)

// Options configure Run, the body of `legion attach`.
type Options struct {
	Name      string
	ReadOnly  bool         // watch only: keystrokes other than the detach key are dropped
	DetachKey termkeys.Key // zero means termkeys.DefaultKey
	In        *os.File     // keystrokes; put in raw mode when it is a terminal
	Out       *os.File     // the session's screen; its size is the PTY's
	Status    io.Writer    // messages about the attachment (stderr)
}

// escapeTime is how long a lone ESC waits for the rest of a possible
// detach-key sequence before it is forwarded (tmux's escape-time).
const escapeTime = 25 * time.Millisecond

// restartPoll is how often a detached-by-exit attach asks whether the
// session's unit came back.
const restartPoll = 250 * time.Millisecond

// Run joins a session's terminal through the helper until the
// detach key, the session's end, or ctx (SIGINT, SIGTERM; SIGHUP too).
// The terminal is put in raw mode and restored on every way out,
// including errors, signals and panics; after the session's output it is
// also left clean (see attacher.leave) before any message. When the
// session's agent exits and systemd restarts it, Run waits for the new
// run and re-attaches; when the session has ended for good it returns nil
// after saying how it ended. A session that is not running is an error whose
// message carries its exit information.
func Run(ctx context.Context, c *api.Client, o Options) (err error) {
	if o.DetachKey.String() == "" {
		o.DetachKey = termkeys.MustParseKey(termkeys.DefaultKey)
	}
	if o.Status == nil {
		o.Status = io.Discard
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	a := &attacher{c: c, orig: c, o: o, matcher: termkeys.NewMatcher(o.DetachKey)}
	defer func() {
		if a.c != c {
			a.c.Close() // a reconnect's client
		}
	}()
	if err := a.connect(ctx, nil); err != nil {
		return err
	}
	defer a.closeConn()

	inFd := int(o.In.Fd())
	nl := "\n"
	if term.IsTerminal(inFd) {
		old, err := term.MakeRaw(inFd)
		if err != nil {
			return fmt.Errorf("attach %s: raw mode: %w", o.Name, err)
		}
		var once sync.Once
		restore := func() { once.Do(func() { term.Restore(inFd, old) }) }
		defer restore()
		defer func() {
			if r := recover(); r != nil {
				restore()
				panic(r)
			}
		}()
		nl = "\r\n"
	}
	a.nl = nl
	a.tty = term.IsTerminal(int(o.Out.Fd()))
	defer a.leave() // on errors; the other ways out have left already
	fmt.Fprintf(o.Status, "[attached to %s; detach with %s]%s", o.Name, o.DetachKey, nl)
	return a.loop(ctx)
}

type attacher struct {
	c       *api.Client // the helper; replaced after a reconnect
	orig    *api.Client // the caller's, closed by the caller
	o       Options
	matcher *termkeys.Matcher
	nl      string
	tty     bool      // Out is a terminal: leave it clean (see leave)
	modes   termModes // what the session's output did to Out
	drawn   bool      // output reached Out since the last leave

	wc       *proto.Client // the worker, via the helper's descriptor
	offset   uint64        // next output offset expected on wc
	exit     *proto.ExitInfo
	desynced bool // the worker dropped this terminal for falling behind
}

// connect asks the helper for the session's worker and attaches from
// offset (nil: a screen snapshot).
func (a *attacher) connect(ctx context.Context, offset *uint64) error {
	var conn net.Conn
	var res api.AttachResult
	err := a.helper(ctx, func(c *api.Client) error {
		var err error
		conn, res, err = c.Attach(ctx, api.AttachArgs{Name: a.o.Name, ReadOnly: a.o.ReadOnly})
		return err
	})
	if err != nil {
		var e *api.Error
		if errors.As(err, &e) {
			return fmt.Errorf("attach %s: %s", a.o.Name, e.Message)
		}
		return fmt.Errorf("attach %s: %w", a.o.Name, err)
	}
	wc := proto.NewClient(conn) // the helper already said hello on it
	p := proto.AttachParams{Offset: offset, ReadOnly: a.o.ReadOnly, Mapped: !res.Relayed}
	if cols, rows, err := term.GetSize(int(a.o.Out.Fd())); err == nil && cols > 0 && rows > 0 {
		p.Cols, p.Rows = cols, rows
	}
	ar, err := wc.Attach(ctx, p)
	if err != nil {
		wc.Close()
		return fmt.Errorf("attach %s: %w", a.o.Name, err)
	}
	a.wc, a.offset, a.exit = wc, ar.Offset, ar.Exit
	return nil
}

// helper runs call on the helper connection; when that connection broke
// (the helper restarted since), it dials again and retries once.
func (a *attacher) helper(ctx context.Context, call func(c *api.Client) error) error {
	err := call(a.c)
	var e *api.Error
	if err == nil || errors.As(err, &e) || ctx.Err() != nil {
		return err
	}
	n, derr := a.c.Redial(ctx)
	if derr != nil {
		return err
	}
	if a.c != a.orig {
		a.c.Close()
	}
	a.c = n
	return call(a.c)
}

func (a *attacher) closeConn() {
	if a.wc != nil {
		a.wc.Close()
		a.wc = nil
	}
}

// loop moves bytes until the attachment ends.
func (a *attacher) loop(ctx context.Context) error {
	// The stdin reader ends when a read fails; a read blocked on a
	// terminal cannot be interrupted, so it may outlive Run until
	// the process exits (it drops what it reads then).
	inCh := make(chan []byte)
	inDone := make(chan struct{})
	go func() {
		defer close(inDone)
		buf := make([]byte, 4096)
		for {
			n, err := a.o.In.Read(buf)
			if n > 0 {
				select {
				case inCh <- append([]byte(nil), buf[:n]...):
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	defer flush.Stop()
	var poll <-chan time.Time // set while waiting for a restart

	for {
		var events <-chan proto.Event
		if a.wc != nil {
			events = a.wc.Events()
		}
		select {
		case <-ctx.Done():
			a.detach()
			a.leave()
			return nil // a signal ends the attachment, not the session
		case <-inDone:
			inDone = nil // stdin closed: keep watching until the session ends
		case b := <-inCh:
			pass, detached := a.matcher.Feed(b)
			a.input(pass)
			if detached {
				a.detach()
				fmt.Fprintf(a.o.Status, "%s[detached from %s]%s", a.lead(), a.o.Name, a.nl)
				return nil
			}
			if a.matcher.Pending() {
				flush.Reset(escapeTime)
			}
		case <-flush.C:
			if a.matcher.Pending() {
				a.input(a.matcher.Flush())
			}
		case <-winch:
			if a.wc != nil {
				if cols, rows, err := term.GetSize(int(a.o.Out.Fd())); err == nil {
					rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					a.wc.Resize(rctx, cols, rows)
					cancel()
				}
			}
		case ev, ok := <-events:
			if !ok {
				done, err := a.connectionEnded(ctx)
				if done || err != nil {
					return err
				}
				if a.wc == nil {
					poll = time.After(restartPoll)
				}
				continue
			}
			a.event(ev)
		case <-poll:
			poll = nil
			done, err := a.reattach(ctx)
			if done || err != nil {
				return err
			}
			if a.wc == nil {
				poll = time.After(restartPoll)
			}
		}
	}
}

func (a *attacher) input(p []byte) {
	if len(p) == 0 || a.o.ReadOnly || a.wc == nil {
		return
	}
	a.wc.SendInput(p) // a failure shows as the connection ending
}

func (a *attacher) detach() {
	if a.wc != nil {
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a.wc.Detach(dctx)
		cancel()
	}
}

func (a *attacher) event(ev proto.Event) {
	switch ev.Kind {
	case proto.EventKindOutput, proto.EventKindSnapshot:
		a.o.Out.Write(ev.Data)
		if a.tty {
			a.modes.scan(ev.Data)
			a.drawn = true
		}
		a.offset = ev.Offset + uint64(len(ev.Data))
		if ev.Kind == proto.EventKindSnapshot {
			a.offset = ev.Offset
		}
		ev.Release()
	case proto.EventKindExit:
		a.exit = ev.Exit
	case proto.EventKindDesync:
		a.desynced = true
		fmt.Fprintf(a.o.Status, "%s[%s: this terminal fell behind the session's output; catching up]%s", a.nl, a.o.Name, a.nl)
	case proto.EventKindError:
		fmt.Fprintf(a.o.Status, "%s[%s: %v]%s", a.nl, a.o.Name, ev.Err, a.nl)
	}
}

// connectionEnded handles the end of the worker connection: a desync is
// caught up at once; after an exit the helper says whether the session
// will run again. done means the attachment is over.
func (a *attacher) connectionEnded(ctx context.Context) (done bool, err error) {
	exit := a.exit
	a.closeConn()
	if exit != nil {
		fmt.Fprintf(a.o.Status, "%s[%s: run %d ended: %s; %s]%s", a.lead(), a.o.Name, exit.Run, exit.String(), exit.Reason, a.nl)
	}
	return a.reattach(ctx)
}

// reattach asks the helper about the session: running again → attach
// (from the last offset after a desync, else a snapshot of the new run);
// starting → wait; ended → say so and finish.
func (a *attacher) reattach(ctx context.Context) (done bool, err error) {
	var s api.Session
	err = a.helper(ctx, func(c *api.Client) error {
		var err error
		s, err = c.Status(ctx, a.o.Name)
		return err
	})
	if err != nil {
		if errors.Is(err, api.ErrNotFound) {
			a.leave()
			fmt.Fprintf(a.o.Status, "[%s is gone]%s", a.o.Name, a.nl)
			return true, nil
		}
		return true, fmt.Errorf("attach %s: %w", a.o.Name, err)
	}
	switch s.State {
	case api.StateExited, api.StateFailed:
		a.leave()
		fmt.Fprintf(a.o.Status, "[%s has %s: %s]%s", a.o.Name, s.State, s.Exit, a.nl)
		return true, nil
	case api.StateStarting:
		if a.wc == nil && a.exit != nil {
			fmt.Fprintf(a.o.Status, "[%s: waiting for systemd to restart it; detach with %s]%s", a.o.Name, a.o.DetachKey, a.nl)
			a.exit = nil
		}
		return false, nil
	}
	var from *uint64
	if a.desynced {
		off := a.offset // same run: catch up from where this terminal was
		from = &off
	}
	if err := a.connect(ctx, from); err != nil {
		return false, nil // between runs again: try at the next poll
	}
	a.desynced = false
	return false, nil
}

// leave gives the terminal back as a shell expects it, when the session's
// output reached it since the last leave: out of the alternate screen if
// the application entered it, default attributes and character set, the
// cursor shown, and the modes an application may have turned on (bracketed
// paste, mouse and focus reporting, application cursor keys and keypad)
// turned off; then a new line, cleared to the end of the screen, for
// whatever comes next. It reports whether it wrote anything; the new line
// is then written already.
func (a *attacher) leave() bool {
	if !a.drawn {
		return false
	}
	a.drawn = false
	var b []byte
	if a.modes.alt != 0 {
		b = fmt.Appendf(b, "\x1b[?%dl", a.modes.alt)
	}
	b = append(b, "\x1b[0m\x1b(B\x1b[?25h\x1b[?2004;1000;1002;1003;1005;1006;1015;1004;1l\x1b>\r\n\x1b[J"...)
	a.modes = termModes{}
	a.o.Out.Write(b) // a terminal that cannot be written to has nothing to clean
	return true
}

// lead is the start of a message line: leave, else a new line.
func (a *attacher) lead() string {
	if a.leave() {
		return ""
	}
	return a.nl
}

// termModes follows the alternate screen through the session's output
// (DEC private modes 47, 1047 and 1049, as the application and the
// worker's screen snapshots set them), so leave can quit it. The other
// modes leave resets whatever their state: turning them off is harmless,
// leaving the alternate screen when not in it is not (1049 restores a
// cursor position that was never saved).
type termModes struct {
	alt  int    // the mode that entered the alternate screen; 0: main screen
	tail []byte // an unfinished "ESC [ ?" sequence at the end of the last chunk
}

// maxModeSeq bounds the DEC private mode sequence scan keeps across chunks.
const maxModeSeq = 64

// scan follows the DEC private mode sets and resets (ESC [ ? Pm h or l)
// in p, which continues the output scan saw last.
func (m *termModes) scan(p []byte) {
	if len(m.tail) > 0 {
		p = append(m.tail, p...)
		m.tail = nil
	}
	for {
		i := bytes.Index(p, []byte("\x1b[?"))
		if i < 0 {
			if n := len(p); n > 0 && p[n-1] == 0x1b {
				m.tail = []byte{0x1b}
			} else if n > 1 && p[n-2] == 0x1b && p[n-1] == '[' {
				m.tail = []byte("\x1b[")
			}
			return
		}
		p = p[i+3:]
		j := 0
		for j < len(p) && (p[j] >= '0' && p[j] <= '9' || p[j] == ';') {
			j++
		}
		if j == len(p) {
			if j < maxModeSeq {
				m.tail = append([]byte("\x1b[?"), p...)
			}
			return
		}
		if f := p[j]; f == 'h' || f == 'l' {
			for _, arg := range bytes.Split(p[:j], []byte(";")) {
				switch n, _ := strconv.Atoi(string(arg)); {
				case n != 47 && n != 1047 && n != 1049:
				case f == 'h':
					m.alt = n
				default:
					m.alt = 0
				}
			}
		}
		p = p[j:]
	}
}
