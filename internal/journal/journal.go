// Package journal is the logger of Legion's daemons (the helper, the
// controllers, and later the worker): log/slog entries go to the systemd
// journal with their attributes as fields when the process runs under
// systemd, and are text lines on stderr otherwise. It owns the mapping of
// attribute keys to journal field names (LEGION_TEAM, LEGION_ISSUE,
// LEGION_SESSION and the others upper-cased) and never logs on its own.
package journal

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	sdjournal "github.com/coreos/go-systemd/v22/journal"
)

// Journal fields Legion sets on its log entries, from the slog attributes
// "team", "issue" and "session".
const (
	FieldTeam    = "LEGION_TEAM"
	FieldIssue   = "LEGION_ISSUE"
	FieldSession = "LEGION_SESSION" // the agent conversation's session ID (ptyworker.Spec.AgentSessionID)
)

// NewLogger returns the logger of a Legion daemon: under systemd (stderr is
// a journal stream, JOURNAL_STREAM, or the process runs as a unit and the
// journal socket exists) entries go to the journal with the attributes as
// fields (team, issue and session as LEGION_TEAM, LEGION_ISSUE and
// LEGION_SESSION); otherwise they are text lines on stderr.
func NewLogger(level slog.Leveler) *slog.Logger {
	if underJournal() {
		return slog.New(&journalHandler{level: level})
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
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

// journalHandler is a slog.Handler that sends each record to the journal:
// MESSAGE is the message followed by its attributes as key=value (what
// journalctl shows), and every attribute is also a field of its own.
type journalHandler struct {
	level  slog.Leveler
	attrs  []slog.Attr // from WithAttrs, keys already group-prefixed
	prefix string      // group prefix, "a.b."
}

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
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
	var msg strings.Builder
	msg.WriteString(r.Message)
	vars := map[string]string{"SYSLOG_IDENTIFIER": "legion"}
	for _, a := range all {
		v := a.Value.Resolve().String()
		msg.WriteByte(' ')
		msg.WriteString(a.Key)
		msg.WriteByte('=')
		if strings.ContainsAny(v, " \t\n\"=") || v == "" {
			v2 := strconv.Quote(v)
			msg.WriteString(v2)
		} else {
			msg.WriteString(v)
		}
		vars[journalField(a.Key)] = v
	}
	return sdjournal.Send(msg.String(), priority(r.Level), vars)
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

// journalField maps an attribute key to a journal field name: team, issue
// and session to the LEGION_ fields, anything else upper-cased with every
// byte outside [A-Z0-9_] as '_' (journal field names allow no more), and
// never starting with '_' (reserved for trusted fields).
func journalField(key string) string {
	switch key {
	case "team":
		return FieldTeam
	case "issue":
		return FieldIssue
	case "session":
		return FieldSession
	}
	b := []byte(strings.ToUpper(key))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	s := strings.TrimLeft(string(b), "_0123456789")
	if s == "" {
		s = "ATTR"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
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
