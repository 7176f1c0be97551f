package systemtest_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// testIssueJournal: `journalctl --user LEGION_ISSUE=ISSUE` is the whole
// story of an issue, in order: the controller's decisions, the helper's
// starts of its workers and each worker's own lines, every entry with
// LEGION_TEAM, and LEGION_UNIT, LEGION_MODE and LEGION_SESSION where they
// apply (a worker's lines carry all of them).
func testIssueJournal(t *testing.T, s *sys, id string) {
	s = s.sub(t)
	out := s.login("journalctl", "--user", "LEGION_ISSUE="+id, "-o", "json", "--no-pager")
	var entries []map[string]any
	for line := range strings.Lines(out) {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("journalctl -o json line %q: %v", line, err)
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		t.Fatalf("journalctl --user LEGION_ISSUE=%s shows nothing", id)
	}
	field := func(e map[string]any, k string) string { v, _ := e[k].(string); return v }
	// Which part wrote an entry: the controller runs in legion@web, the
	// helper in legion.service, workers in their legion-<short>-… units.
	part := func(e map[string]any) string {
		switch u := field(e, "_SYSTEMD_USER_UNIT"); {
		case u == "legion@"+teamName+".service":
			return "controller"
		case u == "legion.service":
			return "helper"
		case strings.HasPrefix(u, "legion-"):
			return "worker"
		default:
			return "other(" + u + ")"
		}
	}
	seen := map[string]int{}
	var firstController, firstHelper, firstWorker = -1, -1, -1
	for i, e := range entries {
		p := part(e)
		seen[p]++
		if field(e, "LEGION_TEAM") != teamName {
			t.Errorf("entry %d (%s) LEGION_TEAM = %q; want %q: %s", i, p, field(e, "LEGION_TEAM"), teamName, field(e, "MESSAGE"))
		}
		switch p {
		case "controller":
			if firstController < 0 {
				firstController = i
			}
		case "helper":
			if firstHelper < 0 {
				firstHelper = i
			}
		case "worker":
			if firstWorker < 0 {
				firstWorker = i
			}
			for _, k := range []string{"LEGION_UNIT", "LEGION_MODE", "LEGION_SESSION"} {
				if field(e, k) == "" {
					t.Errorf("worker entry %d has no %s: %s", i, k, field(e, "MESSAGE"))
					break
				}
			}
			if u := field(e, "LEGION_UNIT"); u != "" && u != field(e, "_SYSTEMD_USER_UNIT") {
				t.Errorf("worker entry %d LEGION_UNIT = %q; written by %q", i, u, field(e, "_SYSTEMD_USER_UNIT"))
			}
		}
	}
	t.Logf("journal of %s: %d entries by part: %v", id, len(entries), seen)
	for _, p := range []string{"controller", "helper", "worker"} {
		if seen[p] == 0 {
			t.Errorf("journalctl --user LEGION_ISSUE=%s has no %s lines", id, p)
		}
	}
	// In order: the controller decides, then the helper starts the worker,
	// then the worker writes (journalctl shows entries by time).
	if firstController >= 0 && firstHelper >= 0 && firstWorker >= 0 && (firstController > firstHelper || firstHelper > firstWorker) {
		t.Errorf("first lines: controller at %d, helper at %d, worker at %d; want controller, then helper, then worker", firstController, firstHelper, firstWorker)
	}
}
