package journal

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	sdjournal "github.com/coreos/go-systemd/v22/journal"
)

// Journal fields Legion sets on its entries (see the package doc for what
// each means). Each is the field of the slog attribute of the same name in
// lower case, without LEGION_: "team", "issue", "mode", "session", "unit".
const (
	FieldTeam    = "LEGION_TEAM"
	FieldIssue   = "LEGION_ISSUE"
	FieldMode    = "LEGION_MODE"
	FieldSession = "LEGION_SESSION" // the agent conversation's session ID (proto.Spec.AgentSessionID)
	FieldUnit    = "LEGION_UNIT"    // the worker unit the entry is about
)

// Identifiers: SYSLOG_IDENTIFIER of the daemons' entries.
const (
	IdentLegion = "legion"            // the helper and the controllers
	IdentWorker = "legion-pty-worker" // the workers
)

// fields maps the attributes that become journal fields to their field.
var fields = map[string]string{
	"team": FieldTeam, "issue": FieldIssue, "mode": FieldMode, "session": FieldSession, "unit": FieldUnit,
}

// NewLogger returns the logger of a Legion daemon whose entries carry the
// SYSLOG_IDENTIFIER ident (IdentLegion, IdentWorker): under systemd
// (stderr is a journal stream, JOURNAL_STREAM, or the process runs as a
// unit, INVOCATION_ID, and the journal socket exists) entries go to the
// journal as the package doc says; otherwise they are text lines on
// stderr.
func NewLogger(ident string, level slog.Leveler) *slog.Logger {
	if underJournal() {
		return slog.New(&journalHandler{ident: ident, level: level})
	}
	return NewTextLogger(os.Stderr, level)
}

// NewTextLogger is NewLogger's stderr form, writing to w.
func NewTextLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func underJournal() bool {
	if ok, err := sdjournal.StderrIsJournalStream(); err == nil && ok {
		return sdjournal.Enabled()
	}
	return os.Getenv("INVOCATION_ID") != "" && sdjournal.Enabled()
}

// journalHandler is a slog.Handler that sends each record to the journal.
type journalHandler struct {
	ident  string
	level  slog.Leveler
	attrs  []slog.Attr // from WithAttrs, keys already group-prefixed
	prefix string      // group prefix, "a.b."
}

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
	if h.level == nil {
		return l >= slog.LevelInfo
	}
	return l >= h.level.Level()
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), prefixed(h.prefix, as)...)
	return &n
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.prefix = h.prefix + name + "."
	return &n
}

func (h *journalHandler) Handle(_ context.Context, r slog.Record) error {
	all := append([]slog.Attr(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		all = append(all, prefixed(h.prefix, []slog.Attr{a})...)
		return true
	})
	msg, vars := entry(r.Message, all)
	vars["SYSLOG_IDENTIFIER"] = h.ident
	if err := sdjournal.Send(msg, priority(r.Level), vars); err != nil {
		// Not lost: stderr is the unit's journal stream (no fields there).
		_, werr := fmt.Fprintf(os.Stderr, "%s (journal: %v)\n", msg, err)
		return werr
	}
	return nil
}

// entry is the MESSAGE and the fields of a record with attributes all:
// the message followed by the attributes as key=value, and Legion's fields.
// An identity attribute given twice (a logger scoped with "team" and an
// entry with "team" again) is written once, with its last value, where it
// came first.
func entry(message string, all []slog.Attr) (string, map[string]string) {
	vars := map[string]string{}
	last := map[string]int{}
	for i, a := range all {
		if _, ok := fields[a.Key]; ok {
			last[a.Key] = i
		}
	}
	var msg strings.Builder
	msg.WriteString(message)
	for _, a := range all {
		v := a.Value.Resolve().String()
		if f, ok := fields[a.Key]; ok {
			if _, done := vars[f]; done {
				continue
			}
			v = all[last[a.Key]].Value.Resolve().String()
			vars[f] = v
		}
		msg.WriteString(FormatAttr(a.Key, v))
	}
	return msg.String(), vars
}

// FormatAttr is how an attribute follows the message in MESSAGE: a space,
// key=value, the value quoted (Go syntax) when empty or holding spaces,
// quotes, '=' or control characters.
func FormatAttr(key, value string) string {
	if value == "" || strings.ContainsAny(value, " \t\n\"=") || !strconv.CanBackquote(value) {
		value = strconv.Quote(value)
	}
	return " " + key + "=" + value
}

// prefixed flattens groups into dotted keys.
func prefixed(prefix string, as []slog.Attr) []slog.Attr {
	var out []slog.Attr
	for _, a := range as {
		a.Value = a.Value.Resolve()
		if a.Value.Kind() == slog.KindGroup {
			p := prefix
			if a.Key != "" {
				p += a.Key + "."
			}
			out = append(out, prefixed(p, a.Value.Group())...)
			continue
		}
		if a.Key == "" {
			continue
		}
		a.Key = prefix + a.Key
		out = append(out, a)
	}
	return out
}

func priority(l slog.Level) sdjournal.Priority {
	switch {
	case l >= slog.LevelError:
		return sdjournal.PriErr
	case l >= slog.LevelWarn:
		return sdjournal.PriWarning
	case l >= slog.LevelInfo:
		return sdjournal.PriInfo
	default:
		return sdjournal.PriDebug
	}
}
