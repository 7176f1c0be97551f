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
	watching map[string]watch // by unit
}

// watch is one unit's watch; its context ends when the watch does.
type watch struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// follow starts watching the units of the live sessions in ss that it does
// not watch yet (again, if a watch ended on its own: the manager connection
// was lost), and stops watching all others. Ended sessions stay listed by
// the helper, so watching them too would keep a manager connection open
// per session the team ever ran. Called from the loop's goroutine only.
func (w *watcher) follow(ctx context.Context, ss []controller.Session) {
	seen := map[string]bool{}
	for _, s := range ss {
		if s.Unit == "" || !s.Live() {
			continue
		}
		seen[s.Unit] = true
		if cur, ok := w.watching[s.Unit]; ok && cur.ctx.Err() == nil {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		ch, err := w.mgr.Watch(wctx, s.Unit)
		if err != nil {
			cancel()
			delete(w.watching, s.Unit)
			w.log.Warn("watch unit", "unit", s.Unit, "err", err)
			continue
		}
		w.watching[s.Unit] = watch{wctx, cancel}
		// Exits when wctx ends (stopAll, or the session is no longer live)
		// or the manager connection is lost; both close ch. Its context
		// ends with it, so the next follow watches the unit again.
		go func() {
			defer cancel()
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
	for u, cur := range w.watching {
		if !seen[u] {
			cur.cancel()
			delete(w.watching, u)
		}
	}
}

func (w *watcher) stopAll() {
	for u, cur := range w.watching {
		cur.cancel()
		delete(w.watching, u)
	}
}
