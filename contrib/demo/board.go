package demo

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// row is one issue on the board.
type row struct {
	id, title, status string
	labels            []string
	worker            string // "implement (running)"; empty: none
}

func (r row) String() string {
	w := r.worker
	if w == "" {
		w = "-"
	}
	return fmt.Sprintf("%-7s %-13s %-22s %s", r.id, r.status, w, r.title)
}

// board shows the rows: redrawn in place on a terminal, else a line per
// change.
type board struct {
	w     io.Writer
	tty   bool
	team  string
	start time.Time
	drawn int               // lines drawn last time (tty)
	last  map[string]string // per issue, the last printed line (plain)
}

func newBoard(w io.Writer, tty bool, team string) *board {
	return &board{w: w, tty: tty, team: team, start: time.Now(), last: map[string]string{}}
}

// update shows rows.
func (b *board) update(rows []row) {
	if !b.tty {
		for _, r := range rows {
			line := fmt.Sprintf("%s: %s, worker %s", r.id, r.status, orDash(r.worker))
			if b.last[r.id] != line {
				b.last[r.id] = line
				fmt.Fprintf(b.w, "[%5.1fs] %s\n", time.Since(b.start).Seconds(), line)
			}
		}
		return
	}
	var s strings.Builder
	if b.drawn > 0 {
		fmt.Fprintf(&s, "\x1b[%dA", b.drawn) // back to the board's first line
	}
	done := 0
	for _, r := range rows {
		if r.status == "Done" {
			done++
		}
	}
	lines := []string{
		fmt.Sprintf("\x1b[1mlegion@%s\x1b[0m  %d/%d done  %s", b.team, done, len(rows), bar(done, len(rows), 20)),
		fmt.Sprintf("\x1b[2m%-7s %-13s %-22s %s\x1b[0m", "ISSUE", "STATUS", "WORKER", "TITLE"),
	}
	for _, r := range rows {
		lines = append(lines, colour(r.status)+r.String()+"\x1b[0m")
	}
	lines = append(lines, fmt.Sprintf("\x1b[2m%.0fs\x1b[0m", time.Since(b.start).Seconds()))
	for _, l := range lines {
		s.WriteString("\x1b[2K" + l + "\n")
	}
	b.drawn = len(lines)
	io.WriteString(b.w, s.String())
}

// finish ends the board; later output goes below it.
func (b *board) finish() {}

func orDash(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func bar(n, of, width int) string {
	if of == 0 {
		return ""
	}
	full := n * width / of
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", width-full) + "]"
}

// colour is the ANSI colour of a status.
func colour(status string) string {
	switch status {
	case "Todo":
		return "\x1b[37m"
	case "In Progress":
		return "\x1b[33m"
	case "Needs Review":
		return "\x1b[35m"
	case "Retro":
		return "\x1b[36m"
	case "Done":
		return "\x1b[32m"
	}
	return ""
}
