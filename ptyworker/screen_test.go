package ptyworker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hinshun/vt10x"

	"github.com/legion-dev/legion/internal/waitfor"
)

// feedScreen writes text to a fresh screen through a ring in pieces of the
// given sizes and returns the screen.
func feedScreen(t testing.TB, text []byte, pieces []int, cols, rows int) *screen {
	t.Helper()
	o := newOutput(1 << 20)
	s := newScreen(cols, rows)
	for len(text) > 0 {
		n := len(text)
		if len(pieces) > 0 {
			n = min(max(pieces[0], 1), len(text))
			pieces = pieces[1:]
		}
		o.write(text[:n])
		text = text[n:]
		s.mu.Lock()
		s.advance(o, o.head())
		s.mu.Unlock()
	}
	return s
}

func TestScreenSplitUTF8(t *testing.T) {
	text := []byte("héllo wörld → ✓ 日本 \U0001F600 end\r\nsecond line ü")
	want := feedScreen(t, text, nil, 40, 4).vt.String()
	for split := 1; split < len(text); split++ {
		got := feedScreen(t, text, []int{split}, 40, 4).vt.String()
		if got != want {
			t.Fatalf("split at %d: screen\n%s\nwant\n%s", split, got, want)
		}
	}
	// Byte by byte.
	ones := make([]int, len(text))
	for i := range ones {
		ones[i] = 1
	}
	if got := feedScreen(t, text, ones, 40, 4).vt.String(); got != want {
		t.Errorf("byte by byte: screen\n%s\nwant\n%s", got, want)
	}
}

func TestModeScanner(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		paste      bool
		kitty      int
		modifyKeys int
	}{
		{"nothing", "plain text", false, 0, 0},
		{"bracketed paste on", "\x1b[?2004h", true, 0, 0},
		{"bracketed paste off again", "\x1b[?2004h\x1b[?1;2004l", false, 0, 0},
		{"kitty push", "\x1b[>1u", false, 1, 0},
		{"kitty push pop", "\x1b[>1u\x1b[>3u\x1b[<u", false, 1, 0},
		{"kitty set", "\x1b[>1u\x1b[=5;1u", false, 5, 0},
		{"modifyOtherKeys", "\x1b[>4;2m", false, 0, 2},
		{"reset", "\x1b[?2004h\x1b[>4;2m\x1bc", false, 0, 0},
		{"split sequence", "\x1b[?20" + "04h", true, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m modeScanner
			for i := range len(tc.in) {
				m.scan([]byte{tc.in[i]})
			}
			if m.bracketedPaste != tc.paste || m.kittyFlags() != tc.kitty || m.modifyOther != tc.modifyKeys {
				t.Errorf("scan(%q) = paste %v kitty %d modifyOtherKeys %d; want %v %d %d", tc.in, m.bracketedPaste, m.kittyFlags(), m.modifyOther, tc.paste, tc.kitty, tc.modifyKeys)
			}
		})
	}
}

// TestRenderReproducesScreen renders screens and replays the rendering in a
// fresh terminal: characters, colours, attributes, cursor and modes match.
func TestRenderReproducesScreen(t *testing.T) {
	tests := []struct{ name, in string }{
		{"text", "hello\r\nworld"},
		{"colours", "\x1b[31mred\x1b[0m \x1b[1;44mbold on blue\x1b[0m \x1b[38;5;200mpalette\x1b[38;2;1;2;3mtrue\x1b[0m"},
		{"attributes", "\x1b[4munder\x1b[24m \x1b[7mrev\x1b[27m \x1b[3mital\x1b[0m"},
		{"cursor moves", "\x1b[5;10Hmiddle\x1b[2;3Hup\x1b[10;1H"},
		{"alternate screen", "main\x1b[?1049h\x1b[Halt screen\x1b[3;3H"},
		{"hidden cursor and modes", "\x1b[?25l\x1b[?1h\x1b=\x1b[?1000h\x1b[?1006hx"},
		{"wrapped line", strings.Repeat("abcdefghij", 5)},
		{"full last row", "\x1b[12;1H" + strings.Repeat("z", 30)},
		{"title", "\x1b]2;my title\x07x"},
		{"pen carried", "\x1b[32mgreen continues"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := feedScreen(t, []byte(tc.in), nil, 30, 12)
			snap := render(s.vt, &s.modes)
			replay := vt10x.New(vt10x.WithSize(30, 12))
			replay.Write(snap)
			if diff := cmp.Diff(cells(s.vt), cells(replay)); diff != "" {
				t.Errorf("replayed screen differs (-want +got):\n%s", diff)
			}
			if w, g := s.vt.Cursor(), replay.Cursor(); w.X != g.X || w.Y != g.Y || w.Attr.FG != g.Attr.FG || w.Attr.Mode != g.Attr.Mode {
				t.Errorf("cursor = %+v; want %+v", g, w)
			}
			if w, g := s.vt.Mode(), replay.Mode(); w != g {
				t.Errorf("modes = %b; want %b", g, w)
			}
			if w, g := s.vt.Title(), replay.Title(); w != g {
				t.Errorf("title = %q; want %q", g, w)
			}
			if s.vt.CursorVisible() != replay.CursorVisible() {
				t.Errorf("cursor visible = %v; want %v", replay.CursorVisible(), s.vt.CursorVisible())
			}
		})
	}
}

// cells is a comparable picture of a terminal's visible screen (blanks as
// spaces; the wrap bit is bookkeeping, not appearance).
func cells(v vt10x.Terminal) [][]vt10x.Glyph {
	v.Lock()
	defer v.Unlock()
	cols, rows := v.Size()
	out := make([][]vt10x.Glyph, rows)
	for y := range rows {
		out[y] = make([]vt10x.Glyph, cols)
		for x := range cols {
			g := v.Cell(x, y)
			if g.Char == 0 {
				g.Char = ' '
			}
			g.Mode &^= 1 << 6 // attrWrap
			g.Mode &^= 1 << 3 // attrGfx
			out[y][x] = g
		}
	}
	return out
}

func TestScreenFollowerSkipsFloods(t *testing.T) {
	o := newOutput(1 << 20)
	s := newScreen(20, 5)
	o.write([]byte("before the flood\r\n"))
	if _, flood := s.step(o); flood {
		t.Fatal("step after 18 bytes reported a flood")
	}
	if !strings.Contains(s.vt.String(), "before the flood") {
		t.Fatalf("screen:\n%s\nwant the first line parsed", s.vt.String())
	}
	parsed := s.fed

	// A flood: nothing of it is parsed while it lasts...
	o.write([]byte(strings.Repeat("x", screenMaxLag+1000)))
	if fed, flood := s.step(o); !flood || fed != s.fed {
		t.Fatalf("step after a flood = %d, %v; want %d (fed), true", fed, flood, s.fed)
	}
	if s.fed != o.head()-screenKeep || s.skipped != o.head()-screenKeep-parsed {
		t.Errorf("after the flood: fed %d, skipped %d; want fed %d (head %d - screenKeep), the rest skipped", s.fed, s.skipped, o.head()-screenKeep, o.head())
	}
	if strings.Contains(s.vt.String(), "x") {
		t.Errorf("screen during the flood:\n%s\nwant nothing of the flood parsed yet", s.vt.String())
	}
	o.write([]byte(strings.Repeat("y", screenMaxLag+1)))
	if _, flood := s.step(o); !flood {
		t.Fatal("the flood went on, but step did not report it")
	}

	// ...and once it is over the last bytes are.
	o.write([]byte("\r\nTHE END"))
	if _, flood := s.step(o); flood {
		t.Fatal("step after the flood ended reported one")
	}
	if s.fed != o.head() || !strings.Contains(s.vt.String(), "THE END") {
		t.Errorf("fed %d, head %d, screen:\n%s\nwant all parsed and THE END on the screen", s.fed, o.head(), s.vt.String())
	}
}

// TestScreenFollowerCatchesUpAfterFlood: a flood that ends with no output
// after it is still parsed to its end, without waiting for more output.
func TestScreenFollowerCatchesUpAfterFlood(t *testing.T) {
	o := newOutput(1 << 20)
	s := newScreen(20, 5)
	sub := newSubscriber(0, nil)
	o.subscribe(sub, 0)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); s.follow(o, sub, stop) }()
	defer func() { close(stop); <-done }()

	<-time.After(20 * time.Millisecond) // the follower took the subscribe poke
	o.write([]byte(strings.Repeat("x", screenMaxLag+1000) + "\r\nTHE END"))
	waitfor.Check(t, waitTimeout, "the screen follower to parse the flood", func() error {
		s.mu.Lock()
		fed, text := s.fed, s.vt.String()
		s.mu.Unlock()
		if fed == o.head() && strings.Contains(text, "THE END") {
			return nil
		}
		return fmt.Errorf("screen follower at %d of %d after the flood; screen:\n%s\nwant all parsed and THE END shown", fed, o.head(), text)
	})
}
