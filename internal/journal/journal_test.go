package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legion-dev/legion/units/sdtest"
)

// journalSocket is where journald listens for native-protocol entries
// (and where go-systemd/journal sends them).
const journalSocket = "/run/systemd/journal/socket"

// TestJournalFields: a daemon run as a unit logs to the journal, with its
// attributes as fields. This machine kind has no journald (see
// shared/notes/systemd-sandbox.md), so the test runs itself again in a
// private mount namespace with a tmpfs on /run, where it listens on the
// journal's socket and reads what NewLogger sends, in journald's native
// protocol. Nothing outside that namespace sees the socket: daemons of
// other tests running meanwhile keep logging where they did.
func TestJournalFields(t *testing.T) {
	if os.Getenv("LEGION_JOURNAL_TEST") == "inside" {
		journalFieldsInside(t)
		return
	}
	_, err := exec.LookPath("unshare")
	sdtest.Require(t, "root and unshare(1) (util-linux), for a private mount namespace", os.Geteuid() == 0 && err == nil)
	script := `mount -t tmpfs -o mode=0755 legion-test /run && mkdir -p /run/systemd/journal && exec "$0" -test.run '^TestJournalFields$' -test.v`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, os.Args[0])
	cmd.Env = append(os.Environ(), "LEGION_JOURNAL_TEST=inside", "INVOCATION_ID=0123456789abcdef0123456789abcdef")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestJournalFields")) {
		t.Fatalf("the test in its own mount namespace: %v\n%s", err, out)
	}
}

// journalFieldsInside is the test proper, in the private namespace.
func journalFieldsInside(t *testing.T) {
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: journalSocket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	log := NewLogger(slog.LevelInfo)
	if _, ok := log.Handler().(*journalHandler); !ok {
		t.Fatalf("NewLogger under a unit (INVOCATION_ID set, journal socket present) = %T; want the journal handler", log.Handler())
	}
	log.With("team", "demo").WithGroup("run").Info("agent started", "issue", "LOC-7", "session", "s-1", "pid", 42, "argv", "claude --resume\nx")
	log.Debug("below the level")
	log.Error("it broke", "err", "disk full")

	got := []map[string]string{readJournalEntry(t, ln), readJournalEntry(t, ln)}
	want := []map[string]string{{
		"MESSAGE":           "agent started team=demo run.issue=LOC-7 run.session=s-1 run.pid=42 run.argv=\"claude --resume\\nx\"",
		"PRIORITY":          "6",
		"SYSLOG_IDENTIFIER": "legion",
		FieldTeam:           "demo",
		"RUN_ISSUE":         "LOC-7",
		"RUN_SESSION":       "s-1",
		"RUN_PID":           "42",
		"RUN_ARGV":          "claude --resume\nx",
	}, {
		"MESSAGE":           "it broke err=\"disk full\"",
		"PRIORITY":          "3",
		"SYSLOG_IDENTIFIER": "legion",
		"ERR":               "disk full",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("journal entries (-want +got):\n%s", diff)
	}

	// Ungrouped, the attributes are Legion's own fields.
	log.Info("x", "team", "t", "issue", "i", "session", "s")
	e := readJournalEntry(t, ln)
	for k, v := range map[string]string{FieldTeam: "t", FieldIssue: "i", FieldSession: "s"} {
		if e[k] != v {
			t.Errorf("field %s = %q; want %q (entry %v)", k, e[k], v, e)
		}
	}
}

// readJournalEntry reads one datagram of journald's native protocol:
// KEY=VALUE lines, or KEY, a newline, a little-endian 64-bit length, the
// value and a newline for values with newlines in them.
func readJournalEntry(t *testing.T, ln *net.UnixConn) map[string]string {
	t.Helper()
	ln.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := ln.Read(buf)
	if err != nil {
		t.Fatalf("no journal entry: %v", err)
	}
	e, err := parseJournalEntry(buf[:n])
	if err != nil {
		t.Fatalf("journal entry %q: %v", buf[:n], err)
	}
	return e
}

func parseJournalEntry(p []byte) (map[string]string, error) {
	e := map[string]string{}
	for len(p) > 0 {
		nl := bytes.IndexByte(p, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("field %q does not end in a newline", p)
		}
		line := p[:nl]
		p = p[nl+1:]
		if k, v, ok := strings.Cut(string(line), "="); ok {
			e[k] = v
			continue
		}
		if len(p) < 8 {
			return nil, fmt.Errorf("field %s: no length", line)
		}
		size := binary.LittleEndian.Uint64(p)
		p = p[8:]
		if uint64(len(p)) < size+1 || p[size] != '\n' {
			return nil, fmt.Errorf("field %s: %d bytes announced, %d left", line, size, len(p))
		}
		e[string(line)] = string(p[:size])
		p = p[size+1:]
	}
	return e, nil
}

func TestJournalField(t *testing.T) {
	tests := map[string]string{
		"team": FieldTeam, "issue": FieldIssue, "session": FieldSession,
		"daemon_id": "DAEMON_ID", "peer.uid": "PEER_UID", "_x": "X", "9lives": "LIVES", "": "ATTR",
	}
	for in, want := range tests {
		if got := journalField(in); got != want {
			t.Errorf("journalField(%q) = %q; want %q", in, got, want)
		}
	}
}
