package shellquote

import (
	"os/exec"
	"testing"
)

func TestQuote(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain/path-1.2_x", "plain/path-1.2_x"},
		{"", "''"},
		{"two words", "'two words'"},
		{"it's", `'it'\''s'`},
		{"$HOME;rm", "'$HOME;rm'"},
	} {
		if got := Quote(tt.in); got != tt.want {
			t.Errorf("Quote(%q) = %s; want %s", tt.in, got, tt.want)
		}
	}
}

// TestJoinRoundTrip: a real shell splits Join's output back into the
// same words.
func TestJoinRoundTrip(t *testing.T) {
	words := []string{"a b", "it's", "$HOME", "`x`", "\\", "", "*", "new\nline", "ü"}
	out, err := exec.Command("/bin/sh", "-c", `for w in `+Join(words)+`; do printf '%s\0' "$w"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	start := 0
	for i, b := range out {
		if b == 0 {
			got = append(got, string(out[start:i]))
			start = i + 1
		}
	}
	if len(got) != len(words) {
		t.Fatalf("sh split %q into %q; want %q", Join(words), got, words)
	}
	for i := range words {
		if got[i] != words[i] {
			t.Errorf("word %d: sh gave %q; want %q", i, got[i], words[i])
		}
	}
}
