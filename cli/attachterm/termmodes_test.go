package attachterm

import "testing"

func TestTermModesScan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		alt    int
	}{
		{"none", []string{"plain \x1b[1mtext\x1b[?25l"}, 0},
		{"1049", []string{"\x1b[?1049h"}, 1049},
		{"47 among others", []string{"\x1b[?25;47;1h"}, 47},
		{"entered and left", []string{"\x1b[?1049hx\x1b[?1049l"}, 0},
		{"split after ESC", []string{"ab\x1b", "[?1047h"}, 1047},
		{"split after ESC [", []string{"\x1b[", "?1049h"}, 1049},
		{"split in the number", []string{"\x1b[?10", "49h"}, 1049},
		{"split before the final byte", []string{"\x1b[?1049h..\x1b[?1049", "l"}, 0},
		{"other final byte", []string{"\x1b[?1049$p"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m termModes
			for _, c := range tc.chunks {
				m.scan([]byte(c))
			}
			if m.alt != tc.alt {
				t.Errorf("scan(%q) alt = %d; want %d", tc.chunks, m.alt, tc.alt)
			}
		})
	}
}
