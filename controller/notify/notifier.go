package notify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/bits"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/internal/atomicfile"
)

// Defaults of Options.
const (
	DefaultDigestAt = 3
	DefaultRetryMin = 5 * time.Second
	DefaultRetryMax = 10 * time.Minute
)

// StateFile is the notifier's file in the team's state directory.
const StateFile = "notify.json"

// Options configure New.
type Options struct {
	Team     string
	Channels []Channel
	Links    Links
	// StatePath is the JSON file of what was announced (StateFile in the
	// team's state directory); its directory must exist.
	StatePath string
	// DigestAt is how many waits due on a channel at once make one
	// digest instead of a message each (DefaultDigestAt when zero).
	DigestAt int
	// RetryMin and RetryMax bound the backoff between tries of a failed
	// send: RetryMin, doubling, at most RetryMax (the defaults when zero).
	RetryMin, RetryMax time.Duration
	Log                *slog.Logger
}

// Notifier announces waits on a team's channels. Observe is called after
// each tick; Run sends.
type Notifier struct {
	o    Options
	wake []chan struct{} // one per channel, buffered 1

	mu    sync.Mutex
	state stateFile
}

// stateFile is notify.json.
type stateFile struct {
	Version int                `json:"version"`
	Waits   map[string]*record `json:"waits"`
}

// record is one wait and its delivery on each channel.
type record struct {
	Wait      controller.Wait      `json:"wait"`
	FirstSeen time.Time            `json:"first_seen"`
	Channels  map[string]*delivery `json:"channels"`
}

// delivery is a wait's state on one channel.
type delivery struct {
	Sent    time.Time `json:"sent,omitzero"`     // when the channel took it (or was skipped)
	Skipped string    `json:"skipped,omitempty"` // why it was not sent (ErrUnavailable)
	Tries   int       `json:"tries,omitempty"`   // failed tries so far
	Next    time.Time `json:"next,omitzero"`     // no try before this
	Err     string    `json:"error,omitempty"`   // the last failure
}

// New returns the notifier of o, with what o.StatePath says was sent
// already. A missing file is an empty one; an unreadable or corrupt one
// is an error naming it.
func New(o Options) (*Notifier, error) {
	if o.DigestAt <= 0 {
		o.DigestAt = DefaultDigestAt
	}
	o.RetryMin = cmp.Or(o.RetryMin, DefaultRetryMin)
	o.RetryMax = cmp.Or(o.RetryMax, DefaultRetryMax)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	names := map[string]bool{}
	for _, c := range o.Channels {
		if names[c.Name()] {
			return nil, fmt.Errorf("notify: two channels named %q", c.Name())
		}
		names[c.Name()] = true
	}
	n := &Notifier{o: o, state: stateFile{Version: 1, Waits: map[string]*record{}}}
	for range o.Channels {
		n.wake = append(n.wake, make(chan struct{}, 1))
	}
	data, err := os.ReadFile(o.StatePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("notify: read %s: %w", o.StatePath, err)
	default:
		if err := json.Unmarshal(data, &n.state); err != nil {
			return nil, fmt.Errorf("notify: read %s: want the notifier's JSON (delete it to announce every open wait again): %w", o.StatePath, err)
		}
		if n.state.Waits == nil {
			n.state.Waits = map[string]*record{}
		}
		// A restart retries at once what was failing: it may be what
		// fixed the channel (a new token, the network back). Entries a
		// hand or a disk mangled into nulls are dropped.
		for k, r := range n.state.Waits {
			if r == nil {
				delete(n.state.Waits, k)
				continue
			}
			for c, d := range r.Channels {
				if d == nil {
					delete(r.Channels, c)
					continue
				}
				d.Next = time.Time{}
			}
		}
	}
	return n, nil
}

// Observe takes what waits after a tick (controller.TickResult.Waits of
// a tick without error): a wait not announced yet, or New, is queued on
// every channel; a wait no longer listed is forgotten, sent or not. It
// writes notify.json when anything changed and wakes Run; it never sends.
func (n *Notifier) Observe(waits []controller.Wait, now time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	changed := false
	seen := map[string]bool{}
	for _, w := range waits {
		seen[w.Key] = true
		if r := n.state.Waits[w.Key]; r != nil && !w.New {
			continue
		}
		r := &record{Wait: w, FirstSeen: now.UTC(), Channels: map[string]*delivery{}}
		for _, c := range n.o.Channels {
			r.Channels[c.Name()] = &delivery{}
		}
		n.state.Waits[w.Key] = r
		changed = true
		n.o.Log.Info("notify: a wait began", "issue", w.Issue, "kind", string(w.Kind), "key", w.Key)
	}
	for k := range n.state.Waits {
		if !seen[k] {
			delete(n.state.Waits, k)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	err := n.saveLocked()
	for _, c := range n.wake {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	return err
}

// saveLocked writes notify.json; n.mu is held.
func (n *Notifier) saveLocked() error {
	data, err := json.MarshalIndent(n.state, "", "  ")
	if err != nil {
		return fmt.Errorf("notify: encode %s: %w", n.o.StatePath, err)
	}
	if err := atomicfile.WritePrivate(n.o.StatePath, append(data, '\n')); err != nil {
		return fmt.Errorf("notify: write %s: %w", n.o.StatePath, err)
	}
	return nil
}

// Run sends queued waits on every channel until ctx ends, each channel
// in a goroutine of its own that ends with ctx (Run waits for them); it
// returns nil then.
func (n *Notifier) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for i, c := range n.o.Channels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.runChannel(ctx, c, n.wake[i])
		}()
	}
	wg.Wait()
	return nil
}

// runChannel sends what is due on c, then sleeps until the next retry or
// a wake.
func (n *Notifier) runChannel(ctx context.Context, c Channel, wake <-chan struct{}) {
	log := n.o.Log.With("channel", c.Name())
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		batches, next := n.due(c.Name(), time.Now())
		for _, b := range batches {
			n.send(ctx, c, b, log)
			if ctx.Err() != nil {
				return
			}
		}
		if len(batches) > 0 {
			continue // sends take time: look again before sleeping
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), 0)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
	}
}

// due are the batches of waits due on channel ch at now (a digest when
// DigestAt or more are due, else one each, oldest first), and when the
// next not yet due is (zero: none).
func (n *Notifier) due(ch string, now time.Time) ([][]*record, time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ready []*record
	var next time.Time
	for _, r := range n.state.Waits {
		d := r.Channels[ch]
		if d == nil || !d.Sent.IsZero() {
			continue
		}
		if d.Next.After(now) {
			if next.IsZero() || d.Next.Before(next) {
				next = d.Next
			}
			continue
		}
		ready = append(ready, r)
	}
	slices.SortFunc(ready, func(a, b *record) int {
		return cmp.Or(a.Wait.Since.Compare(b.Wait.Since), cmp.Compare(a.Wait.Key, b.Wait.Key))
	})
	if len(ready) == 0 {
		return nil, next
	}
	if len(ready) >= n.o.DigestAt {
		return [][]*record{ready}, next
	}
	var out [][]*record
	for _, r := range ready {
		out = append(out, []*record{r})
	}
	return out, next
}

// send delivers one batch on c and records the outcome. A record's Wait
// is never changed once made, so it is read without the lock.
func (n *Notifier) send(ctx context.Context, c Channel, batch []*record, log *slog.Logger) {
	items := make([]Item, 0, len(batch))
	for _, r := range batch {
		items = append(items, itemOf(r.Wait))
	}
	m := newMessage(EventNeedsYou, n.o.Team, n.o.Links, items, time.Now())
	answer, err := c.Send(ctx, m)
	if err != nil && ctx.Err() != nil {
		return // cut short by the shutdown: the next run tries again
	}
	now := time.Now().UTC()
	n.mu.Lock()
	defer n.mu.Unlock()
	tries := 0
	for _, r := range batch {
		d := r.Channels[c.Name()]
		if n.state.Waits[r.Wait.Key] != r || d == nil {
			continue // it ended, or began again, while this was sent
		}
		switch {
		case err == nil:
			*d = delivery{Sent: now}
		case errors.Is(err, ErrUnavailable):
			*d = delivery{Sent: now, Skipped: err.Error()}
		default:
			d.Tries++
			d.Next = now.Add(n.backoff(d.Tries))
			d.Err = err.Error()
			tries = max(tries, d.Tries)
		}
	}
	if serr := n.saveLocked(); serr != nil {
		log.Error("notify: record what was sent", "err", serr)
	}
	switch {
	case err == nil:
		log.Info("notify: sent", "waits", len(batch), "delivery", m.Delivery, "answer", answer)
	case errors.Is(err, ErrUnavailable):
		log.Debug("notify: channel unavailable, skipped", "waits", len(batch), "why", err)
	case bits.OnesCount(uint(tries)) == 1: // tries 1, 2, 4, 8...: a failing channel logs less and less
		log.Warn("notify: send failed, retrying", "waits", len(batch), "tries", tries, "next", n.backoff(tries), "err", err)
	default:
		log.Debug("notify: send failed, retrying", "waits", len(batch), "tries", tries, "err", err)
	}
}

// backoff is the wait after the tries-th failed try.
func (n *Notifier) backoff(tries int) time.Duration {
	d := n.o.RetryMin
	for i := 1; i < tries && d < n.o.RetryMax; i++ {
		d *= 2
	}
	return min(d, n.o.RetryMax)
}

// Answer is what one channel answered to Test.
type Answer struct {
	Channel string `json:"channel"`
	Answer  string `json:"answer,omitempty"`
	Err     string `json:"error,omitempty"`
	Skipped bool   `json:"skipped,omitempty"` // ErrUnavailable
}

// Test sends Sample to every channel once, without retries or state, and
// returns what each answered, in order.
func Test(ctx context.Context, team string, l Links, channels []Channel) []Answer {
	m := Sample(team, l, time.Now())
	out := make([]Answer, 0, len(channels))
	for _, c := range channels {
		a := Answer{Channel: c.Name()}
		ans, err := c.Send(ctx, m)
		switch {
		case err == nil:
			a.Answer = ans
		case errors.Is(err, ErrUnavailable):
			a.Skipped, a.Err = true, err.Error()
		default:
			a.Err = err.Error()
		}
		out = append(out, a)
	}
	return out
}
