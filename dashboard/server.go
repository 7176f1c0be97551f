package dashboard

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// CookieName is the cookie that carries the token after a login.
const CookieName = "legion_web"

// maxBody bounds a JSON request body (a login, an answer).
const maxBody = 64 << 10

// Options configure a Server.
type Options struct {
	// Token is the secret a page must present (see TokenPath and
	// LoadToken). Required.
	Token string
	// Logger receives the server's log lines; nil discards them.
	Logger *slog.Logger
	// IdleExit, when positive, ends Run after this long with no page
	// connected and no request in flight (the socket-activated unit starts
	// again on the next connection). Zero means never.
	IdleExit time.Duration
	// ConfigPath is the legion.toml whose teams the board shows.
	ConfigPath string
	// HelperSocket is the helper's API socket; "" means api.SocketPath.
	HelperSocket string
	// Notify, when set, is told "READY=1" once Run serves (sd_notify for
	// the Type=notify unit).
	Notify func(state string)
	// TrackerRefresh is how often the board re-reads each team's tracker
	// while a page is connected; zero means DefaultTrackerRefresh. Session
	// changes are pushed at once; the tracker has no push.
	TrackerRefresh time.Duration
}

// Server is the dashboard's HTTP server: the embedded pages, the JSON API
// and the one event WebSocket per page. Create it with New; serve it with
// Run (listeners, idle exit, the event hub) or mount Handler elsewhere.
type Server struct {
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
	hub  *hub
	hist history // sessions' states seen on the stream, for the timeline (timeline.go)

	boards boards
	hooks  hooks // the GitHub webhook's seen deliveries (githook.go)

	active   atomic.Int64 // requests in flight + connected pages
	lastIdle atomic.Int64 // unix nanos when active last fell to 0
}

// New returns a Server for opts.
func New(opts Options) (*Server, error) {
	if len(opts.Token) < minTokenLen {
		return nil, errors.New("web server: no token (see dashboard.LoadToken)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.TrackerRefresh <= 0 {
		opts.TrackerRefresh = DefaultTrackerRefresh
	}
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux()}
	s.hub = newHub(s)
	s.lastIdle.Store(time.Now().UnixNano())
	s.routes()
	return s, nil
}

// routes registers every route. Paths under /api/ need the token (login
// excepted); everything else is the embedded app, which anyone may load
// (it holds no data). Neighbouring views register their routes here.
func (s *Server) routes() {
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	files := http.FileServerFS(static)
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("GET /login", s.index)

	s.mux.HandleFunc("POST /api/login", s.login)
	s.mux.HandleFunc("POST /api/logout", s.logout)
	s.mux.HandleFunc("GET /api/whoami", s.whoami)
	s.mux.HandleFunc("GET /api/events", s.events)
	s.mux.HandleFunc("GET /api/teams", s.teams)
	s.mux.HandleFunc("GET /api/board", s.board)
	s.sessionAPI().register(s.mux)
	s.mux.HandleFunc("GET /api/needs", s.needs)
	s.mux.HandleFunc("POST /api/needs/{team}/{id}/answer", s.answer)
	s.mux.HandleFunc("POST /api/limits/{team}/resume", s.resumeLimits)
	s.mux.HandleFunc("GET /api/timeline/{team}", s.timeline)
	s.mux.HandleFunc("POST /hooks/github/{team}", s.githubHook)
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no API route %s %s", r.Method, r.URL.Path)
	})
}

// Handler returns the server's handler: security headers, the Origin
// check on every non-GET request and every WebSocket upgrade, the token
// on every API route but the login, then the routes.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.enter()
		defer s.leave()
		h := w.Header()
		// style-src allows inline styles: xterm.js writes its theme and
		// cell sizes into <style> elements it creates (scripts stay 'self').
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if needsOriginCheck(r) {
			if err := checkOrigin(r); err != nil {
				writeError(w, http.StatusForbidden, "%v", err)
				return
			}
		}
		if strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/api/login" && !s.authorized(r) {
			writeError(w, http.StatusUnauthorized, "not logged in: open the URL that `legion web` prints (its token logs this browser in)")
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// needsOriginCheck is true for requests that change something or open a
// WebSocket: browsers send Origin on both, and a page of another site
// must not be able to make them with this browser's cookie.
func needsOriginCheck(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return isUpgrade(r)
	}
	return true
}

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// checkOrigin accepts a request whose Origin is this server itself (same
// host and port as the Host header), or one without Origin that is not a
// browser's (curl, the CLI: they carry the token themselves).
func checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			return errors.New("cross-site request refused (no Origin, Sec-Fetch-Site: cross-site)")
		}
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return fmt.Errorf("cross-site request refused: Origin %q is not a URL", origin)
	}
	if !strings.EqualFold(u.Host, r.Host) {
		return fmt.Errorf("cross-site request refused: Origin %s is not this dashboard (%s)", origin, r.Host)
	}
	return nil
}

// authorized reports whether r carries the token, in the login cookie or
// as "Authorization: Bearer <token>" (for scripts and tests).
func (s *Server) authorized(r *http.Request) bool {
	var got string
	if c, err := r.Cookie(CookieName); err == nil {
		got = c.Value
	} else if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		got = a
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) == 1
}

// index serves the app shell for / and /login (the login page's script
// reads the token from the URL's fragment, which never reaches a server).
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	b, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		writeError(w, http.StatusInternalServerError, "read the embedded index.html: %v", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

type loginRequest struct {
	Token string `json:"token"`
}

// login exchanges the token (POSTed by the login page from the URL's
// fragment) for an HttpOnly, SameSite=Strict cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "login: %v", err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(s.opts.Token)) != 1 {
		s.log.Warn("login refused: wrong token", "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, "login: wrong token: run `legion web` for the current login URL")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: s.opts.Token, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// enter and leave count requests in flight and connected pages, for the
// idle exit.
func (s *Server) enter() { s.active.Add(1) }
func (s *Server) leave() {
	if s.active.Add(-1) == 0 {
		s.lastIdle.Store(time.Now().UnixNano())
	}
}

// idleFor is how long nothing has been in flight (0 while something is).
func (s *Server) idleFor() time.Duration {
	if s.active.Load() > 0 {
		return 0
	}
	return time.Since(time.Unix(0, s.lastIdle.Load()))
}

// Run serves on every listener until ctx ends or, with IdleExit, until no
// page was connected and no request in flight for that long; both end it
// cleanly (nil). It runs the event hub (the helper's session stream and
// the trackers' refresh) for the pages, and closes its listeners and
// connections before it returns.
func (s *Server) Run(ctx context.Context, ls []net.Listener) error {
	if len(ls) == 0 {
		return errors.New("web server: no listener")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, l := range ls {
		g.Go(func() error {
			if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve on %s: %w", l.Addr(), err)
			}
			return nil
		})
	}
	g.Go(func() error { return s.hub.run(gctx) })
	if s.opts.Notify != nil {
		s.opts.Notify("READY=1")
	}
	if s.opts.IdleExit > 0 {
		g.Go(func() error {
			tick := time.NewTicker(min(s.opts.IdleExit/4, time.Second))
			defer tick.Stop()
			for {
				select {
				case <-gctx.Done():
					return nil
				case <-tick.C:
					if s.idleFor() >= s.opts.IdleExit {
						s.log.Info("idle: no page connected, exiting", "idle_exit", s.opts.IdleExit)
						cancel()
						return nil
					}
				}
			}
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		shut, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		err := srv.Shutdown(shut)
		if errors.Is(err, context.DeadlineExceeded) {
			err = srv.Close()
		}
		return err
	})
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// errorBody is every error response.
type errorBody struct {
	Error string `json:"error"`
}

// writeError answers with {"error": ...} and code.
func writeError(w http.ResponseWriter, code int, format string, a ...any) {
	writeJSON(w, code, errorBody{Error: fmt.Sprintf(format, a...)})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.Encode(v) // a failed write is the client gone; nothing to tell it
}

// readJSON decodes r's body (at most maxBody) into v, refusing unknown
// fields and trailing data.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode the JSON body: %w", err)
	}
	if dec.More() {
		return errors.New("decode the JSON body: data after the JSON value")
	}
	return nil
}
