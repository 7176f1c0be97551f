package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/legion-dev/legion/activation/api"
	"github.com/legion-dev/legion/activation/kube/wire"
)

// maxRequest bounds a request line (a spawn carries the worker's spec).
const maxRequest = 4 << 20

// server is `legion-kube engine`: the helper's engines, one per target,
// behind package wire's JSON lines.
type server struct {
	life    context.Context
	mu      sync.Mutex
	engines map[string]*Engine
	wmu     sync.Mutex
	enc     *json.Encoder
}

// TargetKey is what tells targets apart: the kubeconfig, the context and
// the namespace (a spawn's image and limits may change between spawns).
func TargetKey(t api.KubeTarget) string {
	return t.Kubeconfig + "\x00" + t.Context + "\x00" + t.Namespace
}

// Serve answers the requests read from in on out until in ends or ctx is
// done; requests are served concurrently, each reply names its request.
func Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	s := &server{life: ctx, engines: map[string]*Engine{}, enc: json.NewEncoder(out)}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxRequest)
	var wg sync.WaitGroup
	defer wg.Wait()
	for sc.Scan() {
		var req wire.Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil || req.ID == 0 {
			return fmt.Errorf("legion-kube engine: bad request line %.80q: want a JSON request with an id", sc.Text())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := s.serve(ctx, req)
			rep.ID = req.ID
			s.write(rep)
		}()
	}
	return sc.Err()
}

func (s *server) write(r wire.Reply) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.enc.Encode(r) // the helper is gone: Serve ends with its stdin
}

func (s *server) serve(ctx context.Context, req wire.Request) wire.Reply {
	fail := func(err error) wire.Reply {
		var e *api.Error
		if !errors.As(err, &e) {
			e = api.Errorf(api.CodeUnavailable, "%v", err)
			e.Retryable = false
		}
		return wire.Reply{Error: e}
	}
	switch req.Op {
	case wire.OpStart, wire.OpSpawn, wire.OpKill:
		if req.Target == nil {
			return fail(api.Errorf(api.CodeBadRequest, "%s: no target", req.Op))
		}
		e, err := s.engine(ctx, *req.Target)
		if err != nil {
			return fail(err)
		}
		switch req.Op {
		case wire.OpSpawn:
			if req.Spawn == nil {
				return fail(api.Errorf(api.CodeBadRequest, "spawn: no session"))
			}
			started, err := e.Spawn(ctx, *req.Spawn)
			if err != nil {
				return fail(err)
			}
			return wire.Reply{Started: started}
		case wire.OpKill:
			if err := e.Kill(ctx, req.SessionID); err != nil {
				return fail(err)
			}
		}
		return wire.Reply{}
	case wire.OpList:
		var all []api.Session
		for _, e := range s.all() {
			for _, v := range e.Sessions() {
				if req.Name == "" || v.Name == req.Name {
					all = append(all, v)
				}
			}
		}
		return wire.Reply{Sessions: all}
	case wire.OpPod:
		for _, e := range s.all() {
			for _, v := range e.Sessions() {
				if v.Name != req.Name {
					continue
				}
				pod := e.RunningPod(v.ID)
				if pod == "" {
					return fail(api.Errorf(api.CodeNotRunning, "session %s has no running pod (job %s is %s)", v.Name, JobName(v.ID), v.State))
				}
				t := e.Target
				return wire.Reply{Pod: pod, Target: &t}
			}
		}
		return fail(api.Errorf(api.CodeNotFound, "no session named %q on a cluster", req.Name))
	case wire.OpTeamStop:
		var stopped []string
		var errs []error
		for _, e := range s.all() {
			names, err := e.TeamStop(ctx, req.Short)
			stopped = append(stopped, names...)
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return fail(err)
		}
		slices.Sort(stopped)
		return wire.Reply{Stopped: stopped}
	}
	return fail(api.Errorf(api.CodeBadRequest, "unknown op %q", req.Op))
}

// engine returns the running engine of t, starting it when new. Its
// Target is replaced by t: a spawn carries the team's current image and
// limits.
func (s *server) engine(ctx context.Context, t api.KubeTarget) (*Engine, error) {
	key := TargetKey(t)
	s.mu.Lock()
	if e, ok := s.engines[key]; ok {
		e.Target = t
		s.mu.Unlock()
		return e, nil
	}
	s.mu.Unlock()
	// Started without the lock: a cluster that does not answer must not
	// hold up the list of the others.
	cfg, err := Config(t)
	if err != nil {
		return nil, api.Errorf(api.CodeBadRequest, "%v", err)
	}
	e, err := New(cfg, t, func(id string) {
		if v, ok := s.session(key, id); ok {
			s.write(wire.Reply{Event: &v})
		}
	})
	if err != nil {
		return nil, api.Errorf(api.CodeBadRequest, "%v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	life, stop := context.WithCancel(s.life)
	if err := e.Start(life, wctx); err != nil {
		stop()
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.engines[key]; ok {
		stop() // another request started it meanwhile
		old.Target = t
		return old, nil
	}
	e.stop = stop // its informers run until the engine process ends
	s.engines[key] = e
	return e, nil
}

func (s *server) session(key, id string) (api.Session, bool) {
	s.mu.Lock()
	e := s.engines[key]
	s.mu.Unlock()
	if e == nil {
		return api.Session{}, false
	}
	return e.Session(id)
}

func (s *server) all() []*Engine {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Engine, 0, len(s.engines))
	for _, e := range s.engines {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *Engine) int { return strings.Compare(TargetKey(a.Target), TargetKey(b.Target)) })
	return out
}
