package activation

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/ptyworker/proto"
	"github.com/legion-dev/legion/units"
)

// Session events (sessions.watch).
//
// The helper learns of changes without polling its sessions:
//   - its own actions: a spawn or dispatch marks the new session for a
//     refresh, a kill publishes the session as it ended;
//   - one subscription to the user manager for every legion-* unit
//     (units.Manager.Changes: one D-Bus connection however many sessions
//     there are): a unit that starts, restarts, stops, fails or is
//     unloaded marks its session;
//   - the workers' own state events: for each session whose worker runs,
//     the session's one connection to it watches it (the worker pushes a
//     state event when its agent starts or stops waiting on a human, goes
//     stale, or exits, and at every change of the agent's state from its
//     hooks, which the session's Agent carries); the helper's calls to
//     the worker share that connection (see follow in table.go).
//
// So what the helper knows of a followed session is current without
// asking: sessions.list asks only about the others (Helper.current).
// Marked sessions are refreshed together (one unit listing, one info call
// per marked running worker) by followSessions, which publishes each one
// whose view changed. publish compares with the last view it published
// and fans the event out to every subscriber's bounded queue without ever
// blocking: a subscriber whose queue is full is dropped (lagged) and may
// subscribe again for a fresh snapshot.
const (
	// watchQueue is how many events a subscriber may be behind before it
	// is dropped.
	watchQueue = 256
	// watchPeerCheck is how often an idle stream checks that its client is
	// still there (so a gone client does not keep the helper from idling).
	watchPeerCheck = time.Second
	// unitPrefix names Legion's worker units (legion-<short>-…).
	unitPrefix = "legion-"
)

// sessionEvents is the helper's event hub and the queue of sessions to
// refresh.
type sessionEvents struct {
	mu    sync.Mutex
	seq   uint64
	last  map[string]api.Session // by name: what was last published
	subs  map[*subscriber]bool
	queue int // per-subscriber queue length; watchQueue when 0

	dmu     sync.Mutex
	dirty   map[string]bool // units to refresh
	all     bool            // refresh every session
	busy    map[string]bool // units being refreshed (taken)
	busyAll bool            // every session is being refreshed
	kick    chan struct{}   // cap 1: something is marked

	// following is true while the subscription to the unit changes is up.
	following atomic.Bool
}

func newSessionEvents() *sessionEvents {
	return &sessionEvents{
		last: map[string]api.Session{}, subs: map[*subscriber]bool{},
		dirty: map[string]bool{}, kick: make(chan struct{}, 1),
	}
}

// subscriber is one sessions.watch stream.
type subscriber struct {
	team    string
	ch      chan json.RawMessage // encoded SessionEvents
	dropped chan struct{}        // closed when the hub dropped it
}

// subscribe adds a subscriber and returns it with the snapshot event, both
// under the hub's lock: every change after the snapshot is in the queue.
func (e *sessionEvents) subscribe(team string) (*subscriber, api.SessionEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.queue
	if n <= 0 {
		n = watchQueue
	}
	sub := &subscriber{team: team, ch: make(chan json.RawMessage, n), dropped: make(chan struct{})}
	e.subs[sub] = true
	snap := api.SessionEvent{Type: api.EventSnapshot, Seq: e.seq, Time: time.Now(), Sessions: []api.Session{}}
	for _, v := range e.last {
		if team == "" || v.Team == team {
			snap.Sessions = append(snap.Sessions, v)
		}
	}
	sort.Slice(snap.Sessions, func(i, j int) bool { return snap.Sessions[i].Name < snap.Sessions[j].Name })
	return sub, snap
}

func (e *sessionEvents) unsubscribe(sub *subscriber) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.subs, sub)
}

// publish sends the event for s's change, if its view changed in a way
// that matters (LastActivity alone is recorded, not sent); a failed
// session's view says why (Session.Cause). It never blocks on a subscriber.
func (e *sessionEvents) publish(s *session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.publishLocked(s.view(), s.log) // under e.mu: what is published last is the newest view
}

// publishView publishes v, the view of a session the helper does not
// host in its table (one on a cluster).
func (e *sessionEvents) publishView(v api.Session, log *slog.Logger) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.publishLocked(v, log)
}

func (e *sessionEvents) publishLocked(v api.Session, log *slog.Logger) {
	old, had := e.last[v.Name]
	e.last[v.Name] = v
	typ, ok := eventType(old, had, v)
	if !ok {
		return
	}
	e.seq++
	ev := api.SessionEvent{Type: typ, Seq: e.seq, Time: time.Now(), Session: &v}
	raw, err := json.Marshal(ev)
	if err != nil {
		log.Error("encode session event", "err", err)
		return
	}
	for sub := range e.subs {
		if sub.team != "" && sub.team != v.Team {
			continue
		}
		select {
		case sub.ch <- raw:
		default:
			delete(e.subs, sub)
			close(sub.dropped)
			log.Warn("dropped a sessions.watch subscriber that fell behind", "queue", cap(sub.ch))
		}
	}
}

// eventType is the event a change from old (had: published before) to v
// is, and false when it is none worth sending.
func eventType(old api.Session, had bool, v api.Session) (api.EventType, bool) {
	terminal := v.State.Ended()
	switch {
	case had && old.State == v.State && old.Question == v.Question && old.Restarts == v.Restarts &&
		old.PID == v.PID && sameExit(old.Exit, v.Exit) && proto.SameAgentState(old.Agent, v.Agent):
		return "", false
	case v.State == api.StateFailed && (!had || old.State != api.StateFailed):
		return api.EventFailed, true
	case v.State == api.StateExited && (!had || old.State != api.StateExited):
		return api.EventExited, true
	case !terminal && (!had || old.State.Ended()):
		return api.EventStarted, true
	case agentState(old.State) && agentState(v.State):
		return api.EventAgentStateChanged, true
	}
	return api.EventStateChanged, true
}

// agentState reports whether st is a state of a session whose agent runs.
func agentState(st api.State) bool {
	return st == api.StateRunning || st == api.StateWaitingInput || st == api.StateStale
}

func sameExit(a, b *api.Exit) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case (a.Code == nil) != (b.Code == nil) || (a.Code != nil && *a.Code != *b.Code):
		return false
	}
	return a.Signal == b.Signal && a.Time.Equal(b.Time) && a.Reason == b.Reason
}

// mark queues units for a refresh.
func (e *sessionEvents) mark(units ...string) {
	e.dmu.Lock()
	for _, u := range units {
		e.dirty[u] = true
	}
	e.dmu.Unlock()
	e.wake()
}

// markAll queues every session for a refresh.
func (e *sessionEvents) markAll() {
	e.dmu.Lock()
	e.all = true
	e.dmu.Unlock()
	e.wake()
}

func (e *sessionEvents) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// take returns and clears what is marked; it counts as being refreshed
// (see pending) until refreshed is called.
func (e *sessionEvents) take() (units map[string]bool, all bool) {
	e.dmu.Lock()
	defer e.dmu.Unlock()
	units, all = e.dirty, e.all
	e.busy, e.busyAll = units, all
	e.dirty, e.all = map[string]bool{}, false
	return units, all
}

// refreshed says that what take returned was refreshed and published.
func (e *sessionEvents) refreshed() {
	e.dmu.Lock()
	defer e.dmu.Unlock()
	e.busy, e.busyAll = nil, false
}

// pending reports whether unit is marked or being refreshed.
func (e *sessionEvents) pending(unit string) bool {
	e.dmu.Lock()
	defer e.dmu.Unlock()
	return e.all || e.busyAll || e.dirty[unit] || e.busy[unit]
}

// followSessions keeps the published sessions in step until ctx ends:
// it follows the manager's changes of legion-* units (subscribing again
// when the connection is lost), refreshes what they and the workers'
// state events (see follow) mark and publishes the changes. Nothing is
// published before recovery is done; then every session is. subscribed
// is closed once the first subscription was tried: recovery lists the
// units after that, so no change between the two is missed.
func (h *Helper) followSessions(ctx context.Context, subscribed chan<- struct{}) error {
	if h.mgr == nil { // no systemd: no unit to follow (sessions on clusters are the engine's)
		close(subscribed)
		<-ctx.Done()
		return nil
	}
	var changes <-chan []string
	var retry <-chan time.Time
	first := true
	for {
		if changes == nil && retry == nil {
			ch, err := h.mgr.Changes(ctx, unitPrefix)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				h.log.Warn("cannot follow the worker units; retrying", "err", err)
				retry = time.After(time.Second)
			} else {
				changes = ch
				h.events.following.Store(true)
				if !first {
					h.events.markAll() // changes before the subscription were not seen
				}
			}
			if first {
				first = false
				close(subscribed)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-retry:
			retry = nil
			continue
		case names, ok := <-changes:
			if !ok {
				changes = nil
				h.events.following.Store(false)
				continue
			}
			h.events.mark(names...)
		case <-h.events.kick:
		}
		if h.recovering.Load() {
			continue // recovery publishes every session when it is done
		}
		h.refreshMarked(ctx)
	}
}

// refreshMarked refreshes the marked sessions and publishes their
// changes. The refresh connects to each running worker that has no
// connection yet, which follows it from then on.
func (h *Helper) refreshMarked(ctx context.Context) {
	units, all := h.events.take()
	defer h.events.refreshed()
	ss := h.sessions.where(func(s *session) bool { return all || units[s.unit] })
	if len(ss) == 0 {
		return
	}
	h.sessions.refresh(ctx, ss)
	for _, s := range ss {
		h.events.publish(s)
	}
}

// current reports whether what the helper knows of s is up to date
// without asking anyone: the unit subscription is up and s's unit has no
// change waiting to be refreshed (or being refreshed), it was read at
// least once, and either its worker is followed (it
// pushes every change) or none runs (then only the unit changes, and
// that is followed too). A failed session's cause is read once, by a
// refresh.
func (h *Helper) current(s *session) bool {
	if !h.events.following.Load() {
		return false
	}
	if h.events.pending(s.unit) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.seen.IsZero():
		return false // spawned, never read
	case s.us.Failed():
		return s.failure.Name != ""
	case unitRuns(s.us) && s.us.ActiveState != units.StateActivating:
		return s.followed()
	}
	return true
}

// cmdWatch streams session events: the snapshot, then every change, until
// the client hangs up, falls behind, or the helper stops.
func (h *Helper) cmdWatch(ctx context.Context, cc *clientConn, req api.Request) (any, *os.File, error) {
	var a api.WatchArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	sub, snap := h.events.subscribe(a.Team)
	defer h.events.unsubscribe(sub)
	raw, err := json.Marshal(snap)
	if err != nil {
		return nil, nil, fmt.Errorf("encode snapshot: %w", err)
	}
	if err := cc.send(api.Response{ID: req.ID, Event: raw}, nil); err != nil {
		return nil, nil, clientGone(err)
	}
	tick := time.NewTicker(watchPeerCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err() // answered as unavailable: the helper is stopping
		case <-sub.dropped:
			return nil, nil, &api.Error{Code: api.CodeLagged, Retryable: true, Message: fmt.Sprintf(
				"sessions.watch: this stream fell %d events behind and was dropped; subscribe again for a fresh snapshot", cap(sub.ch))}
		case raw := <-sub.ch:
			if err := cc.send(api.Response{ID: req.ID, Event: raw}, nil); err != nil {
				return nil, nil, clientGone(err)
			}
		case <-tick.C:
			if peerClosed(cc.c) {
				return nil, nil, clientGone(nil)
			}
		}
	}
}

// clientGone is the error of a stream whose client went away; it is not
// logged as a failure (the answer to it cannot be delivered anyway).
func clientGone(err error) error {
	return api.Errorf(api.CodeUnavailable, "the client closed the stream (%v)", err)
}
