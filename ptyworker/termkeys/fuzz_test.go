package termkeys

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var fuzzKeys = []string{`ctrl-\`, "ctrl-]", "ctrl-a", "ctrl-space"}

// Reference encodings, written independently of the Matcher.
var (
	csiU = regexp.MustCompile(`^\x1b\[([0-9]+)(?::[0-9]*)*;([0-9]+)(?::([0-9]+))?(?:;[0-9:]*)?u`)
	mok  = regexp.MustCompile(`^\x1b\[27;([0-9]+);([0-9]+)~`)
)

// referenceKeyAt reports whether data[i:] starts with an encoding of k.
func referenceKeyAt(k Key, data []byte, i int) bool {
	if data[i] == k.Raw() {
		return true
	}
	rest := data[i:]
	if len(rest) > maxSeq {
		rest = rest[:maxSeq] // the Matcher's bound on a sequence
	}
	atoi := func(s string) int {
		if len(s) > 7 {
			return -1
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return -1
		}
		return n
	}
	ctrl := func(s string) bool { m := atoi(s); return m >= 1 && (m-1)&^192 == 4 }
	code := func(s string) bool {
		c := atoi(s)
		name := k.String()[len("ctrl-"):]
		switch name {
		case "space":
			return c == ' '
		default:
			return c == int(name[0]) || (name[0] >= 'a' && name[0] <= 'z' && c == int(strings.ToUpper(name)[0]))
		}
	}
	if m := csiU.FindSubmatch(rest); m != nil {
		ev := string(m[3])
		if code(string(m[1])) && ctrl(string(m[2])) && (ev == "" || atoi(ev) == 1 || atoi(ev) == 2) {
			return true
		}
	}
	if m := mok.FindSubmatch(rest); m != nil && ctrl(string(m[1])) && code(string(m[2])) {
		return true
	}
	return false
}

// FuzzMatcher checks the Matcher against the reference: it stops at the
// first encoding of the key, passes everything before it unchanged, and
// passes the whole input unchanged when the key never appears, however the
// input is split into reads.
func FuzzMatcher(f *testing.F) {
	f.Add([]byte("ab\x1b[92;5ucd"), uint16(4), uint16(1), uint8(0))
	f.Add([]byte("\x1b[27;5;92~"), uint16(3), uint16(7), uint8(0))
	f.Add([]byte("\x1b[A\x1b\x1b[93;5:3u\x1d"), uint16(9), uint16(2), uint8(1))
	f.Add([]byte("hello\x1b[97;69u"), uint16(6), uint16(9), uint8(2))
	f.Add([]byte("\x1b[32;5u\x00"), uint16(1), uint16(0), uint8(3))
	f.Add([]byte("\x1b[200~paste\x1b[201~"), uint16(8), uint16(3), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, split, step uint16, keyIdx uint8) {
		k := MustParseKey(fuzzKeys[int(keyIdx)%len(fuzzKeys)])

		wantEnd, wantDet := len(data), false
		for i := range data {
			if referenceKeyAt(k, data, i) {
				wantEnd, wantDet = i, true
				break
			}
		}

		// One read.
		got, det := feedAll(NewMatcher(k), data)
		if det != wantDet || !bytes.Equal(got, data[:wantEnd]) {
			t.Fatalf("key %v, Feed(%q) = %q, %v; want %q, %v", k, data, got, det, data[:wantEnd], wantDet)
		}

		// Two reads split anywhere: the same result.
		s := 0
		if len(data) > 0 {
			s = int(split) % (len(data) + 1)
		}
		got, det = feedAll(NewMatcher(k), data[:s], data[s:])
		if det != wantDet || !bytes.Equal(got, data[:wantEnd]) {
			t.Fatalf("key %v, Feed(%q | %q) = %q, %v; want %q, %v", k, data[:s], data[s:], got, det, data[:wantEnd], wantDet)
		}

		// Many reads: a sequence split more than once may pass through
		// rather than match, but what passes is always a prefix of the
		// input, all of it when the key never appears, and the raw byte
		// always matches.
		n := int(step)%7 + 1
		var pieces [][]byte
		for i := 0; i < len(data); i += n {
			pieces = append(pieces, data[i:min(i+n, len(data))])
		}
		got, det = feedAll(NewMatcher(k), pieces...)
		if !bytes.HasPrefix(data, got) {
			t.Fatalf("key %v, Feed in %d-byte reads of %q passed %q, not a prefix", k, n, data, got)
		}
		if !wantDet && (det || !bytes.Equal(got, data)) {
			t.Fatalf("key %v, Feed in %d-byte reads of %q = %q, %v; want it unchanged", k, n, data, got, det)
		}
		if det && !referenceKeyAt(k, data, len(got)) {
			t.Fatalf("key %v, Feed in %d-byte reads of %q detached at %d, where no key starts", k, n, data, len(got))
		}
		if raw := bytes.IndexByte(data, k.Raw()); raw >= 0 && (!det || len(got) > raw) {
			t.Fatalf("key %v, Feed in %d-byte reads of %q = %q, %v; want a detach at or before the raw byte at %d", k, n, data, got, det, raw)
		}
	})
}
