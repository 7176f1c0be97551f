package activation

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hinshun/vt10x"
)

// drawScript draws like a full-screen application: the alternate screen,
// a hidden cursor, bracketed paste, mouse reporting, application cursor
// keys and keypad, and colours it never resets. Each line typed draws
// more; "quit" ends it.
const drawScript = `printf '\033[?1049h\033[?25l\033[?2004h\033[?1000h\033[?1006h\033[?1h\033=\033[2J\033[5;10H\033[1;31;44mDRAWN'
while IFS= read -r l; do
	[ "$l" = quit ] && exit 0
	printf '\033[7;20H\033[1;32;45mMORE:%s' "$l"
done`

// TestAttachLeavesTerminalClean: through the real CLI on a real terminal,
// attached to an agent that draws full-screen, a detach and the session's
// end give the terminal back clean: main screen, cursor shown, modes off,
// and the message on a line of its own in default attributes.
func TestAttachLeavesTerminalClean(t *testing.T) {
	e := startEnv(t)
	ctx := t.Context()
	e.spawn(ctx, "drawer", "/bin/sh", "-c", drawScript)

	t.Run("detach", func(t *testing.T) {
		a := startOnPTY(t, e, "attach", "drawer")
		a.waitOutput(t, "DRAWN")
		a.ptm.Write([]byte("one\r"))
		a.waitOutput(t, "MORE:one")
		a.ptm.Write([]byte{0x1c})
		if err := a.wait(t); err != nil {
			t.Fatalf("attach after Ctrl-\\ = %v; want exit 0", err)
		}
		a.waitOutput(t, "[detached from drawer]\r\n") // the PTY may still hold it
		checkClean(t, a.output(), "MORE:one", "[detached from drawer]")
	})
	t.Run("session ends", func(t *testing.T) {
		a := startOnPTY(t, e, "attach", "drawer")
		a.waitOutput(t, "[attached to drawer")
		a.ptm.Write([]byte("two\r"))
		a.waitOutput(t, "MORE:two")
		a.ptm.Write([]byte("quit\r"))
		if err := a.wait(t); err != nil {
			t.Fatalf("attach to a session that ended = %v; want exit 0", err)
		}
		a.waitOutput(t, "[drawer has exited")
		checkClean(t, a.output(), "MORE:two", "[drawer: run 1 ended: ")
	})
}

// modeReset matches a reset (ESC [ ? ... l) that includes mode n.
func modeReset(n string) *regexp.Regexp {
	return regexp.MustCompile(`\x1b\[\?([0-9;]*;)?` + n + `(;[0-9;]*)?l`)
}

// checkClean plays out, the bytes a terminal received, on an emulator and
// checks that after the last of the application's output (last) the
// terminal was left clean and msg starts a line of its own in default
// attributes.
func checkClean(t *testing.T, out, last, msg string) {
	t.Helper()
	vt := vt10x.New(vt10x.WithSize(80, 24))
	vt.Write([]byte(out))
	mode := vt.Mode()
	if mode&vt10x.ModeAltScreen != 0 {
		t.Errorf("terminal left on the alternate screen")
	}
	if !vt.CursorVisible() {
		t.Errorf("cursor left hidden")
	}
	for _, m := range []struct {
		name string
		flag vt10x.ModeFlag
	}{
		{"mouse reporting", vt10x.ModeMouseMask},
		{"SGR mouse", vt10x.ModeMouseSgr},
		{"application cursor keys", vt10x.ModeAppCursor},
		{"application keypad", vt10x.ModeAppKeypad},
	} {
		if mode&m.flag != 0 {
			t.Errorf("%s left on", m.name)
		}
	}
	// The emulator does not follow bracketed paste: look at the bytes.
	if tail := out[strings.LastIndex(out, last):]; !modeReset("2004").MatchString(tail) {
		t.Errorf("bracketed paste not turned off after the application's output: %q", tail)
	}

	cols, rows := vt.Size()
	row := -1
	for y := range rows {
		var line strings.Builder
		for x := range cols {
			line.WriteRune(vt.Cell(x, y).Char)
		}
		if strings.HasPrefix(line.String(), msg) {
			row = y
			break
		}
	}
	if row < 0 {
		t.Fatalf("no line of the screen starts with %q; screen:\n%s\nbytes: %q", msg, vt.String(), out)
	}
	for x := range len(msg) {
		g := vt.Cell(x, row)
		if g.FG != vt10x.DefaultFG || g.BG != vt10x.DefaultBG || g.Mode != 0 {
			t.Errorf("message %q at column %d: %q with colours %v on %v, mode %#x; want default attributes", msg, x, g.Char, g.FG, g.BG, g.Mode)
			break
		}
	}
	if strings.Contains(vt.String(), "DRAWN") || strings.Contains(vt.String(), last) {
		t.Errorf("the application's screen is still shown:\n%s", vt.String())
	}
}
