package scripted

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// keyKind is what a key press is.
type keyKind int

const (
	keyRune keyKind = iota // a printable character, in key.r
	keyEnter
	keyEsc
	keyBackspace
	keyUp
	keyDown
)

// key is one key press read from the terminal.
type key struct {
	kind  keyKind
	r     rune
	paste bool // it came with other keys in one read
}

// errTerminalClosed is returned when the terminal's input ends (EOF or a
// read error) while the agent waits for a key.
var errTerminalClosed = errors.New("the terminal's input ended")

// rawTerminal puts the terminal f into the mode an interactive TUI reads
// keys in, one at a time and not echoed (the agent echoes what it shows),
// keeping signals (Ctrl-C is SIGINT), and returns how to restore it. For a
// non-terminal it does nothing and tty is false.
func rawTerminal(f *os.File) (restore func(), tty bool) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}, false
	}
	t := *old
	t.Lflag &^= unix.ICANON | unix.ECHO | unix.ECHONL | unix.IEXTEN
	t.Iflag &^= unix.ICRNL | unix.INLCR | unix.IXON
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return func() {}, false
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, true // best effort: the process is ending
}

// readKeys reads key presses from r into the returned channel, which is
// closed at EOF or on a read error. The goroutine ends then; a key nobody
// takes (the agent ended first) keeps it blocked until the process exits,
// which for the agent's command is at once.
//
// Input is parsed as a terminal sends it: CR or CR LF is Enter, and so is
// LF unless tty says the input is a terminal in raw mode, where Enter is
// CR and LF is a line feed typed or pasted into the text; ESC
// alone (at the end of what one read returned, or before anything but [
// or O) is Esc; CSI and SS3 sequences are arrow keys (up, down) or
// ignored (bracketed paste marks, other keys); DEL and BS are Backspace;
// other control characters are ignored. Keys that came in one read are
// marked as a paste.
func readKeys(r io.Reader, tty bool) <-chan key {
	ch := make(chan key)
	go func() {
		defer close(ch)
		buf := make([]byte, 4096)
		var carry []byte // an incomplete UTF-8 sequence from the last read
		for {
			n, err := r.Read(buf)
			if n > 0 {
				data := append(carry, buf[:n]...)
				var keys []key
				keys, carry = parseKeys(data, tty)
				for _, k := range keys {
					k.paste = len(keys) > 1
					ch <- k
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// parseKeys parses the bytes of one read into keys (see readKeys); rest
// is a trailing incomplete UTF-8 sequence to prepend to the next read.
func parseKeys(data []byte, tty bool) (keys []key, rest []byte) {
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '\n' && tty:
			keys = append(keys, key{kind: keyRune, r: '\n'})
			i++
		case c == '\r' || c == '\n':
			keys = append(keys, key{kind: keyEnter})
			if c == '\r' && i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
			i++
		case c == 0x1b:
			if i+1 >= len(data) || (data[i+1] != '[' && data[i+1] != 'O') {
				keys = append(keys, key{kind: keyEsc})
				i++
				continue
			}
			j := i + 2
			if data[i+1] == 'O' {
				j = min(j+1, len(data))
			} else {
				for j < len(data) && (data[j] < 0x40 || data[j] > 0x7e) {
					j++
				}
				j = min(j+1, len(data))
			}
			switch string(data[i:j]) {
			case "\x1b[A", "\x1bOA":
				keys = append(keys, key{kind: keyUp})
			case "\x1b[B", "\x1bOB":
				keys = append(keys, key{kind: keyDown})
			}
			i = j
		case c == 0x7f || c == 0x08:
			keys = append(keys, key{kind: keyBackspace})
			i++
		case c < 0x20:
			i++ // other control characters do nothing
		default:
			if !utf8.FullRune(data[i:]) {
				return keys, append([]byte(nil), data[i:]...)
			}
			r, size := utf8.DecodeRune(data[i:])
			keys = append(keys, key{kind: keyRune, r: r})
			i += size
		}
	}
	return keys, nil
}

// terminal is the agent's terminal: what it shows and the keys it reads.
type terminal struct {
	in   io.Reader
	tty  bool // in is a terminal in raw mode
	out  io.Writer
	keys <-chan key // started by the first read
}

// clearScreen clears the terminal, as a TUI's redraw without a closed
// dialog leaves none of it on the screen.
const clearScreen = "\x1b[2J\x1b[H"

// printf writes to the terminal.
func (t *terminal) printf(format string, args ...any) {
	fmt.Fprintf(t.out, format, args...)
}

// input is the channel of key presses, started on first use.
func (t *terminal) input() <-chan key {
	if t.keys == nil {
		t.keys = readKeys(t.in, t.tty)
	}
	return t.keys
}

// edit applies k to the line being typed in buf, echoing it; done is true
// at Enter (the line is then complete). Esc and the arrows do nothing.
func (t *terminal) edit(buf []rune, k key) (line []rune, done bool) {
	switch k.kind {
	case keyRune:
		t.printf("%c", k.r)
		return append(buf, k.r), false
	case keyBackspace:
		if len(buf) > 0 {
			t.printf("\b \b")
			return buf[:len(buf)-1], false
		}
	case keyEnter:
		t.printf("\r\n")
		return buf, true
	}
	return buf, false
}
