package service

import (
	"context"
	"log/slog"

	"github.com/legion-dev/legion/controller"
	"github.com/legion-dev/legion/units"
)

// watcher follows the units of the team's live sessions and wakes the loop
// when one changes state (exits, fails, is restarted), so the controller
// reacts at once instead of at the next interval.
type watcher struct {
	mgr      *units.Manager
	wake     chan<- struct{}
	log      *slog.Logger
	watching map[string]context.CancelFunc // unit → stops its watch
}

// follow starts watching the units of ss it does not watch yet and stops
// watching units no longer listed. Called from the loop's goroutine only.
func (w *watcher) follow(ctx context.Context, ss []controller.Session) {
	seen := map[string]bool{}
	for _, s := range ss {
		if s.Unit == "" {
			continue
		}
		seen[s.Unit] = true
		if _, ok := w.watching[s.Unit]; ok {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		ch, err := w.mgr.Watch(wctx, s.Unit)
		if err != nil {
			cancel()
			w.log.Warn("watch unit", "unit", s.Unit, "err", err)
			continue
		}
		w.watching[s.Unit] = cancel
		// Exits when wctx ends (stopAll, or the unit is no longer listed)
		// or the manager connection is lost; both close ch.
		go func() {
			first := true
			for range ch {
				if first { // the current state, not a change
					first = false
					continue
				}
				select {
				case w.wake <- struct{}{}:
				default:
				}
			}
		}()
	}
	for u, cancel := range w.watching {
		if !seen[u] {
			cancel()
			delete(w.watching, u)
		}
	}
}

func (w *watcher) stopAll() {
	for u, cancel := range w.watching {
		cancel()
		delete(w.watching, u)
	}
}
