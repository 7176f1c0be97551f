package ptyworker

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hinshun/vt10x"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// Glyph attribute bits as vt10x sets them (its constants are unexported).
const (
	glyphReverse   = 1 << 0
	glyphUnderline = 1 << 1
	glyphBold      = 1 << 2
	glyphItalic    = 1 << 4
	glyphBlink     = 1 << 5
)

// render draws v for a terminal that attaches now: modes first (alternate
// screen, keypad, mouse, ...), then every row with its colours and
// attributes, the title, the current pen and the cursor. Writing the result
// to an xterm-like terminal of the same size reproduces the screen.
//
// The result fits in a snapshot frame (MaxDataFrame). A screen whose
// drawing is bigger (a big terminal full of true-colour cells, each with
// its own pen) is drawn without colours and attributes; if even its text
// does not fit, the rows at the top are left out.
func render(v vt10x.Terminal, m *modeScanner) []byte {
	return renderMax(v, m, proto.MaxDataFrame)
}

// renderMax is render with at most limit bytes.
func renderMax(v vt10x.Terminal, m *modeScanner, limit int) []byte {
	v.Lock()
	defer v.Unlock()
	cols, rows := v.Size()
	mode := v.Mode()
	tail := appendTail(nil, v, m, mode)
	b := make([]byte, 0, min(cols*rows+512, limit))

	b = append(b, "\x1b[0m"...)
	if mode&vt10x.ModeAltScreen != 0 {
		b = append(b, "\x1b[?1049h"...)
	}
	b = append(b, "\x1b[H\x1b[2J"...)

	room := limit - len(b) - len(tail)
	if drawn, ok := appendRows(b, v, cols, 0, rows, true, len(b)+room); ok {
		b = drawn
	} else {
		b, _ = appendRows(b, v, cols, plainFrom(v, cols, rows, room), rows, false, -1)
	}
	return append(b, tail...)
}

// appendRows draws rows from to to (not included), in colour or as plain
// text. With limit >= 0 it gives up (false) once b grows past limit bytes.
func appendRows(b []byte, v vt10x.Terminal, cols, from, to int, colour bool, limit int) ([]byte, bool) {
	pen := defaultPen()
	for y := from; y < to; y++ {
		last := lastCell(v, cols, y, colour)
		if last < 0 {
			continue
		}
		b = append(b, "\x1b["...)
		b = strconv.AppendInt(b, int64(y+1), 10)
		b = append(b, ";1H"...)
		for x := 0; x <= last; x++ {
			g := v.Cell(x, y)
			if p := penOf(g); colour && p != pen {
				b = appendSGR(b, p)
				pen = p
			}
			b = appendRune(b, cellRune(g))
		}
		if limit >= 0 && len(b) > limit {
			return b, false
		}
	}
	return b, true
}

// plainFrom is the first row from which the rows to the bottom, drawn as
// plain text, fit in room bytes.
func plainFrom(v vt10x.Terminal, cols, rows, room int) int {
	for y := rows - 1; y >= 0; y-- {
		last := lastCell(v, cols, y, false)
		if last < 0 {
			continue
		}
		room -= len("\x1b[;1H") + len(strconv.Itoa(y+1))
		for x := 0; x <= last; x++ {
			n := utf8.RuneLen(cellRune(v.Cell(x, y)))
			if n < 0 {
				n = utf8.RuneLen(utf8.RuneError)
			}
			room -= n
		}
		if room < 0 {
			return y + 1
		}
	}
	return 0
}

// cellRune is the character drawn for g: control characters as blanks.
func cellRune(g vt10x.Glyph) rune {
	if g.Char < 0x20 || g.Char == 0x7f {
		return ' '
	}
	return g.Char
}

// appendTail draws what follows the rows: modes, title, pen and cursor.
func appendTail(b []byte, v vt10x.Terminal, m *modeScanner, mode vt10x.ModeFlag) []byte {
	// Modes an application set and a fresh terminal lacks.
	if mode&vt10x.ModeAppCursor != 0 {
		b = append(b, "\x1b[?1h"...)
	}
	if mode&vt10x.ModeAppKeypad != 0 {
		b = append(b, "\x1b="...)
	}
	if mode&vt10x.ModeWrap == 0 {
		b = append(b, "\x1b[?7l"...)
	}
	switch {
	case mode&vt10x.ModeMouseX10 != 0:
		b = append(b, "\x1b[?9h"...)
	case mode&vt10x.ModeMouseButton != 0:
		b = append(b, "\x1b[?1000h"...)
	case mode&vt10x.ModeMouseMotion != 0:
		b = append(b, "\x1b[?1002h"...)
	case mode&vt10x.ModeMouseMany != 0:
		b = append(b, "\x1b[?1003h"...)
	}
	if mode&vt10x.ModeMouseSgr != 0 {
		b = append(b, "\x1b[?1006h"...)
	}
	if mode&vt10x.ModeFocus != 0 {
		b = append(b, "\x1b[?1004h"...)
	}
	if m.bracketedPaste {
		b = append(b, "\x1b[?2004h"...)
	}
	if f := m.kittyFlags(); f != 0 {
		b = append(b, "\x1b[>"...)
		b = strconv.AppendInt(b, int64(f), 10)
		b = append(b, 'u')
	}
	if m.modifyOther != 0 {
		b = append(b, "\x1b[>4;"...)
		b = strconv.AppendInt(b, int64(m.modifyOther), 10)
		b = append(b, 'm')
	}
	if t := v.Title(); t != "" {
		b = append(b, "\x1b]2;"...)
		b = append(b, strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, t)...)
		b = append(b, '\a')
	}

	cur := v.Cursor()
	b = appendSGR(b, penOf(cur.Attr))
	b = append(b, "\x1b["...)
	b = strconv.AppendInt(b, int64(cur.Y+1), 10)
	b = append(b, ';')
	b = strconv.AppendInt(b, int64(cur.X+1), 10)
	b = append(b, 'H')
	if v.CursorVisible() {
		b = append(b, "\x1b[?25h"...)
	} else {
		b = append(b, "\x1b[?25l"...)
	}
	return b
}

// pen is the drawing state that SGR sets.
type pen struct {
	mode   int16
	fg, bg vt10x.Color
}

func defaultPen() pen { return pen{fg: vt10x.DefaultFG, bg: vt10x.DefaultBG} }

func penOf(g vt10x.Glyph) pen {
	return pen{mode: g.Mode & (glyphReverse | glyphUnderline | glyphBold | glyphItalic | glyphBlink), fg: g.FG, bg: g.BG}
}

// lastCell is the index of the last cell of row y that differs from a blank
// in the default pen (with colour false: from a blank), or -1 for a blank
// row.
func lastCell(v vt10x.Terminal, cols, y int, colour bool) int {
	def := defaultPen()
	for x := cols - 1; x >= 0; x-- {
		g := v.Cell(x, y)
		if (g.Char != ' ' && g.Char != 0) || colour && penOf(g) != def {
			return x
		}
	}
	return -1
}

// appendSGR sets the pen from scratch: reset, then each attribute.
func appendSGR(b []byte, p pen) []byte {
	b = append(b, "\x1b[0"...)
	if p.mode&glyphBold != 0 {
		b = append(b, ";1"...)
	}
	if p.mode&glyphItalic != 0 {
		b = append(b, ";3"...)
	}
	if p.mode&glyphUnderline != 0 {
		b = append(b, ";4"...)
	}
	if p.mode&glyphBlink != 0 {
		b = append(b, ";5"...)
	}
	if p.mode&glyphReverse != 0 {
		b = append(b, ";7"...)
	}
	b = appendColor(b, p.fg, 30, 90, 38)
	b = appendColor(b, p.bg, 40, 100, 48)
	return append(b, 'm')
}

// appendColor writes a colour as SGR parameters: base+n for the 8 ANSI
// colours, bright+n-8 for the bright ones, ext;5;n for the 256-colour
// palette, ext;2;r;g;b for true colour, nothing for the default.
func appendColor(b []byte, c vt10x.Color, base, bright, ext int) []byte {
	switch {
	case c == vt10x.DefaultFG || c == vt10x.DefaultBG || c >= 1<<24:
		return b
	case c < 8:
		b = append(b, ';')
		return strconv.AppendInt(b, int64(base)+int64(c), 10)
	case c < 16:
		b = append(b, ';')
		return strconv.AppendInt(b, int64(bright)+int64(c)-8, 10)
	case c < 256:
		b = append(b, ';')
		b = strconv.AppendInt(b, int64(ext), 10)
		b = append(b, ";5;"...)
		return strconv.AppendInt(b, int64(c), 10)
	default:
		b = append(b, ';')
		b = strconv.AppendInt(b, int64(ext), 10)
		b = append(b, ";2;"...)
		b = strconv.AppendInt(b, int64(c>>16&0xff), 10)
		b = append(b, ';')
		b = strconv.AppendInt(b, int64(c>>8&0xff), 10)
		b = append(b, ';')
		return strconv.AppendInt(b, int64(c&0xff), 10)
	}
}

func appendRune(b []byte, r rune) []byte {
	if r < 0x80 {
		return append(b, byte(r))
	}
	return append(b, string(r)...)
}
