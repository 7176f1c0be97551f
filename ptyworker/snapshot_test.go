package ptyworker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hinshun/vt10x"
	"github.com/legion-dev/legion/ptyworker/proto"
)

// TestSnapshotOfBigScreenFits attaches to a 300x100 screen whose every
// cell has its own true colours and attributes: drawn cell by cell that is
// about 1.4 MiB, more than a snapshot frame may hold, and the client
// dropped the connection at every attach. The snapshot must arrive, and
// show the screen's text.
func TestSnapshotOfBigScreenFits(t *testing.T) {
	const cols, rows = 300, 100
	// Ten rows per line of input: a whole screen at once would be a flood,
	// which the screen skips.
	spec := testSpec(t, "sh", "-c", `stty -echo
	for step in 0 1 2 3 4 5 6 7 8 9; do
		read x
		awk -v step=$step 'BEGIN {
			for (y = step * 10; y < step * 10 + 10; y++) {
				printf "\033[%d;1H", y + 1
				for (x = 0; x < 300; x++) {
					i = y * 300 + x; r = i % 256; g = int(i / 256) % 256; b = (i * 7) % 256
					printf "\033[1;3;4;5;7;38;2;%d;%d;%d;48;2;%d;%d;%dm\303\251", r, g, b, 255 - r, 255 - g, 255 - b
				}
			}
			printf "\033[0m\033[%d;1H", step * 10 + 11
		}'
	done
	printf '\033[100;1HEND-OF-SCREEN'
	read x`)
	spec.Cols, spec.Rows = cols, rows
	spec.RingSize = 4 << 20 // the screen follows the ring: all of the drawing must stay in it
	tw := startWorker(t, spec, Options{})

	c := tw.dial()
	s := follow(c, 0, 0)
	if _, err := c.Attach(ctxT(t), proto.AttachParams{Offset: new(uint64)}); err != nil {
		t.Fatal(err)
	}
	for step := range 10 {
		if err := c.Input(ctxT(t), []byte("\r")); err != nil {
			t.Fatal(err)
		}
		s.waitOutput(t, fmt.Sprintf("\x1b[0m\x1b[%d;1H", step*10+11))
		// Bring the screen up to here (an attach in snapshot mode does):
		// the next step then never leaves it far enough behind to skip.
		r := tw.raw()
		r.hello(spec)
		r.request(2, proto.MethodAttach, proto.AttachParams{})
		if m := r.next(); m == nil || m.Error != nil {
			t.Fatalf("attach after step %d: %+v", step, m)
		}
		r.nc.Close()
	}
	s.waitOutput(t, "END-OF-SCREEN")

	c2 := tw.dial()
	s2 := follow(c2, cols, rows)
	res, err := c2.Attach(ctxT(t), proto.AttachParams{})
	if err != nil || res.Mode != proto.AttachSnapshot {
		t.Fatalf("Attach() = %+v, %v; want mode %s", res, err, proto.AttachSnapshot)
	}
	waitFor(t, "the snapshot, or the connection's end", func() bool {
		s2.mu.Lock()
		defer s2.mu.Unlock()
		return s2.snaps > 0 || s2.closed
	})
	s2.mu.Lock()
	snaps, closed := s2.snaps, s2.closed
	s2.mu.Unlock()
	if snaps != 1 || closed {
		t.Fatalf("client got %d snapshots, connection closed %v (%v); want the snapshot and the connection open", snaps, closed, c2.Err())
	}
	screen := s2.screen()
	if !strings.Contains(screen, "END-OF-SCREEN") || !strings.Contains(screen, strings.Repeat("é", cols)) {
		t.Errorf("screen after the snapshot lacks the last row's END-OF-SCREEN or a row of é cells:\n%s", screen)
	}
}

// TestRenderMax draws a screen of coloured rows ("row N" and 4-byte
// characters) under ever smaller limits: in colour while it fits, then as
// plain text, then without the top rows; never over the limit, and the
// bottom row always there.
func TestRenderMax(t *testing.T) {
	const cols, rows = 40, 10
	vt := vt10x.New(vt10x.WithSize(cols, rows))
	for y := range rows {
		fmt.Fprintf(vt, "\x1b[%d;1H\x1b[1;38;2;%d;2;3mrow %d %s", y+1, y, y, strings.Repeat("𝄞", 20))
	}
	fmt.Fprint(vt, "\x1b[0m")
	var m modeScanner
	full := len(render(vt, &m))
	tests := []struct {
		name     string
		limit    int
		colour   bool
		firstRow int
	}{
		{"fits", full, true, 0},
		{"plain text", full - 1, false, 0},
		{"top rows left out", 400, false, rows - 400/100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := renderMax(vt, &m, tt.limit)
			if len(b) > tt.limit {
				t.Fatalf("renderMax(limit %d) = %d bytes", tt.limit, len(b))
			}
			if got := strings.Contains(string(b), ";38;2;"); got != tt.colour {
				t.Errorf("renderMax(limit %d) has colours %v; want %v:\n%q", tt.limit, got, tt.colour, b)
			}
			re := vt10x.New(vt10x.WithSize(cols, rows))
			re.Write(b)
			for y := range rows {
				want := ""
				if y >= tt.firstRow {
					want = fmt.Sprintf("row %d %s", y, strings.Repeat("𝄞", 20))
				}
				if got := strings.TrimRight(rowText(re, cols, y), " "); y == rows-1 && got != want || y < tt.firstRow && got != "" {
					t.Errorf("renderMax(limit %d): row %d = %q; want %q", tt.limit, y, got, want)
				}
			}
		})
	}
}

func rowText(v vt10x.Terminal, cols, y int) string {
	var b strings.Builder
	for x := range cols {
		b.WriteRune(cellRune(v.Cell(x, y)))
	}
	return b.String()
}
