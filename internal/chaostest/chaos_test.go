package chaostest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSameSeedSameChoices: two injectors of one seed make the same
// choices; another seed makes others.
func TestSameSeedSameChoices(t *testing.T) {
	kinds, weights := []string{"a", "b", "c"}, []int{1, 2, 3}
	run := func(seed uint64) []string {
		in := New(seed)
		var out []string
		for range 50 {
			out = append(out, in.Pick(kinds, weights), in.Between(time.Second, 2*time.Second).String())
		}
		return out
	}
	if diff := cmp.Diff(run(42), run(42)); diff != "" {
		t.Errorf("seed 42 twice (-first +second):\n%s", diff)
	}
	if cmp.Equal(run(42), run(43)) {
		t.Errorf("seeds 42 and 43 made the same 100 choices")
	}
}

func TestParseSeeds(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Seed
		wantErr  string
	}{
		{"empty", "", nil, ""},
		{"comments and notes", "# seeds\n\n12 # found the lost label\n0x1f\n", []Seed{{12, "found the lost label"}, {31, ""}}, ""},
		{"bad seed", "12\nfoo # no\n", nil, "seeds.txt:2: "},
		{"negative", "-1\n", nil, "seeds.txt:1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSeeds("seeds.txt", strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("ParseSeeds(%q) = %v, %v; want an error starting %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSeeds(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseSeeds(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// FuzzParseSeeds: any input gives seeds or an error naming the file and
// line, never a panic; what it returns reads back the same when written
// out again.
func FuzzParseSeeds(f *testing.F) {
	f.Add("12 # note\n0x1f\n")
	f.Add("#\n\n  7  \n")
	f.Add("\x00\n99999999999999999999\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseSeeds("f", strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") && !strings.HasPrefix(err.Error(), "read f:") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		var b strings.Builder
		for _, s := range got {
			b.WriteString(strings.TrimSpace(strings.Join([]string{strconv.FormatUint(s.Seed, 10), "#", s.Note}, " ")) + "\n")
		}
		again, err := ParseSeeds("f", strings.NewReader(b.String()))
		if err != nil || !cmp.Equal(got, again) {
			t.Fatalf("written out as %q, read back %v, %v; want %v", b.String(), again, err, got)
		}
	})
}
