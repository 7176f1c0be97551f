// Package termkeys names the detach key of `legion attach` and recognises
// it in the byte stream a terminal sends: as the raw control byte (0x1c for
// Ctrl-\), and in
// the two encodings agents switch on for richer keyboard input, CSI-u (the
// kitty keyboard protocol and xterm's formatOtherKeys=1: ESC [ 92 ; 5 u) and
// xterm's modifyOtherKeys (ESC [ 27 ; 5 ; 92 ~).
//
// It owns key names (ParseKey is the one parser of "ctrl-X" keys: the
// --detach-key flag and worker.detach_key in legion.toml both decode
// through it) and the stream matcher only. It never reads or writes a
// terminal, never changes terminal modes and never drops or reorders a byte
// that is not part of the detach key.
package termkeys

import (
	"fmt"
	"strings"
)

// DefaultKey is the detach key when none is configured.
const DefaultKey = `ctrl-\`

// Key is a Ctrl+character key. Build one with ParseKey; the zero Key is not
// a valid key.
type Key struct {
	name  string // canonical name, e.g. `ctrl-\`
	raw   byte   // the C0 control byte a legacy terminal sends
	codes []int  // key codes that CSI-u and modifyOtherKeys may report for it
}

// String is the key's canonical name, which ParseKey accepts.
func (k Key) String() string { return k.name }

// Raw is the control byte a terminal sends for the key in legacy mode.
func (k Key) Raw() byte { return k.raw }

// refused are Ctrl keys that are ordinary typing on every terminal, so they
// cannot detach.
var refused = map[byte]string{
	'[': "it is Escape, which starts every escape sequence",
	'i': "it is Tab",
	'j': "it is Line Feed (Enter on some terminals)",
	'm': "it is Enter (Carriage Return)",
	'h': "it is Backspace on many terminals",
}

// ParseKey parses a detach key: "ctrl-" (or "ctrl+", "c-", "^") followed by
// one letter, one of @ [ \ ] ^ _, or "space". Case does not matter.
// Examples: `ctrl-\` (the default), "ctrl-]", "ctrl-a", "^Q", "C-space".
// Keys that are ordinary typing (Tab, Enter, Backspace, Escape) are refused.
func ParseKey(s string) (Key, error) {
	lower := strings.ToLower(strings.TrimSpace(s))
	var rest string
	for _, prefix := range []string{"ctrl-", "ctrl+", "c-", "^"} {
		if r, ok := strings.CutPrefix(lower, prefix); ok {
			rest = r
			break
		}
	}
	if rest == "" {
		return Key{}, fmt.Errorf("detach key %q: want ctrl-<key>, e.g. %q, %q or %q", s, DefaultKey, "ctrl-]", "ctrl-a")
	}
	if rest == "space" {
		return Key{name: "ctrl-space", raw: 0, codes: []int{' '}}, nil
	}
	if len(rest) != 1 {
		return Key{}, fmt.Errorf("detach key %q: want one letter, one of @[\\]^_ or \"space\" after ctrl-", s)
	}
	c := rest[0]
	if why, ok := refused[c]; ok {
		return Key{}, fmt.Errorf("detach key %q cannot be used: %s", s, why)
	}
	switch {
	case 'a' <= c && c <= 'z':
		return Key{name: "ctrl-" + rest, raw: c - 'a' + 1, codes: []int{int(c), int(c - 'a' + 'A')}}, nil
	case strings.IndexByte(`@\]^_`, c) >= 0:
		return Key{name: "ctrl-" + rest, raw: c & 0x1f, codes: []int{int(c)}}, nil
	}
	return Key{}, fmt.Errorf("detach key %q: want one letter, one of @[\\]^_ or \"space\" after ctrl-", s)
}

// MustParseKey is ParseKey for constants; it panics on a bad name.
func MustParseKey(s string) Key {
	k, err := ParseKey(s)
	if err != nil {
		panic(err)
	}
	return k
}

// UnmarshalText parses a key as ParseKey does, so a Key can be decoded
// from legion.toml or JSON.
func (k *Key) UnmarshalText(text []byte) error {
	p, err := ParseKey(string(text))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

// MarshalText writes the key's canonical name.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.name), nil }

// Equal reports whether k and o are the same key (two parses of one key
// are equal; their canonical names are).
func (k Key) Equal(o Key) bool { return k.name == o.name }

// hasCode reports whether a CSI-u or modifyOtherKeys key code is this key.
func (k Key) hasCode(code int) bool {
	for _, c := range k.codes {
		if c == code {
			return true
		}
	}
	return false
}

// Modifier bits of CSI-u and modifyOtherKeys (the parameter is 1 + bits:
// shift 1, alt 2, ctrl 4, super 8, hyper 16, meta 32, caps lock 64, num
// lock 128).
const (
	modCtrl     = 4
	modCapsLock = 64
	modNumLock  = 128
)

// ctrlOnly reports whether a modifier parameter means Ctrl with no other
// modifier; Caps Lock and Num Lock, which kitty may report, are ignored.
func ctrlOnly(param int) bool {
	if param < 1 {
		return false
	}
	return (param-1)&^(modCapsLock|modNumLock) == modCtrl
}
