package systemtest_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// testIssueLogs: `legion logs TEAM ISSUE` prints the same entries as
// `journalctl --user LEGION_ISSUE=ISSUE`, in order, each named by its
// source: the controller, the helper and the issue's workers (their
// units); `legion logs TEAM` prints the team's, the issue's among them;
// `legion doctor` finds the journal readable.
func testIssueLogs(t *testing.T, s *sys, id string) {
	s = s.sub(t)
	type entry struct {
		Time    time.Time `json:"time"`
		Cursor  string    `json:"cursor"`
		Source  string    `json:"source"`
		Unit    string    `json:"unit"`
		Message string    `json:"message"`
		Team    string    `json:"team"`
		Issue   string    `json:"issue"`
	}
	parse := func(out string) []entry {
		t.Helper()
		var es []entry
		for line := range strings.Lines(out) {
			var e entry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("legion logs --json line %q: %v", line, err)
			}
			es = append(es, e)
		}
		return es
	}
	issue := parse(s.login("legion", "logs", "--json", teamName, id))
	seen := map[string]int{}
	for i, e := range issue {
		switch {
		case e.Source == "controller" || e.Source == "helper":
			seen[e.Source]++
		case strings.HasPrefix(e.Source, "legion-") && e.Source == e.Unit:
			seen["worker"]++
		default:
			t.Errorf("entry %d: source %q (unit %q); want controller, helper or a worker unit; the entry:\n%s", i, e.Source, e.Unit,
				strings.SplitN(s.login("journalctl", "--user", "--no-pager", "-o", "json", "--cursor", e.Cursor), "\n", 2)[0])
		}
		if e.Team != teamName || e.Issue != id {
			t.Errorf("entry %d (%s): team %q, issue %q; want %s, %s: %s", i, e.Source, e.Team, e.Issue, teamName, id, e.Message)
		}
		if i > 0 && e.Time.Before(issue[i-1].Time) {
			t.Errorf("entry %d (%s) at %v comes after entry %d at %v", i, e.Source, e.Time, i-1, issue[i-1].Time)
		}
	}
	for _, p := range []string{"controller", "helper", "worker"} {
		if seen[p] == 0 {
			t.Errorf("legion logs %s %s has no %s lines (%v)", teamName, id, p, seen)
		}
	}
	// The same entries as journalctl's own match.
	var cursors []string
	for line := range strings.Lines(s.login("journalctl", "--user", "LEGION_ISSUE="+id, "-o", "json", "--output-fields=__CURSOR", "--no-pager")) {
		var e struct {
			Cursor string `json:"__CURSOR"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("journalctl -o json line %q: %v", line, err)
		}
		cursors = append(cursors, e.Cursor)
	}
	if len(cursors) != len(issue) {
		t.Errorf("legion logs %s %s: %d entries; journalctl --user LEGION_ISSUE=%s: %d", teamName, id, len(issue), id, len(cursors))
	} else {
		for i := range cursors {
			if cursors[i] != issue[i].Cursor {
				t.Errorf("entry %d: legion logs has %s, journalctl %s", i, issue[i].Cursor, cursors[i])
				break
			}
		}
	}
	// The team's lines hold the issue's.
	inTeam := map[string]bool{}
	for _, e := range parse(s.login("legion", "logs", "--json", teamName)) {
		if e.Team != teamName {
			t.Errorf("legion logs %s: entry of team %q: %s", teamName, e.Team, e.Message)
		}
		inTeam[e.Cursor] = true
	}
	for _, e := range issue {
		if !inTeam[e.Cursor] {
			t.Errorf("legion logs %s lacks the issue's entry %s", teamName, e.Message)
		}
	}
	// The text form: one line an entry (a message's own newlines indented).
	text := s.login("legion", "logs", teamName, id)
	if n := strings.Count(text, "\n") - strings.Count(text, "\n    "); n != len(issue) {
		t.Errorf("legion logs %s %s printed %d lines; want %d:\n%s", teamName, id, n, len(issue), text)
	}
	if out := s.login("legion", "doctor"); !strings.Contains(out, "ok    journal") {
		t.Errorf("legion doctor on a persistent journal:\n%s\nwant the journal check ok", out)
	}
}
