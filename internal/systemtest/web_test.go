package systemtest_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/controller/workspace"
	"github.com/legion-dev/legion/internal/journal"
)

// TestWebSessionJournal: as an ordinary user, the dashboard
// (legion-web.socket, written by `legion install`, starting the hardened
// legion-web.service) shows a working issue's session: its detail, its
// unit's journal lines (the worker's own and the helper's about it, each
// about that unit: the journal the sandboxed tests do not have) and the
// issue's diff, asked over the dashboard's unix socket with the token
// `legion web` made.
func TestWebSessionJournal(t *testing.T) {
	t.Parallel()
	s := bootLegion(t, options{linger: true, script: longPlan})
	id := s.setUpTeam()
	s.login("systemctl", "--user", "start", "legion@"+teamName)
	unit, _ := s.workerUnit(id, controller.ModePlan)

	var list api.ListResult
	if err := json.Unmarshal([]byte(s.login("legion", "sessions", "list", "--json")), &list); err != nil {
		t.Fatalf("legion sessions list --json: %v", err)
	}
	name := ""
	for _, ss := range list.Sessions {
		if ss.Unit == unit {
			name = ss.Name
		}
	}
	if name == "" {
		t.Fatalf("no session of unit %s in %+v", unit, list.Sessions)
	}

	s.login("legion", "web") // makes the token, prints the login URL
	get := func(path string) (string, error) {
		return s.asUser("sh", "-c", `curl --silent --show-error --fail-with-body --unix-socket "$XDG_RUNTIME_DIR/legion/web.sock" `+
			`-H "Authorization: Bearer $(cat "$HOME/.local/state/legion/web-token")" "http://localhost`+path+`"`)
	}
	var detail struct {
		Session api.Session `json:"session"`
	}
	out, err := get("/api/sessions/" + name)
	if err != nil {
		t.Fatalf("GET the session's detail: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &detail); err != nil || detail.Session.Unit != unit || detail.Session.Resources == nil {
		t.Errorf("session detail %s (%v); want unit %s with its resources", out, err, unit)
	}

	var lines struct {
		Unit    string          `json:"unit"`
		Entries []journal.Entry `json:"entries"`
	}
	s.until("the dashboard to show the worker's journal lines", func() error {
		out, err := get("/api/sessions/" + name + "/journal?lines=100")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &lines); err != nil {
			return fmt.Errorf("decode %q: %w", out, err)
		}
		workers, helpers := 0, 0
		for _, e := range lines.Entries {
			if e.About != unit {
				t.Fatalf("journal entry %+v is about %q; want only %s", e, e.About, unit)
			}
			switch {
			case e.Unit == unit && strings.Contains(e.Message, "agent started"):
				workers++
			case e.Ident == journal.IdentLegion && e.Unit != unit:
				helpers++
			}
		}
		if workers == 0 || helpers == 0 {
			return fmt.Errorf("%d lines: %d of the worker's agent start, %d of the helper or controller", len(lines.Entries), workers, helpers)
		}
		return nil
	})
	if lines.Unit != unit {
		t.Errorf("journal unit = %q; want %s", lines.Unit, unit)
	}

	// Live: the lines after the last one shown are the new ones, as the
	// Session view polls for them (what a person types makes one).
	seen := map[string]bool{}
	for _, e := range lines.Entries {
		seen[e.Cursor] = true
	}
	last := lines.Entries[len(lines.Entries)-1]
	s.login("legion", "send", name, "keep going")
	s.until("the lines after the last one shown to hold the sent input's", func() error {
		out, err := get("/api/sessions/" + name + "/journal?after=" + url.QueryEscape(last.Cursor))
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		var since struct {
			Entries []journal.Entry `json:"entries"`
		}
		if err := json.Unmarshal([]byte(out), &since); err != nil {
			return fmt.Errorf("decode %q: %w", out, err)
		}
		sent := false
		for _, e := range since.Entries {
			if seen[e.Cursor] || e.Time.Before(last.Time) {
				t.Fatalf("the lines after %s hold %+v, shown before", last.Cursor, e)
			}
			if e.About != unit {
				t.Fatalf("journal entry %+v is about %q; want only %s", e, e.About, unit)
			}
			sent = sent || strings.Contains(e.Message, "sent input")
		}
		if !sent {
			return fmt.Errorf("%d lines since, none of the sent input", len(since.Entries))
		}
		return nil
	})

	// The diff: git, run by the hardened service in the team's
	// workspace, compares the branch the controller made with main.
	var diff workspace.Diff
	out, err = get("/api/issues/" + teamName + "/" + id + "/diff")
	if err != nil {
		t.Fatalf("GET the issue's diff: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &diff); err != nil || diff.Base != "main" || diff.Branch != workspace.Branch(id) || diff.ConflictsUnknown != "" || diff.Conflicts == nil {
		t.Errorf("diff of %s = %s (%v); want %s against main, conflicts computed", id, out, err, workspace.Branch(id))
	}
}
