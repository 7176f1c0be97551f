package ptyworker

import (
	"errors"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hinshun/vt10x"
)

// Screen follower tuning. vt10x parses at roughly 10-20 MB/s, far slower
// than a PTY can produce, so the follower trails the ring in its own
// goroutine. When it is more than screenMaxLag behind (a flood of output)
// it gives up on all but the last screenKeep bytes and parses nothing
// until the flood is over: it rests screenFloodRest and looks again. Once
// less than screenMaxLag came in since, it parses what is left, so the
// screen shows what those last bytes drew (best effort). A flood thus costs
// the worker no parsing at all, and ordinary output is parsed exactly. A
// snapshot taken during a flood parses what the ring holds (see snapshot).
const (
	screenMaxLag = 256 << 10
	screenKeep   = 32 << 10
	screenChunk  = 16 << 10
	// screenCoalesce is the pause after a batch, so a stream of small writes
	// is parsed in fewer, larger batches.
	screenCoalesce  = 5 * time.Millisecond
	screenFloodRest = 25 * time.Millisecond
)

// screen is a VT emulator fed from the output ring, used to render a
// snapshot for clients that attach from an offset no longer in the ring.
type screen struct {
	mu      sync.Mutex
	vt      vt10x.Terminal
	fed     uint64 // offset of the next byte to feed
	carry   []byte // the start of a UTF-8 sequence split across reads
	resizes []sizeAt
	modes   modeScanner
	skipped uint64 // bytes never parsed (ring overrun or jump-ahead)
	buf     []byte
}

// sizeAt is a resize that takes effect at an output offset.
type sizeAt struct {
	off        uint64
	cols, rows int
}

func newScreen(cols, rows int) *screen {
	return &screen{vt: vt10x.New(vt10x.WithSize(cols, rows)), buf: make([]byte, screenChunk)}
}

// queueResize records that output from offset off on is drawn at the new
// size.
func (s *screen) queueResize(off uint64, cols, rows int) {
	s.mu.Lock()
	s.resizes = append(s.resizes, sizeAt{off, cols, rows})
	s.mu.Unlock()
}

// advance parses output up to offset to, what of it is still in the ring.
// The caller holds s.mu.
func (s *screen) advance(o *output, to uint64) {
	for s.fed < to {
		stop := to
		for len(s.resizes) > 0 && s.resizes[0].off <= s.fed {
			s.applyResize()
		}
		if len(s.resizes) > 0 && s.resizes[0].off < stop {
			stop = s.resizes[0].off
		}
		want := stop - s.fed
		if want > uint64(len(s.buf)) {
			want = uint64(len(s.buf))
		}
		n, err := o.readAt(s.buf[:want], s.fed)
		if errors.Is(err, ErrTooOld) {
			oldest, _, _ := o.bounds()
			s.skipTo(oldest)
			continue
		}
		if err != nil || n == 0 {
			return
		}
		s.feed(s.buf[:n])
		s.fed += uint64(n)
	}
	for len(s.resizes) > 0 && s.resizes[0].off <= s.fed {
		s.applyResize()
	}
}

func (s *screen) applyResize() {
	r := s.resizes[0]
	s.resizes = s.resizes[1:]
	s.vt.Resize(r.cols, r.rows)
}

// skipTo gives up on the bytes before off.
func (s *screen) skipTo(off uint64) {
	if off <= s.fed {
		return
	}
	s.skipped += off - s.fed
	s.fed = off
	s.carry = s.carry[:0]
}

// feed parses p, holding back a UTF-8 sequence cut at its end (vt10x would
// drop it).
func (s *screen) feed(p []byte) {
	s.modes.scan(p)
	if len(s.carry) > 0 {
		held := len(s.carry)
		take := min(utf8.UTFMax-held, len(p))
		s.carry = append(s.carry, p[:take]...)
		if !utf8.FullRune(s.carry) {
			return // all of p went into the carry, still incomplete
		}
		_, size := utf8.DecodeRune(s.carry)
		if size > held {
			// The held sequence completes with p's first bytes.
			s.vt.Write(s.carry[:size])
			p = p[size-held:]
		} else {
			// The held bytes are invalid: vt10x skips them.
			s.vt.Write(s.carry[:held])
		}
		s.carry = s.carry[:0]
	}
	cut := len(p)
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				cut = i
			}
			break
		}
	}
	if cut > 0 {
		s.vt.Write(p[:cut])
	}
	s.carry = append(s.carry, p[cut:]...)
}

// follow keeps the screen close to the head until stop is closed. It exits
// when stop is closed.
func (s *screen) follow(o *output, sub *subscriber, stop <-chan struct{}) {
	for {
		select {
		case <-sub.wake:
		case <-stop:
			return
		}
		fed, flood := s.step(o)
		sub.next.Store(fed)
		rest := screenCoalesce
		if flood {
			rest = screenFloodRest
		}
		select {
		case <-time.After(rest):
		case <-stop:
			return
		}
		if flood || o.head() > fed {
			// Look again: the flood may have ended meanwhile, or output
			// came while parsing (which wakes a consumer only once a
			// batch is pending: see subscriber).
			sub.poke()
		}
	}
}

// step is one look of the follower: it parses the output that was there
// when it began, unless there is a flood (more than screenMaxLag unparsed,
// also once it began while parsing): then it skips to the last screenKeep
// bytes and parses no more. It returns the offset parsed up to and whether
// there was a flood.
func (s *screen) step(o *output) (fed uint64, flood bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := o.head()
	for {
		if head := o.head(); head-s.fed > screenMaxLag {
			s.skipTo(head - screenKeep)
			return s.fed, true
		}
		if s.fed >= end {
			return s.fed, false
		}
		// A chunk at a time, so a flood that starts meanwhile is seen.
		s.advance(o, min(end, s.fed+screenChunk))
	}
}

// snapshot brings the screen up to the output head, renders it and
// subscribes sub from the offset the rendering reflects, all under the
// screen's lock so no output falls between the two.
func (s *screen) snapshot(o *output, sub *subscriber) ([]byte, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	head := o.head()
	s.advance(o, head)
	o.subscribe(sub, s.fed)
	return render(s.vt, &s.modes), s.fed
}

// text brings the screen up to the output head and returns its text, one
// line per row.
func (s *screen) text(o *output) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(o, o.head())
	return s.vt.String()
}

// modeScanner tracks terminal modes that vt10x does not keep but an
// attaching terminal must be switched into: bracketed paste, the kitty
// keyboard protocol flags and xterm's modifyOtherKeys.
type modeScanner struct {
	state          uint8 // 0 ground, 1 ESC, 2 CSI
	params         []byte
	bracketedPaste bool
	kitty          []int // stack of kitty keyboard flags; the top is current
	modifyOther    int
}

func (m *modeScanner) scan(p []byte) {
	for _, c := range p {
		switch m.state {
		case 0:
			if c == 0x1b {
				m.state = 1
			}
		case 1:
			switch c {
			case '[':
				m.state = 2
				m.params = m.params[:0]
			case 'c': // RIS
				*m = modeScanner{params: m.params[:0]}
			case 0x1b:
			default:
				m.state = 0
			}
		case 2:
			switch {
			case c >= 0x30 && c <= 0x3f || c >= 0x20 && c <= 0x2f:
				if len(m.params) < 64 {
					m.params = append(m.params, c)
				}
			case c >= 0x40 && c <= 0x7e:
				m.csi(c)
				m.state = 0
			case c == 0x1b:
				m.state = 1
			case c == 0x18 || c == 0x1a: // CAN, SUB abort the sequence
				m.state = 0
			}
		}
	}
}

func (m *modeScanner) csi(final byte) {
	if len(m.params) == 0 {
		return
	}
	prefix, args := m.params[0], parseParams(m.params[1:])
	switch {
	case prefix == '?' && (final == 'h' || final == 'l'):
		for _, a := range args {
			if a == 2004 {
				m.bracketedPaste = final == 'h'
			}
		}
	case prefix == '>' && final == 'u': // kitty: push flags
		f := 0
		if len(args) > 0 {
			f = args[0]
		}
		if len(m.kitty) < 16 {
			m.kitty = append(m.kitty, f)
		}
	case prefix == '<' && final == 'u': // kitty: pop n
		n := 1
		if len(args) > 0 && args[0] > 0 {
			n = args[0]
		}
		if n > len(m.kitty) {
			n = len(m.kitty)
		}
		m.kitty = m.kitty[:len(m.kitty)-n]
	case prefix == '=' && final == 'u': // kitty: set flags (mode 1 only)
		f, mode := 0, 1
		if len(args) > 0 {
			f = args[0]
		}
		if len(args) > 1 {
			mode = args[1]
		}
		if len(m.kitty) == 0 {
			m.kitty = append(m.kitty, 0)
		}
		top := &m.kitty[len(m.kitty)-1]
		switch mode {
		case 1:
			*top = f
		case 2:
			*top |= f
		case 3:
			*top &^= f
		}
	case prefix == '>' && final == 'm': // xterm modifyOtherKeys: CSI > 4 ; n m
		if len(args) > 0 && args[0] == 4 {
			v := 0
			if len(args) > 1 {
				v = args[1]
			}
			m.modifyOther = v
		}
	}
}

// kittyFlags is the current kitty keyboard flags (0: off).
func (m *modeScanner) kittyFlags() int {
	if len(m.kitty) == 0 {
		return 0
	}
	return m.kitty[len(m.kitty)-1]
}

// parseParams reads "1;2;3" (missing numbers are 0); other bytes end it.
func parseParams(p []byte) []int {
	var out []int
	cur, have := 0, false
	for _, c := range p {
		switch {
		case c >= '0' && c <= '9':
			if cur < 1<<20 {
				cur = cur*10 + int(c-'0')
			}
			have = true
		case c == ';':
			out = append(out, cur)
			cur, have = 0, false
		default:
			if have {
				out = append(out, cur)
			}
			return out
		}
	}
	if have || len(out) > 0 {
		out = append(out, cur)
	}
	return out
}
