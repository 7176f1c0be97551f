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

// envNamespace names, in a test binary run again by inNamespace, the test
// it runs there.
const envNamespace = "LEGION_JOURNAL_TEST"

// inNamespace runs the test named name again, in a private mount
// namespace with a tmpfs on /run (and what setup adds, a shell command)
// and with envNamespace=name, and fails t if it does not pass there. It
// reports whether the caller is that run: then the caller is the test
// proper. Nothing outside the namespace sees what it mounts: daemons of
// other tests running meanwhile keep logging where they did.
func inNamespace(t *testing.T, name, setup string) bool {
	t.Helper()
	if os.Getenv(envNamespace) == name {
		return true
	}
	_, err := exec.LookPath("unshare")
	sdtest.Require(t, "root and unshare(1) (util-linux), for a private mount namespace", os.Geteuid() == 0 && err == nil)
	script := `mount --make-rprivate / && mount -t tmpfs -o mode=0755 legion-test /run && mkdir -p /run/systemd/journal && ` + setup + `
exec "$0" -test.run "^$1\$" -test.v`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, os.Args[0], name)
	cmd.Env = append(os.Environ(), envNamespace+"="+name, "INVOCATION_ID=0123456789abcdef0123456789abcdef")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+name)) {
		t.Fatalf("the test in its own mount namespace: %v\n%s", err, out)
	}
	t.Logf("in its own mount namespace:\n%s", out)
	return false
}

// journalSocket is where journald listens for native-protocol entries
// (and where go-systemd/journal sends them).
const journalSocket = "/run/systemd/journal/socket"

// TestJournalFields: a daemon run as a unit logs to the journal, with
// Legion's attributes as its fields and no others. The test listens on the
// journal's socket itself (in a private mount namespace: see inNamespace)
// and reads what NewLogger sends, in journald's native protocol.
func TestJournalFields(t *testing.T) {
	if !inNamespace(t, "TestJournalFields", "true") {
		return
	}
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: journalSocket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	log := NewLogger(IdentWorker, slog.LevelInfo)
	if _, ok := log.Handler().(*journalHandler); !ok {
		t.Fatalf("NewLogger under a unit (INVOCATION_ID set, journal socket present) = %T; want the journal handler", log.Handler())
	}
	log = log.With("team", "demo", "session", "s-1", "name", "WEB-1-implement")
	log.Info("agent started", "issue", "WEB-1", "mode", "implement", "unit", "legion-0a1b2c3d-web-1-implement.service", "pid", 42, "argv", "claude --resume\nx")
	log.Debug("below the level")
	log.WithGroup("run").Error("it broke", "err", "disk full", "issue", "grouped")
	log.Info("again", "team", "other")

	got := []map[string]string{readJournalEntry(t, ln), readJournalEntry(t, ln), readJournalEntry(t, ln)}
	want := []map[string]string{{
		"MESSAGE":           `agent started team=demo session=s-1 name=WEB-1-implement issue=WEB-1 mode=implement unit=legion-0a1b2c3d-web-1-implement.service pid=42 argv="claude --resume\nx"`,
		"PRIORITY":          "6",
		"SYSLOG_IDENTIFIER": "legion-pty-worker",
		FieldTeam:           "demo",
		FieldSession:        "s-1",
		FieldIssue:          "WEB-1",
		FieldMode:           "implement",
		FieldUnit:           "legion-0a1b2c3d-web-1-implement.service",
	}, {
		// Grouped attributes are not Legion's: only in MESSAGE.
		"MESSAGE":           `it broke team=demo session=s-1 name=WEB-1-implement run.err="disk full" run.issue=grouped`,
		"PRIORITY":          "3",
		"SYSLOG_IDENTIFIER": "legion-pty-worker",
		FieldTeam:           "demo",
		FieldSession:        "s-1",
	}, {
		// An identity attribute given again: once, its last value.
		"MESSAGE":           `again team=other session=s-1 name=WEB-1-implement`,
		"PRIORITY":          "6",
		"SYSLOG_IDENTIFIER": "legion-pty-worker",
		FieldTeam:           "other",
		FieldSession:        "s-1",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("journal entries (-want +got):\n%s", diff)
	}
}

// readJournalEntry reads one datagram of journald's native protocol
// (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/).
func readJournalEntry(t *testing.T, ln *net.UnixConn) map[string]string {
	t.Helper()
	ln.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := ln.Read(buf)
	if err != nil {
		t.Fatalf("no journal entry: %v", err)
	}
	e, err := parseNative(buf[:n])
	if err != nil {
		t.Fatalf("journal entry %q: %v", buf[:n], err)
	}
	return e
}

// parseNative parses a native-protocol datagram: KEY=VALUE lines, or KEY,
// a newline, a little-endian 64-bit length, the value and a newline for
// values with newlines in them.
func parseNative(p []byte) (map[string]string, error) {
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

// TestNotUnderJournal: outside systemd the logger writes text to stderr.
func TestNotUnderJournal(t *testing.T) {
	t.Setenv("INVOCATION_ID", "")
	t.Setenv("JOURNAL_STREAM", "")
	if h := NewLogger(IdentLegion, slog.LevelInfo).Handler(); !isText(h) {
		t.Errorf("NewLogger outside a unit: handler %T; want slog's text handler", h)
	}
}

func isText(h slog.Handler) bool { _, ok := h.(*slog.TextHandler); return ok }
