package activation

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/tmuxview"
)

// tmuxSyncInterval is how often the helper syncs its views.
const tmuxSyncInterval = 2 * time.Second

// viewsFile keeps the views across helper restarts (in the state dir).
const viewsFile = "tmux-views.json"

// tmuxViews are the views the helper keeps; while there is one, the helper
// does not exit when idle.
type tmuxViews struct {
	mu    sync.Mutex
	views map[string]api.TmuxViewArgs // by tmux session name
}

func (v *tmuxViews) empty() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.views) == 0
}

func (v *tmuxViews) list() []api.TmuxViewArgs {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]api.TmuxViewArgs, 0, len(v.views))
	for _, a := range v.views {
		out = append(out, a)
	}
	return out
}

// viewOf is the tmux session a tmux.view request names.
func viewOf(a api.TmuxViewArgs) tmuxview.View {
	return tmuxview.View{Socket: a.Socket, Session: a.Session}
}

// cmdTmuxView syncs the view once (its errors are the caller's) and from
// then on keeps it in step.
func (h *Helper) cmdTmuxView(ctx context.Context, _ *clientConn, req api.Request) (any, *os.File, error) {
	var a api.TmuxViewArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, nil, err
	}
	if a.Team == "" || a.Session == "" || !filepath.IsAbs(a.Bin) {
		return nil, nil, api.Errorf(api.CodeBadRequest, "tmux.view: want team, session and an absolute bin")
	}
	if err := h.syncView(ctx, a); err != nil {
		return nil, nil, err
	}
	h.views.mu.Lock()
	if h.views.views == nil {
		h.views.views = map[string]api.TmuxViewArgs{}
	}
	h.views.views[a.Session] = a
	h.views.mu.Unlock()
	h.saveViews()
	return struct{}{}, nil, nil
}

func (h *Helper) syncView(ctx context.Context, a api.TmuxViewArgs) error {
	ss := h.sessions.all()
	h.sessions.refresh(ctx, ss)
	views := make([]api.Session, 0, len(ss))
	for _, s := range ss {
		views = append(views, s.view())
	}
	return viewOf(a).Sync(ctx, TmuxWindows(a.Team, a.Bin, views))
}

// tmuxLoop syncs every view until ctx ends. A view whose tmux session was
// closed is dropped: closing it is how a person ends it.
func (h *Helper) tmuxLoop(ctx context.Context) error {
	h.loadViews()
	t := time.NewTicker(tmuxSyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if h.recovering.Load() {
			continue
		}
		changed := false
		for _, a := range h.views.list() {
			exists, err := viewOf(a).Exists(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				h.log.Warn("tmux view check failed", "view", a.Session, "err", err)
				continue
			}
			if !exists {
				h.views.mu.Lock()
				delete(h.views.views, a.Session)
				h.views.mu.Unlock()
				changed = true
				h.log.Info("tmux view closed", "view", a.Session, "team", a.Team)
				continue
			}
			if err := h.syncView(ctx, a); err != nil && ctx.Err() == nil {
				h.log.Warn("tmux view sync failed", "view", a.Session, "err", err)
			}
		}
		if changed {
			h.saveViews()
		}
	}
}

func (h *Helper) saveViews() {
	data, err := json.Marshal(h.views.list())
	if err == nil {
		err = writePrivate(filepath.Join(h.opts.StateDir, viewsFile), data)
	}
	if err != nil {
		h.log.Warn("save tmux views", "err", err)
	}
}

func (h *Helper) loadViews() {
	p := filepath.Join(h.opts.StateDir, viewsFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var list []api.TmuxViewArgs
	if err == nil {
		err = json.Unmarshal(data, &list)
	}
	if err != nil {
		aside, qerr := moveAside(p, filepath.Join(h.opts.StateDir, quarantineDir))
		h.log.Warn("unreadable tmux views file quarantined", "file", p, "moved_to", aside, "err", errors.Join(err, qerr))
		return
	}
	h.views.mu.Lock()
	h.views.views = map[string]api.TmuxViewArgs{}
	for _, a := range list {
		h.views.views[a.Session] = a
	}
	h.views.mu.Unlock()
}
