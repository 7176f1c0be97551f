package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"

	"github.com/coder/websocket"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/config"
	"github.com/legion-dev/legion/controller/team"
	"github.com/legion-dev/legion/controller/workspace"
	"github.com/legion-dev/legion/internal/journal"
)

// sessionAPI serves the Session view: a session's detail (unit, state,
// memory and CPU with their limits, restarts), its transcript, its unit's
// journal lines, its live terminal (termsocket.go) and its issue's diff
// (diff.go). It is a client of the helper like `legion sessions` and
// `legion attach`: every request dials the helper.
type sessionAPI struct {
	// dial connects to the helper (api.Dial, or a test's socket).
	dial func(ctx context.Context) (*api.Client, error)
	// worktrees returns the worktree manager of a configured team; an
	// unknown team is an error wrapping errUnknownTeam.
	worktrees func(team string) (*workspace.Manager, error)
	// accept upgrades a request to a WebSocket after the server's checks
	// (token, Origin).
	accept func(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error)
	// journalctl is the program that reads the journal; "" is journalctl
	// from PATH.
	journalctl string
	log        *slog.Logger
}

// errUnknownTeam: a team that legion.toml does not configure.
var errUnknownTeam = errors.New("no such team in legion.toml")

// Limits of the read endpoints.
const (
	// defaultTranscriptTail is how much of a transcript's end one GET
	// returns when it asks for no offset.
	defaultTranscriptTail = 256 << 10
	// maxTranscriptChunk bounds one GET of a transcript.
	maxTranscriptChunk = 4 << 20
	// defaultJournalLines and maxJournalLines bound the journal lines of
	// one GET.
	defaultJournalLines = 200
	maxJournalLines     = 5000
)

// sessionAPI is the server's Session view, reading the helper at
// HelperSocket and the teams of ConfigPath.
func (s *Server) sessionAPI() *sessionAPI {
	return &sessionAPI{
		dial: s.dialHelper,
		worktrees: func(name string) (*workspace.Manager, error) {
			cfg, err := config.Load(s.opts.ConfigPath)
			if err != nil {
				return nil, err
			}
			t, ok := cfg.Team(name)
			if !ok {
				return nil, fmt.Errorf("team %q: %w %s", name, errUnknownTeam, cfg.Path)
			}
			state, err := config.StateDir()
			if err != nil {
				return nil, err
			}
			return team.Worktrees(t, state), nil
		},
		accept: func(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
			return websocket.Accept(w, r, &websocket.AcceptOptions{
				// Handler checked the Origin already, with a clear error.
				InsecureSkipVerify: true,
				CompressionMode:    websocket.CompressionDisabled,
			})
		},
		log: s.log,
	}
}

// register adds the Session view's routes to mux.
func (s *sessionAPI) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/sessions/{name}", s.handleDetail)
	mux.HandleFunc("GET /api/sessions/{name}/transcript", s.handleTranscript)
	mux.HandleFunc("GET /api/sessions/{name}/journal", s.handleJournal)
	mux.HandleFunc("GET /api/sessions/{name}/term", s.handleTerm)
	mux.HandleFunc("GET /api/issues/{team}/{id}/diff", s.handleDiff)
}

// sessionDetail is GET /api/sessions/{name}: the session as sessions.status
// reports it (resources included).
type sessionDetail struct {
	Session api.Session `json:"session"`
}

func (s *sessionAPI) handleDetail(w http.ResponseWriter, r *http.Request) {
	name, ok := sessionName(w, r)
	if !ok {
		return
	}
	sess, err := s.status(r.Context(), name)
	if err != nil {
		helperError(w, "session "+name, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionDetail{Session: sess})
}

// status asks the helper for one session on a connection of its own.
func (s *sessionAPI) status(ctx context.Context, name string) (api.Session, error) {
	c, err := s.dial(ctx)
	if err != nil {
		return api.Session{}, err
	}
	defer c.Close()
	return c.Status(ctx, name)
}

// transcriptChunk is GET /api/sessions/{name}/transcript: the bytes of the
// session's transcript (its terminal output, escape sequences and all)
// from Offset to Next. Without ?offset= it is the transcript's last 256
// KiB (Truncated: there is more before Offset); with ?offset=N it is what
// follows N, up to 4 MiB, so a page polls with offset=next.
type transcriptChunk struct {
	Offset    int64  `json:"offset"`
	Next      int64  `json:"next"`
	Data      string `json:"data"`
	Truncated bool   `json:"truncated"`
}

func (s *sessionAPI) handleTranscript(w http.ResponseWriter, r *http.Request) {
	name, ok := sessionName(w, r)
	if !ok {
		return
	}
	var from int64
	tail := true
	if v := r.URL.Query().Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "%s", fmt.Sprintf("transcript of %s: offset %q: want a byte offset, 0 or more", name, v))
			return
		}
		from, tail = n, false
	}
	c, err := s.dial(r.Context())
	if err != nil {
		helperError(w, "transcript of "+name, err)
		return
	}
	defer c.Close()
	args := api.LogsArgs{Name: name, Offset: from}
	keep := &tailBuffer{max: maxTranscriptChunk, head: true}
	if tail {
		// The helper starts near the end; the buffer keeps the last bytes
		// should the file grow meanwhile.
		args.Tail = defaultTranscriptTail
		keep = &tailBuffer{max: defaultTranscriptTail}
	}
	res, err := c.Logs(r.Context(), args, keep)
	var out *api.OutputError
	if errors.As(err, &out) && errors.Is(err, errChunkFull) {
		err = nil // the chunk is full: the page asks again from next
		res.Offset = from + int64(len(keep.buf))
	}
	if err != nil {
		helperError(w, "transcript of "+name, err)
		return
	}
	start := res.Offset - int64(len(keep.buf))
	chunk := transcriptChunk{Offset: start, Next: res.Offset, Data: string(keep.buf), Truncated: tail && start > 0}
	writeJSON(w, http.StatusOK, chunk)
}

// errChunkFull ends a transcript read whose chunk is full.
var errChunkFull = errors.New("chunk full")

// tailBuffer keeps the last max bytes written to it, or with head the
// first max (then a write beyond them fails with errChunkFull).
type tailBuffer struct {
	max  int
	head bool
	buf  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	if t.head {
		room := t.max - len(t.buf)
		if len(p) > room {
			t.buf = append(t.buf, p[:room]...)
			return room, errChunkFull
		}
		t.buf = append(t.buf, p...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
	}
	return len(p), nil
}

// journalLines is GET /api/sessions/{name}/journal: the last lines
// (?lines=N, default 200, at most 5000) of the session's worker unit and
// of the helper and controller about it, oldest first; with
// ?after=CURSOR (an entry's cursor from an earlier answer) the lines
// since that one instead, at most 5000: the Session view polls with it.
type journalLines struct {
	Unit    string          `json:"unit"`
	Entries []journal.Entry `json:"entries"`
}

func (s *sessionAPI) handleJournal(w http.ResponseWriter, r *http.Request) {
	name, ok := sessionName(w, r)
	if !ok {
		return
	}
	lines := defaultJournalLines
	if v := r.URL.Query().Get("lines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxJournalLines {
			writeError(w, http.StatusBadRequest, "%s", fmt.Sprintf("journal of %s: lines %q: want 1 to %d", name, v, maxJournalLines))
			return
		}
		lines = n
	}
	after := r.URL.Query().Get("after")
	if after != "" {
		if err := journal.CheckCursor(after); err != nil {
			writeError(w, http.StatusBadRequest, "%s", fmt.Sprintf("journal of %s: after %v", name, err))
			return
		}
	}
	sess, err := s.status(r.Context(), name)
	if err != nil {
		helperError(w, "journal of "+name, err)
		return
	}
	out := journalLines{Unit: sess.Unit, Entries: []journal.Entry{}}
	q := journal.Query{Team: sess.Team, Unit: sess.Unit, UID: os.Getuid(), Lines: lines, After: after, Journalctl: s.journalctl}
	err = journal.Read(r.Context(), q, func(e journal.Entry) error {
		out.Entries = append(out.Entries, e)
		if len(out.Entries) == maxJournalLines {
			return errEnough // the next poll goes on from the last one
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		code := http.StatusInternalServerError
		if errors.Is(err, journal.ErrNoJournald) || errors.Is(err, journal.ErrPermission) {
			code = http.StatusServiceUnavailable
		}
		writeError(w, code, "%s", fmt.Sprintf("journal of %s (unit %s): %v", name, sess.Unit, err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// errEnough stops a journal read that has all the entries one answer holds.
var errEnough = errors.New("enough entries")

// sessionName is the {name} of the request, checked as the helper would;
// a bad name is answered with 400.
func sessionName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if err := api.ValidateName(name); err != nil {
		writeError(w, http.StatusBadRequest, "%s", err.Error())
		return "", false
	}
	return name, true
}

// helperError answers with the helper's refusal (404 for an unknown
// session, 409 for one not running, 503 while it cannot answer) or 502
// when the helper could not be reached.
func helperError(w http.ResponseWriter, what string, err error) {
	code := http.StatusBadGateway
	var e *api.Error
	if errors.As(err, &e) {
		switch e.Code {
		case api.CodeNotFound:
			code = http.StatusNotFound
		case api.CodeNotRunning:
			code = http.StatusConflict
		case api.CodeBadRequest:
			code = http.StatusBadRequest
		case api.CodeUnavailable, api.CodeRecovering:
			code = http.StatusServiceUnavailable
		default:
			code = http.StatusInternalServerError
		}
		writeError(w, code, "%s", what+": "+e.Message)
		return
	}
	writeError(w, code, "%s", what+": the helper: "+err.Error())
}
