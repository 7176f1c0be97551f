package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePrepare(t *testing.T) {
	got, err := parsePrepare([]string{`["legion","worktree","ensure","web","WEB-1"]`, ` ["/bin/sh", "-c", "make deps"] `})
	want := [][]string{{"legion", "worktree", "ensure", "web", "WEB-1"}, {"/bin/sh", "-c", "make deps"}}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("parsePrepare = %q, %v; want %q", got, err, want)
	}
	for _, tc := range []struct{ in, want string }{
		{`make deps`, "want a JSON array of strings"},
		{`[]`, "empty: want the program"},
		{`[""]`, "empty: want the program"},
		{`["a", 1]`, "want a JSON array of strings"},
		{`["a"] ["b"]`, "want one JSON array"},
		{`null`, "empty"},
	} {
		if _, err := parsePrepare([]string{tc.in}); err == nil || !strings.Contains(err.Error(), `--prepare "`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parsePrepare(%q) = %v; want an error naming --prepare and saying %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParsePrepare: a --prepare value is taken only as a non-empty array
// whose program is not empty.
func FuzzParsePrepare(f *testing.F) {
	for _, s := range []string{`["a","b"]`, `[]`, `["a"] x`, `{"a":1}`, `"a"`, `[""]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parsePrepare([]string{s})
		if err != nil {
			return
		}
		if len(got) != 1 || len(got[0]) == 0 || got[0][0] == "" {
			t.Errorf("parsePrepare(%q) = %q; want one command with a program", s, got)
		}
	})
}
