package termkeys

import (
	"bytes"
	"strconv"
)

const esc = 0x1b

// maxSeq bounds how long a candidate escape sequence may grow before it is
// judged not to be the key. Real encodings of a Ctrl key are under 30 bytes.
const maxSeq = 64

// Matcher finds the detach key in the input stream of a terminal, read by
// read. Use one Matcher per stream; it is not safe for concurrent use.
//
// Everything that is not the key passes through unchanged and in order. A
// read may end inside an escape sequence that could still become the key;
// those bytes are held back and decided with the next read: the key if the
// sequence completes as the key, passed through otherwise. Bytes are held
// across at most one read boundary, so a sequence split over three or more
// reads is passed through, not matched. Because a terminal sends a lone
// Escape key press as just ESC, a caller must not wait for the next read to
// release it: when Pending reports held bytes, call Flush after a short idle
// time (tmux's escape-time, 10–50 ms) and forward what it returns.
type Matcher struct {
	key     Key
	held    []byte // a possible start of the key, from the last read
	scratch []byte // held + the next read
}

// NewMatcher returns a Matcher for key k.
func NewMatcher(k Key) *Matcher { return &Matcher{key: k} }

// Feed scans the next read p. pass is what to forward to the session: with
// detached false, every byte of p up to any bytes now held back (see Pending),
// preceded by the bytes held from the previous read; with detached true,
// everything before the key. Bytes after the key are dropped, and the Matcher
// starts afresh. pass may alias p or the Matcher's buffers and is valid until
// the next call to Feed or Flush.
func (m *Matcher) Feed(p []byte) (pass []byte, detached bool) {
	buf := p
	carried := len(m.held) // bytes of buf that were already held once
	if carried > 0 {
		m.scratch = append(append(m.scratch[:0], m.held...), p...)
		buf = m.scratch
		m.held = m.held[:0]
	}
	for i := 0; i < len(buf); i++ {
		switch c := buf[i]; {
		case c == m.key.raw:
			m.held = m.held[:0]
			return buf[:i], true
		case c != esc:
			continue
		}
		switch m.key.matchSeq(buf[i:]) {
		case seqKey:
			m.held = m.held[:0]
			return buf[:i], true
		case seqPartial:
			if i >= carried {
				m.held = append(m.held, buf[i:]...)
				return buf[:i], false
			}
			// Already held across one read boundary: let it go.
		}
	}
	return buf, false
}

// Pending reports whether bytes are held back waiting for the next read.
func (m *Matcher) Pending() bool { return len(m.held) > 0 }

// Flush releases the held bytes, to be forwarded as they are; the input has
// been idle, so they were not the key. The result is valid until the next
// call to Feed or Flush.
func (m *Matcher) Flush() []byte {
	if len(m.held) == 0 {
		return nil
	}
	m.scratch = append(m.scratch[:0], m.held...)
	m.held = m.held[:0]
	return m.scratch
}

// seqResult is what an escape sequence starting at ESC turns out to be.
type seqResult int

const (
	seqOther   seqResult = iota // not the key
	seqKey                      // the key, complete
	seqPartial                  // could still become the key; more bytes needed
)

// matchSeq judges the escape sequence at the start of b (b[0] is ESC). The
// key is CSI params final, with params of digits, ';' and ':' only and final
// 'u' (CSI-u) or '~' (modifyOtherKeys).
func (k Key) matchSeq(b []byte) seqResult {
	if len(b) < 2 {
		return seqPartial
	}
	if b[1] != '[' {
		return seqOther
	}
	for j := 2; j < len(b) && j < maxSeq; j++ {
		c := b[j]
		if '0' <= c && c <= '9' || c == ';' || c == ':' {
			continue
		}
		if (c == 'u' || c == '~') && k.paramsMatch(b[2:j], c) {
			return seqKey
		}
		return seqOther
	}
	if len(b) >= maxSeq {
		return seqOther
	}
	return seqPartial
}

// paramsMatch reports whether the parameters of a CSI sequence ending in
// final are the key pressed with Ctrl alone.
//
// CSI-u: code[:alternates...] ; modifiers[:event] [; text] u, where event 1
// (press, the default) and 2 (repeat) match and 3 (release) does not.
// modifyOtherKeys: 27 ; modifiers ; code ~.
func (k Key) paramsMatch(params []byte, final byte) bool {
	fields := bytes.Split(params, []byte(";"))
	switch final {
	case 'u':
		if len(fields) < 2 || len(fields) > 3 {
			return false
		}
		code, ok := number(first(fields[0]))
		if !ok || !k.hasCode(code) {
			return false
		}
		sub := bytes.Split(fields[1], []byte(":"))
		if len(sub) > 2 {
			return false
		}
		mods, ok := number(sub[0])
		if !ok || !ctrlOnly(mods) {
			return false
		}
		if len(sub) == 2 {
			event, ok := number(sub[1])
			return ok && (event == 1 || event == 2)
		}
		return true
	case '~':
		if len(fields) != 3 {
			return false
		}
		lead, ok1 := number(fields[0])
		mods, ok2 := number(fields[1])
		code, ok3 := number(fields[2])
		return ok1 && ok2 && ok3 && lead == 27 && ctrlOnly(mods) && k.hasCode(code)
	}
	return false
}

// first is a field's first ':'-separated part.
func first(field []byte) []byte {
	if i := bytes.IndexByte(field, ':'); i >= 0 {
		return field[:i]
	}
	return field
}

// number parses a non-empty decimal parameter of at most 7 digits (enough
// for any Unicode code point).
func number(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 7 {
		return 0, false
	}
	n, err := strconv.Atoi(string(b))
	return n, err == nil
}
