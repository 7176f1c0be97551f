package journal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Entry is one journal entry as `legion logs` shows it.
type Entry struct {
	Time     time.Time `json:"time"`
	Cursor   string    `json:"cursor"`
	Priority int       `json:"priority"` // syslog priority 0..7; 6 (info) when the entry has none
	// Unit is the unit that wrote the entry (_SYSTEMD_USER_UNIT, else
	// _SYSTEMD_UNIT); Ident is its SYSLOG_IDENTIFIER, else _COMM. A
	// worker's line that journald could not attribute (it reads the
	// sender's cgroup from /proc when it handles the line, and a worker
	// that has just exited has none) gets the unit the worker named
	// itself in, LEGION_UNIT.
	Unit    string `json:"unit,omitempty"`
	Ident   string `json:"ident,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Message string `json:"message"`
	// Legion's fields (LEGION_TEAM, ...), "" when the entry has none.
	Team    string `json:"team,omitempty"`
	Issue   string `json:"issue,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Session string `json:"session,omitempty"`
	About   string `json:"about_unit,omitempty"` // LEGION_UNIT
}

// ParseEntry decodes one line of `journalctl --output=json`: a JSON object
// of fields whose values are strings, arrays of bytes (a value that is
// not printable UTF-8), arrays of those (a field the entry has more than
// once: the first one counts here) or null (a value journalctl left out
// as too large: ""). __REALTIME_TIMESTAMP (microseconds since the epoch)
// is required.
func ParseEntry(line []byte) (Entry, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return Entry{}, fmt.Errorf("journal entry: %w", err)
	}
	get := func(name string) (string, error) {
		v, ok := raw[name]
		if !ok {
			return "", nil
		}
		s, err := fieldValue(v)
		if err != nil {
			return "", fmt.Errorf("journal entry: field %s: %w", name, err)
		}
		return s, nil
	}
	var e Entry
	var errs []error
	str := func(dst *string, names ...string) {
		for _, n := range names {
			v, err := get(n)
			if err != nil {
				errs = append(errs, err)
				return
			}
			if v != "" {
				*dst = v
				return
			}
		}
	}
	var ts, prio, pid string
	str(&ts, "__REALTIME_TIMESTAMP")
	str(&prio, "PRIORITY")
	str(&pid, "_PID")
	str(&e.Cursor, "__CURSOR")
	str(&e.Unit, "_SYSTEMD_USER_UNIT", "_SYSTEMD_UNIT")
	str(&e.Ident, "SYSLOG_IDENTIFIER", "_COMM")
	str(&e.Message, "MESSAGE")
	str(&e.Team, FieldTeam)
	str(&e.Issue, FieldIssue)
	str(&e.Mode, FieldMode)
	str(&e.Session, FieldSession)
	str(&e.About, FieldUnit)
	if err := errors.Join(errs...); err != nil {
		return Entry{}, err
	}
	if e.Unit == "" && e.Ident == IdentWorker {
		e.Unit = e.About
	}
	us, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || us < 0 {
		return Entry{}, fmt.Errorf("journal entry: field __REALTIME_TIMESTAMP %q: want microseconds since the epoch", clip(ts))
	}
	e.Time = time.UnixMicro(us)
	e.Priority = 6
	if prio != "" {
		p, err := strconv.Atoi(prio)
		if err != nil || p < 0 || p > 7 {
			return Entry{}, fmt.Errorf("journal entry: field PRIORITY %q: want 0..7", clip(prio))
		}
		e.Priority = p
	}
	if pid != "" {
		if e.PID, err = strconv.Atoi(pid); err != nil || e.PID < 0 {
			return Entry{}, fmt.Errorf("journal entry: field _PID %q: want a process ID", clip(pid))
		}
	}
	return e, nil
}

// fieldValue decodes one value of journalctl's JSON: a string, an array of
// bytes, an array of those (the first), or null ("").
func fieldValue(v json.RawMessage) (string, error) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || bytes.Equal(v, []byte("null")):
		return "", nil
	case v[0] == '"':
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	case v[0] != '[':
		return "", fmt.Errorf("want a string, an array or null, got %s", clip(string(v)))
	}
	var b []byte
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return "", err
	}
	if len(items) == 0 {
		return "", nil
	}
	if t := bytes.TrimSpace(items[0]); len(t) > 0 && (t[0] == '"' || t[0] == '[' || t[0] == 'n') {
		// A field given more than once: its values.
		return fieldValue(items[0])
	}
	for _, it := range items {
		n, err := strconv.ParseUint(string(bytes.TrimSpace(it)), 10, 8)
		if err != nil {
			return "", fmt.Errorf("want an array of bytes, got %s", clip(string(it)))
		}
		b = append(b, byte(n))
	}
	return string(b), nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Query selects the entries Read returns: a team's, one issue's, or one
// worker unit's.
type Query struct {
	Team  string // required: LEGION_TEAM
	Issue string // LEGION_ISSUE; "" for the whole team
	// Unit is LEGION_UNIT: the lines of one worker unit and the helper's
	// and controller's lines about it; "" for all.
	Unit   string
	UID    int  // whose processes wrote them (_UID): this process's user's, for Read's check to hold
	Follow bool // wait for new entries until ctx ends
	// Lines is how many of the last entries to start with; 0 is all.
	Lines int
	// After, a cursor of an entry read before (Entry.Cursor), starts with
	// the entry after it instead of the last Lines: the new ones since
	// (CheckCursor says whether a cursor given from outside looks like one).
	After string
	// Journalctl is the program; "" is journalctl from PATH.
	Journalctl string
}

// ValidCursor reports whether c looks like a journal cursor
// ("s=…;i=…;b=…;m=…;t=…;x=…"): key=value pairs of letters and hex digits,
// split by semicolons, at most 256 bytes.
func ValidCursor(c string) bool {
	if c == "" || len(c) > 256 {
		return false
	}
	for _, kv := range strings.Split(c, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(k) != 1 || k[0] < 'a' || k[0] > 'z' || v == "" {
			return false
		}
		for _, r := range v {
			if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
				return false
			}
		}
	}
	return true
}

// CheckCursor is nil for a cursor that ValidCursor accepts, else an error
// that quotes it (clipped) and says what a cursor looks like.
func CheckCursor(c string) error {
	if ValidCursor(c) {
		return nil
	}
	return fmt.Errorf("%q: want a journal cursor (an entry's \"cursor\")", clip(c))
}

// Args is journalctl's command line for q.
func (q Query) Args() []string {
	args := []string{"--output=json", "--all", "--no-pager", "--quiet"}
	switch {
	case q.After != "":
		args = append(args, "--after-cursor="+q.After)
	case q.Lines > 0:
		args = append(args, "--lines="+strconv.Itoa(q.Lines))
	case q.Follow:
		args = append(args, "--no-tail")
	}
	if q.Follow {
		args = append(args, "--follow")
	}
	args = append(args, "_UID="+strconv.Itoa(q.UID), FieldTeam+"="+q.Team)
	if q.Issue != "" {
		args = append(args, FieldIssue+"="+q.Issue)
	}
	if q.Unit != "" {
		args = append(args, FieldUnit+"="+q.Unit)
	}
	return args
}

// Read calls fn with each entry q selects, oldest first, and with Follow
// each new one until ctx ends (then it returns nil). It runs journalctl
// (see the package doc); an error of fn ends it and is returned. Before
// reading it checks, as Check, that the journal can be read: the error
// wraps ErrNoJournald or ErrPermission and says why and what to do.
func Read(ctx context.Context, q Query, fn func(Entry) error) error {
	if q.Team == "" {
		return errors.New("read the journal: no team")
	}
	if err := Check(); err != nil && (errors.Is(err, ErrNoJournald) || errors.Is(err, ErrPermission)) {
		return err
	}
	if f, ok := systemLayout.ownFileMissing(q.UID); ok {
		// journalctl, with no file of this user's and the system's not
		// readable, fails ("insufficient permissions").
		if !q.Follow {
			return nil
		}
		return fmt.Errorf("read the journal: nothing of yours is in it yet (no %s), so there is nothing to follow: run it again once Legion has run", f)
	}
	return read(ctx, q, fn)
}

// read is Read without the check.
func read(ctx context.Context, q Query, fn func(Entry) error) error {
	prog := q.Journalctl
	if prog == "" {
		prog = "journalctl"
	}
	cmd := exec.CommandContext(ctx, prog, q.Args()...)
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("read the journal: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("read the journal: %w", err)
	}
	ferr := scan(out, fn)
	if ferr != nil {
		cmd.Process.Kill()
	}
	werr := cmd.Wait()
	switch {
	case ferr != nil:
		return ferr
	case ctx.Err() != nil:
		return nil
	case werr != nil:
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "insufficient permissions") {
			return fmt.Errorf("read the journal: %w: journalctl: %s", ErrPermission, msg)
		}
		return fmt.Errorf("read the journal: %s: %w: %s", strings.Join(cmd.Args, " "), werr, msg)
	}
	return nil
}

// scan parses journalctl's lines from r and hands each entry to fn.
func scan(r io.Reader, fn func(Entry) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			e, perr := ParseEntry(line)
			if perr != nil {
				return fmt.Errorf("read the journal: %w", perr)
			}
			if ferr := fn(e); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the journal: %w", err)
		}
	}
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
