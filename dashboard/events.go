package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/legion-dev/legion/activation/api"
)

// DefaultTrackerRefresh is how often the trackers are read again while a
// page is connected.
const DefaultTrackerRefresh = 10 * time.Second

// ReadLimit bounds one message a page may send on any WebSocket; a larger
// one closes that connection with StatusMessageTooBig.
const ReadLimit = 64 << 10

// pageQueue is how many events a page may lag behind before its
// connection is closed (it reconnects and fetches afresh).
const pageQueue = 256

// Event is one message of /api/events, server to page.
type Event struct {
	// Type is "hello" (first message: the session snapshot), "session"
	// (one session changed), "board" (a team's board changed: fetch it
	// again), or "needs" (the Needs-you queue changed).
	Type     string        `json:"type"`
	Session  *api.Session  `json:"session,omitempty"`
	Sessions []api.Session `json:"sessions,omitempty"`
	Team     string        `json:"team,omitempty"`
	// Seq numbers the server's events from 1 (hello carries the last).
	Seq uint64 `json:"seq"`
	// Time is when the change happened (the helper's event time for a
	// session), for the page's event → page latency.
	Time time.Time `json:"time"`
}

// hub is the live part: one sessions.watch follower for every page, the
// tracker refresh, and the pages' queues.
type hub struct {
	s *Server

	mu       sync.Mutex
	seq      uint64
	sessions map[string]api.Session // by name: the helper's view, live
	synced   bool                   // a snapshot arrived
	pages    map[*page]struct{}
	// dirty are teams whose sessions changed since their tracker was last
	// read (a phase ends with its session); all: a page connected, read
	// every tracker. wake tells refreshLoop.
	dirty map[string]bool
	all   bool
	wake  chan struct{}
}

// page is one connected /api/events WebSocket.
type page struct {
	out    chan Event
	lagged chan struct{} // closed when out overflowed
	once   sync.Once
}

func newHub(s *Server) *hub {
	return &hub{s: s, sessions: map[string]api.Session{}, pages: map[*page]struct{}{}, dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// Publish sends ev to every connected page (Seq and Time are set here).
// Views call it when their data changed, e.g. Event{Type: "needs"}.
func (s *Server) Publish(ev Event) { s.hub.publish(ev) }

func (h *hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked(ev)
}

func (h *hub) publishLocked(ev Event) {
	h.seq++
	ev.Seq = h.seq
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	for p := range h.pages {
		select {
		case p.out <- ev:
		default:
			p.once.Do(func() { close(p.lagged) })
		}
	}
}

// Sessions returns the sessions as the helper last told them, sorted by
// name, and whether the follower has had its snapshot yet.
func (s *Server) Sessions() ([]api.Session, bool) {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	out := make([]api.Session, 0, len(s.hub.sessions))
	for _, ss := range s.hub.sessions {
		out = append(out, ss)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, s.hub.synced
}

// run follows the helper's session stream and refreshes the trackers
// until ctx ends.
func (h *hub) run(ctx context.Context) error {
	go h.refreshLoop(ctx) // ends with ctx
	err := api.FollowSessions(ctx, api.WatchArgs{}, h.onSession, func(err error) {
		if !errors.Is(err, api.ErrLagged) {
			h.s.log.Debug("session stream broke; subscribing again", "err", err)
		}
	})
	return err
}

// onSession applies one session event and tells the pages.
func (h *hub) onSession(ev api.SessionEvent) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.Type == api.EventSnapshot {
		teams := map[string]bool{}
		for _, ss := range h.sessions {
			teams[ss.Team] = true
		}
		h.sessions = make(map[string]api.Session, len(ev.Sessions))
		for _, ss := range ev.Sessions {
			h.sessions[ss.Name] = ss
			h.s.hist.record(ss, time.Now())
			teams[ss.Team] = true
		}
		h.synced = true
		for t := range teams {
			h.publishLocked(Event{Type: "board", Team: t})
		}
		h.all = true
		h.poke()
		return nil
	}
	if ev.Session == nil {
		return nil
	}
	ss := *ev.Session
	h.sessions[ss.Name] = ss
	h.s.hist.record(ss, time.Now())
	// The helper's time of the change: the page's latency counts from it.
	h.publishLocked(Event{Type: "session", Session: &ss, Team: ss.Team, Time: ev.Time})
	if ss.Team != "" {
		h.publishLocked(Event{Type: "board", Team: ss.Team})
		h.dirty[ss.Team] = true
		h.poke()
	}
	return nil
}

// poke wakes refreshLoop (h.mu held or not).
func (h *hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// refreshLoop reads the trackers again while a page is connected: every
// TrackerRefresh and when a page connects, every team; a team whose
// sessions changed, at once (after a short pause that gathers a burst of
// changes). It tells the pages of each team whose board changed, and ends
// with ctx.
func (h *hub) refreshLoop(ctx context.Context) {
	tick := time.NewTicker(h.s.opts.TrackerRefresh)
	defer tick.Stop()
	for {
		all := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			all = true
		case <-h.wake:
			select {
			case <-ctx.Done():
				return
			case <-time.After(coalesce):
			}
		}
		h.mu.Lock()
		n := len(h.pages)
		var names []string
		if all || h.all {
			names = nil
		} else {
			names = make([]string, 0, len(h.dirty))
			for t := range h.dirty {
				names = append(names, t)
			}
		}
		h.all = false
		clear(h.dirty)
		h.mu.Unlock()
		if n == 0 || (names != nil && len(names) == 0) {
			continue
		}
		for _, team := range h.s.refreshTrackers(ctx, names) {
			h.publish(Event{Type: "board", Team: team})
		}
	}
}

// coalesce is the pause between a session change and the tracker read
// it causes.
const coalesce = 50 * time.Millisecond

// events is GET /api/events: the page's one WebSocket. The server sends
// Events; a page sends nothing but pings (any message it sends is read
// and dropped, within ReadLimit).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// Handler checked the Origin already, with a clear error; the
		// library's own check would refuse the same requests.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return // Accept answered the request
	}
	c.SetReadLimit(ReadLimit)
	ctx := r.Context()
	p := &page{out: make(chan Event, pageQueue), lagged: make(chan struct{})}
	h := s.hub
	h.mu.Lock()
	hello := Event{Type: "hello", Seq: h.seq, Time: time.Now()}
	for _, ss := range h.sessions {
		hello.Sessions = append(hello.Sessions, ss)
	}
	h.pages[p] = struct{}{}
	h.all = true
	h.poke()
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.pages, p)
		h.mu.Unlock()
	}()
	// The reader: it drops what the page sends and sees the close or a
	// protocol error (a malformed frame, an oversize message), on which
	// the library closes the connection with a reason. It ends when the
	// connection does.
	readErr := make(chan error, 1)
	go func() {
		for {
			if _, _, err := c.Read(ctx); err != nil {
				readErr <- err
				return
			}
		}
	}()
	if err := writeEvent(ctx, c, hello); err != nil {
		c.CloseNow()
		return
	}
	for {
		select {
		case ev := <-p.out:
			if err := writeEvent(ctx, c, ev); err != nil {
				c.CloseNow()
				return
			}
		case <-p.lagged:
			c.Close(websocket.StatusTryAgainLater, "lagged: too many events queued; reconnect")
			return
		case err := <-readErr:
			s.log.Debug("event socket closed", "err", err)
			closeBroken(c, err)
			return
		case <-ctx.Done():
			c.Close(websocket.StatusGoingAway, "server stopping")
			return
		}
	}
}

// closeBroken ends a connection whose read failed with err. A close from
// the page ends it quietly; a frame the library refused without a close
// frame of its own (an unmasked one) is answered with a protocol-error
// close that says why; where the library already sent its close (too big,
// reserved bits or opcode, a fragmented control frame), the connection
// is only dropped.
func closeBroken(c *websocket.Conn, err error) {
	if websocket.CloseStatus(err) != -1 || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled) {
		c.CloseNow()
		return
	}
	reason := err.Error()
	if len(reason) > 120 { // a close reason fits in 123 bytes
		reason = reason[:120]
	}
	if c.Close(websocket.StatusProtocolError, reason) != nil {
		c.CloseNow()
	}
}

func writeEvent(ctx context.Context, c *websocket.Conn, ev Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, b)
}
