package termkeys

import (
	"bytes"
	"strings"
	"testing"
)

// feedAll feeds pieces in order and returns what passed (plus a final Flush
// when no detach happened) and whether the key was seen.
func feedAll(m *Matcher, pieces ...[]byte) ([]byte, bool) {
	var out []byte
	for _, p := range pieces {
		pass, det := m.Feed(p)
		out = append(out, pass...)
		if det {
			return out, true
		}
	}
	return append(out, m.Flush()...), false
}

func TestMatcherDetach(t *testing.T) {
	tests := []struct {
		key, enc string
	}{
		{`ctrl-\`, "\x1c"},
		{`ctrl-\`, "\x1b[92;5u"},
		{`ctrl-\`, "\x1b[92;5:1u"},
		{`ctrl-\`, "\x1b[92;5:2u"},
		{`ctrl-\`, "\x1b[92:124;5u"},
		{`ctrl-\`, "\x1b[92::92;5u"},
		{`ctrl-\`, "\x1b[92;69u"},  // caps lock
		{`ctrl-\`, "\x1b[92;133u"}, // num lock
		{`ctrl-\`, "\x1b[92;5;28u"},
		{`ctrl-\`, "\x1b[27;5;92~"},
		{"ctrl-]", "\x1d"},
		{"ctrl-]", "\x1b[93;5u"},
		{"ctrl-]", "\x1b[27;5;93~"},
		{"ctrl-a", "\x01"},
		{"ctrl-a", "\x1b[97;5u"},
		{"ctrl-a", "\x1b[27;5;97~"},
		{"ctrl-a", "\x1b[65;69u"},
		{"ctrl-space", "\x00"},
		{"ctrl-space", "\x1b[32;5u"},
	}
	for _, tt := range tests {
		t.Run(tt.key+" "+strings.ReplaceAll(tt.enc, "\x1b", "ESC"), func(t *testing.T) {
			k := MustParseKey(tt.key)
			in := []byte("ab\x1b[A" + tt.enc + "cd")
			want := "ab\x1b[A"
			for split := 0; split <= len(in); split++ {
				got, det := feedAll(NewMatcher(k), in[:split], in[split:])
				if !det || string(got) != want {
					t.Errorf("Feed(%q | %q) = %q, %v; want %q, true", in[:split], in[split:], got, det, want)
				}
			}
		})
	}
}

func TestMatcherPassThrough(t *testing.T) {
	long := "\x1b[" + strings.Repeat("1", 70) + ";5u"
	tests := []struct {
		key, in string
	}{
		{`ctrl-\`, "plain text"},
		{`ctrl-\`, "\x1b[92;5:3u"},   // release
		{`ctrl-\`, "\x1b[92;6u"},     // ctrl-shift
		{`ctrl-\`, "\x1b[92;7u"},     // ctrl-alt
		{`ctrl-\`, "\x1b[92;13u"},    // ctrl-super
		{`ctrl-\`, "\x1b[92u"},       // no modifier
		{`ctrl-\`, "\x1b[92;1u"},     // explicit no modifier
		{`ctrl-\`, "\x1b[92;u"},      // empty modifier
		{`ctrl-\`, "\x1b[;5u"},       // empty code
		{`ctrl-\`, "\x1b[93;5u"},     // ctrl-]
		{`ctrl-\`, "\x1b[92;5;1;1u"}, // too many fields
		{`ctrl-\`, "\x1b[27;5;93~"},  // ctrl-] in modifyOtherKeys
		{`ctrl-\`, "\x1b[27;6;92~"},
		{`ctrl-\`, "\x1b[28;5;92~"},
		{`ctrl-\`, "\x1b[27;5~"},
		{`ctrl-\`, "\x1b[A\x1b[1;5A\x1bOA\x1b[3~"},
		{`ctrl-\`, "\x1b\x1b[B"},
		{`ctrl-\`, "\x1b"},
		{`ctrl-\`, "\x1b["},
		{`ctrl-\`, "\x1b[92;5"},
		{`ctrl-\`, "\x1b[200~pasted\x1b[201~"},
		{`ctrl-\`, "\x1b[?1u"},
		{`ctrl-\`, "\x1b]11;rgb:0000/0000/0000\x1b\\"},
		{`ctrl-\`, "\x01\x1d\x1b[97;5u"},
		{`ctrl-\`, long},
		{"ctrl-a", "\x1c\x1b[92;5u"},
		{"ctrl-a", "\x1b[98;5u\x1b[97;6u"},
	}
	for _, tt := range tests {
		t.Run(tt.key+" "+strings.ReplaceAll(tt.in, "\x1b", "ESC"), func(t *testing.T) {
			k := MustParseKey(tt.key)
			in := []byte(tt.in)
			for split := 0; split <= len(in); split++ {
				got, det := feedAll(NewMatcher(k), in[:split], in[split:])
				if det || !bytes.Equal(got, in) {
					t.Errorf("Feed(%q | %q) = %q, %v; want %q, false", in[:split], in[split:], got, det, in)
				}
			}
			// One byte per read: everything passes through unchanged.
			var pieces [][]byte
			for i := range in {
				pieces = append(pieces, in[i:i+1])
			}
			if got, det := feedAll(NewMatcher(k), pieces...); det || !bytes.Equal(got, in) {
				t.Errorf("Feed byte by byte %q = %q, %v; want it unchanged", in, got, det)
			}
		})
	}
}

func TestMatcherHoldsOneRead(t *testing.T) {
	k := MustParseKey(DefaultKey)
	m := NewMatcher(k)

	pass, det := m.Feed([]byte("x\x1b[92"))
	if det || string(pass) != "x" || !m.Pending() {
		t.Fatalf("Feed(x ESC[92) = %q, %v, pending %v; want \"x\", false, pending", pass, det, m.Pending())
	}
	// The next read does not finish the sequence: the held bytes go out.
	pass, det = m.Feed([]byte(";5"))
	if det || string(pass) != "\x1b[92;5" || m.Pending() {
		t.Fatalf("Feed(;5) = %q, %v, pending %v; want the held bytes released", pass, det, m.Pending())
	}
	pass, det = m.Feed([]byte("u"))
	if det || string(pass) != "u" {
		t.Fatalf("Feed(u) = %q, %v; want \"u\", false", pass, det)
	}

	// A lone ESC is held until Flush.
	pass, det = m.Feed([]byte("\x1b"))
	if det || len(pass) != 0 || !m.Pending() {
		t.Fatalf("Feed(ESC) = %q, %v, pending %v; want held", pass, det, m.Pending())
	}
	if got := m.Flush(); string(got) != "\x1b" || m.Pending() {
		t.Fatalf("Flush() = %q, pending %v; want ESC, not pending", got, m.Pending())
	}
	if got := m.Flush(); got != nil {
		t.Fatalf("second Flush() = %q; want nil", got)
	}

	// A raw key inside a held sequence still detaches, after the held bytes.
	m.Feed([]byte("\x1b[9"))
	pass, det = m.Feed([]byte("\x1cz"))
	if !det || string(pass) != "\x1b[9" {
		t.Fatalf("Feed(ESC[9 | ^\\ z) = %q, %v; want \"ESC[9\", true", pass, det)
	}
	if m.Pending() {
		t.Errorf("Pending() after detach = true; want false")
	}
}
